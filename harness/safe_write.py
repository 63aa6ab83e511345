"""Every file the harness writes goes through here: atomic (temp file, rename); a failure is a
``WriteError`` (one line, exit 3, no temp file left). A name from a record becomes a path only by
``resolve_under`` or ``file_name`` (else ``UnsafePathError``), never through a linked campaign
folder. Tests inject faults: ``HARNESS_FAULT_WRITE=ERRNO[:NAME[:N]]`` (``ENOSPC:run.json:3``) fails
the writes of files matching NAME, from the N-th on, after half of the bytes were written."""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path, PurePosixPath
from typing import Any

from harness.errors import Exit, HarnessError, UsageError

FAULT_ENV = "HARNESS_FAULT_WRITE"
CAMPAIGN_MARKER = "campaign.json"  # store.CAMPAIGN_JSON (store is a layer above this one)
NAME_MAX = 120  # characters of a file name made from a record's name


class WriteError(HarnessError, OSError):
    """A file or folder that could not be written (no space, read-only, no permission): exit 3."""

    exit_code = Exit.RUN_FAILED

    def __init__(self, path: os.PathLike | str, err: OSError, what: str = "cannot write"):
        OSError.__init__(self, err.errno, err.strerror, str(path))
        self.message = f"{path}: {what} ({err.strerror or err}){_hint(err.errno)}"

    def __str__(self) -> str:
        return self.message


def _hint(code: int | None) -> str:
    if code in (errno.ENOSPC, errno.EDQUOT):
        return "; free some space and run the same command again"
    return "; the file system is mounted read-only" if code == errno.EROFS else ""


class UnsafePathError(HarnessError):
    """A name that would put a file outside its folder (exit 3); not an OSError, so no "read-only"
    handler takes it for a full disk and goes on."""

    exit_code = Exit.RUN_FAILED


_NOT_PLAIN = re.compile(r"[^A-Za-z0-9_.-]")


def file_name(text: str) -> str:
    """``text`` from a record as one plain file name: letters, digits and ``_ . -``, no leading dot,
    never empty; one longer than NAME_MAX is cut and ends with a hash of the whole."""
    name = _NOT_PLAIN.sub("_", text)
    if name.startswith("."):
        name = "_" + name[1:]
    if len(name) > NAME_MAX:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        name = f"{name[: NAME_MAX - 11]}_{digest}"
    return name or "_"


def is_plain_name(text: str) -> bool:
    """``text`` is one plain file name already: letters, digits and ``_ . -``, no leading dot."""
    return bool(text) and not text.startswith(".") and _NOT_PLAIN.search(text) is None


def _why_not_relative(rel: str) -> str | None:
    if "\x00" in rel:
        return "holds a NUL character"
    if rel.startswith("/"):
        return "is an absolute path"
    parts = PurePosixPath(rel).parts
    if not parts:
        return "names no file"
    if ".." in parts:
        return "climbs out with '..'"
    return None


def _link_line(root: Path, link: Path) -> str:
    target = ""
    with contextlib.suppress(OSError):
        target = f" (to {os.readlink(link)})"
    return (
        f"{link}: a symbolic link{target} inside {root}; the harness writes only into folders of its own "
        "(copy the folder in, or remove the link): refused, nothing written"
    )


def _first_link(root: Path, parts: Sequence[str]) -> Path | None:
    """The first of root/parts[0], root/parts[0]/parts[1], ... that is a symbolic link."""
    here = root
    for part in parts:
        here = here / part
        if here.is_symlink():
            return here
        if not here.exists():
            return None  # nothing below a missing folder exists yet
    return None


def resolve_under(root: os.PathLike | str, rel: str, what: str) -> Path:
    """``root``/``rel`` once sure to lie under ``root`` (relative, no ``..``, NUL or symbolic link on
    the way); else UnsafePathError naming ``what``, before anything is written."""
    root = Path(root)
    rel = os.fspath(rel)
    why = _why_not_relative(rel)
    if why is not None:
        raise UnsafePathError(
            f"{what}: {rel!r} {why}; it would be written outside {root}: refused, nothing written"
        )
    link = _first_link(root, PurePosixPath(rel).parts)
    if link is not None:
        raise UnsafePathError(f"{what}: {_link_line(root, link)}")
    return root / rel


def check_campaign_path(path: os.PathLike | str) -> None:
    """Refuse a write through a linked folder of the nearest campaign above; the campaign may be a link
    itself (``latest -> c1``) unless it lies inside another campaign."""
    path = Path(os.path.abspath(path))
    above = path.parents
    at = next((i for i, folder in enumerate(above) if (folder / CAMPAIGN_MARKER).is_file()), None)
    if at is None:
        return
    campaign = above[at]
    link = _first_link(campaign, path.parent.relative_to(campaign).parts)
    if link is None and campaign.is_symlink():
        outer = next((f for f in above[at + 1 :] if (f / CAMPAIGN_MARKER).is_file()), None)
        if outer is not None:
            campaign, link = outer, above[at]
    if link is not None:
        raise UnsafePathError(_link_line(campaign, link))


def refuse_linked_folders(root: os.PathLike | str) -> None:
    """UnsafePathError naming the first symbolic link to a folder below ``root`` (checked by writers)."""
    for top, dirs, _files in os.walk(root):  # a link to a folder is listed in dirs, never entered
        link = next((Path(top, n) for n in sorted(dirs) if Path(top, n).is_symlink()), None)
        if link is not None:
            raise UnsafePathError(_link_line(Path(root), link))


_FAULT_COUNTS: dict[str, int] = {}


def _injected_fault(path: Path) -> OSError | None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    name, _, rest = spec.partition(":")
    pattern, _, nth = rest.partition(":")
    if pattern and not fnmatch.fnmatch(path.name, pattern):
        return None
    _FAULT_COUNTS[pattern] = seen = _FAULT_COUNTS.get(pattern, 0) + 1
    if nth.isdigit() and seen < int(nth):
        return None
    code = getattr(errno, name, errno.ENOSPC)
    return OSError(code, os.strerror(code), str(path))


def create_temp_beside(path: Path) -> tuple[int, Path]:
    """A new temp file ``.NAME.<12 hex>.tmp`` next to ``path`` (the name writer_lock removes when stale),
    created with mode 0666 less the umask (as open() would)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


_FAILED_WRITES: ContextVar[tuple[str, list[WriteError]] | None] = ContextVar("failed_writes", default=None)


@contextlib.contextmanager
def failed_writes(under: os.PathLike | str) -> Iterator[list[WriteError]]:
    """The writes under ``under`` that failed inside the block, even where the caller went on (a
    report missing a PNG must not pass for complete)."""
    seen: list[WriteError] = []
    token = _FAILED_WRITES.set((os.path.realpath(under), seen))
    try:
        yield seen
    finally:
        _FAILED_WRITES.reset(token)


def _is_under(path: str | None, root: str) -> bool:
    full = os.path.realpath(path) if path else None
    return full is not None and (full == root or full.startswith(root.rstrip(os.sep) + os.sep))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temp file beside it and rename (never half a file); a WriteError is also recorded
    for ``failed_writes``."""
    try:
        _write_atomically(Path(path), data)
    except WriteError as err:
        journal = _FAILED_WRITES.get()
        if journal is not None and _is_under(err.filename, journal[0]):
            journal[1].append(err)
        raise


def _write_atomically(path: Path, data: bytes) -> None:
    check_campaign_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # FileExistsError too: a file where a folder should be
        raise WriteError(path.parent, err, "cannot create the folder") from None
    try:
        fd, tmp = create_temp_beside(path)
    except OSError as err:
        raise WriteError(path, err) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fault = _injected_fault(path)
            if fault is not None:
                fh.write(data[: len(data) // 2])
                raise fault
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, WriteError):
            raise WriteError(path, exc) from None
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def write_step_latents(folder: Path, step: int, arrays: dict[str, Any]) -> None:
    """``folder/step_NNN.npz`` (``harness.compare.latents`` reads it), renamed into place when whole."""
    import numpy as np

    tmp = folder / f".step_{step:03d}.tmp.npz"
    np.savez(tmp, **arrays)
    tmp.replace(folder / f"step_{step:03d}.npz")


def check_writable_dir(folder: Path, flag: str) -> None:
    """UsageError naming ``flag`` (exit 2) unless files can be written in ``folder`` (or the nearest
    folder above, creating nothing)."""
    folder = Path(folder)
    probe = folder
    while not probe.exists() and probe != probe.parent:
        if probe.is_symlink():  # a broken link where the folder should be
            raise UsageError(f"{flag}: {probe}: a broken symbolic link, not a folder")
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"{flag}: {probe}: not a folder")
    try:
        fd, tmp = create_temp_beside(probe / "write-check")
        os.close(fd)
        tmp.unlink()
    except OSError as err:
        raise UsageError(
            f"{flag}: {folder}: cannot write there ({err.strerror or err}){_hint(err.errno)}"
        ) from None


BACKUP_PREFIX = ".backup-"


def link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)  # every writer here replaces files (a new inode): the link keeps the old one
    except OSError:
        shutil.copy2(src, dst)


@contextlib.contextmanager
def restored_on_failure(folder: Path, names: Sequence[str]) -> Iterator[None]:
    """``names`` in ``folder`` put back as they were when the block raises (Ctrl-C too), by a hard-link
    snapshot: a report's pages and assets/ are replaced whole or not at all."""
    folder = Path(folder)
    refuse_linked_folders(folder)
    for stale in folder.glob(f"{BACKUP_PREFIX}*"):  # left by a process that was killed outright
        shutil.rmtree(stale, ignore_errors=True)
    backup: Path | None = folder / f"{BACKUP_PREFIX}{secrets.token_hex(4)}"
    existed = [n for n in names if os.path.lexists(folder / n)]
    try:
        backup.mkdir()
        for name in existed:
            src, dst = folder / name, backup / name
            if src.is_dir() and not src.is_symlink():
                shutil.copytree(src, dst, copy_function=link_or_copy, symlinks=True)
            else:
                link_or_copy(str(src), str(dst))
    except OSError:
        shutil.rmtree(backup, ignore_errors=True)
        backup = None
    try:
        yield
    except BaseException:
        if backup is not None:
            _put_back(folder, backup, names, existed)
        raise
    finally:
        if backup is not None:
            shutil.rmtree(backup, ignore_errors=True)


def _put_back(folder: Path, backup: Path, names: Sequence[str], existed: Sequence[str]) -> None:
    for name in names:
        current = folder / name
        try:
            if current.is_dir() and not current.is_symlink():
                shutil.rmtree(current)
            else:
                current.unlink(missing_ok=True)
            if name in existed:
                os.replace(backup / name, current)
        except OSError:
            continue  # best effort: what could not be put back stays as the failed build left it
