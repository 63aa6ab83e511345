"""The names of diffusers' attention dispatcher, read from the installed diffusers without importing it.

Importing diffusers takes seconds (torch, huggingface_hub, its lazy modules); checking an arm's
backend name at scenario load must not. The names are the string values of
``diffusers.models.attention_dispatch.AttentionBackendName``, read from that module's source.
Whether a named backend can run here is the pre-flight's question (``probe``), not this one's.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import importlib.util
from pathlib import Path

DISPATCH_FILE = Path("models") / "attention_dispatch.py"
ENUM_CLASS = "AttentionBackendName"


def installed_diffusers() -> str | None:
    """The installed diffusers version, None when it is not installed."""
    try:
        return md.version("diffusers")
    except md.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=4)
def _names_in(path: str) -> tuple[str, ...] | None:
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == ENUM_CLASS:
            values = [
                item.value.value
                for item in node.body
                if isinstance(item, ast.Assign)
                and isinstance(item.value, ast.Constant)
                and isinstance(item.value.value, str)
            ]
            return tuple(values) or None
    return None


def dispatcher_names() -> list[str] | None:
    """The dispatcher's backend names (sorted), or None when diffusers is not installed or unreadable."""
    spec = importlib.util.find_spec("diffusers")  # a top-level lookup imports nothing
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / DISPATCH_FILE
        if path.is_file():
            names = _names_in(str(path))
            return sorted(names) if names else None
    return None
