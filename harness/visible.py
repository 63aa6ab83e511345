"""Text from records made safe to show: control and direction characters written out, not obeyed.

Stdlib only: the CLI's plain lines use it before any heavy import (``harness --help`` stays lean)."""

from __future__ import annotations

# What a terminal or a text viewer would act on rather than show: C0 controls but tab and new line,
# DEL, C1 controls, and the bidirectional marks, embeddings, overrides and isolates (a line that
# reads backwards). Shown as Python writes them (``\x1b``, ``\u202e``): read, never obeyed.
_UNSEEN = [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F,
           *range(0x202A, 0x202F), *range(0x2066, 0x206A)]  # fmt: skip
_VISIBLE = str.maketrans({c: ascii(chr(c))[1:-1] for c in _UNSEEN})


def visible(text: str) -> str:
    """``text`` with every control and bidirectional-override character written out as its escape:
    the one guard for strings from records on their way to a terminal or into Markdown."""
    return str(text).translate(_VISIBLE)
