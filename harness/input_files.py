"""The files a user hands the harness, checked before they are read so that any problem is one line
naming the file (missing, a link loop, a folder, unreadable, empty, too large, not UTF-8); nothing
guesses an encoding or reads unbounded."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from harness.errors import HarnessError

MiB = 1 << 20
# Upper bounds per kind of input: far above any real one, low enough that a wrong file (a video
# given as a scenario, /dev/zero) is refused in a line instead of filling memory.
MAX_YAML_BYTES = 16 * MiB  # scenarios, gates, manifests
MAX_JSON_BYTES = 256 * MiB  # config JSON, results.json, run records
MAX_LOG_BYTES = 2048 * MiB  # LightX2V logs (read whole: the parser needs every line)


class InputError(HarnessError):
    """An input file that cannot be read (exit 2); the message names it."""


def check_input(path: str | os.PathLike, what: str = "file", *, max_bytes: int | None = None,
                allow_empty: bool = False) -> Path:  # fmt: skip
    """``path`` when it is a readable regular file of at most ``max_bytes``; else InputError."""
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as err:
        raise InputError(f"{p}: {what} {_stat_problem(p, err)}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{p}: {what} is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{p}: {what} is not a regular file (a device, pipe or socket)")
    if st.st_size == 0 and not allow_empty:
        raise InputError(f"{p}: {what} is empty (0 bytes)")
    if max_bytes is not None and st.st_size > max_bytes:
        raise InputError(f"{p}: {what} is {_size(st.st_size)}, more than the {_size(max_bytes)} accepted")
    if not os.access(p, os.R_OK):
        raise InputError(f"{p}: {what} cannot be read (permission denied)")
    return p


_PROBLEMS = {
    errno.ELOOP: "is a symbolic link loop (a link that points back at itself)",
    errno.ENOTDIR: "not found (a part of its path is a file, not a folder)",
    errno.EACCES: "cannot be read (permission denied)",
    errno.ENAMETOOLONG: "not found (the name is too long)",
}


def _stat_problem(p: Path, err: OSError) -> str:
    if err.errno == errno.ENOENT:
        return f"is a broken symbolic link (to {os.readlink(p)})" if p.is_symlink() else "not found"
    return _PROBLEMS.get(err.errno, f"cannot be read ({err.strerror or err})")


def _size(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n} bytes"


def read_input_bytes(path: str | os.PathLike, what: str = "file", *, max_bytes: int = MAX_JSON_BYTES,
                     allow_empty: bool = False) -> bytes:  # fmt: skip
    """The bytes of an input file, checked by ``check_input`` (and its size again after reading)."""
    p = check_input(path, what, max_bytes=max_bytes, allow_empty=allow_empty)
    try:
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as err:
        raise InputError(f"{p}: {what} {_stat_problem(p, err)}") from None
    if len(data) > max_bytes:
        raise InputError(f"{p}: {what} is more than the {_size(max_bytes)} accepted")
    return data


def decode_utf8(data: bytes, source: str, what: str = "file") -> str:
    """``data`` as UTF-8 text (one leading BOM dropped); else one line naming line and byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        start = err.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        line = data.count(b"\n", 0, start) + 1
        raise InputError(
            f"{source}:{line}: {what} is not UTF-8 text (byte 0x{data[start]:02x} at offset {start}; "
            "save it as UTF-8)"
        ) from None


def read_input_text(path: str | os.PathLike, what: str = "file", *, max_bytes: int = MAX_YAML_BYTES,
                    allow_empty: bool = False) -> str:  # fmt: skip
    """An input file as UTF-8 text; any problem is one InputError line naming the file."""
    data = read_input_bytes(path, what, max_bytes=max_bytes, allow_empty=allow_empty)
    return decode_utf8(data, str(path), what)
