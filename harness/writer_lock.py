"""One lock for every writer of a campaign (run, ingest, report): a flock on campaign.lock (the
kernel drops it however its process ends) that names its holder. Reports and ingests wait for the
holder (they end in minutes); a second ``harness run`` is refused (exit 2: it would run the same
arms twice); a process takes it once. Taking it removes what killed writers left behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness.errors import CampaignLocked, HarnessError
from harness.safe_write import WriteError, refuse_linked_folders
from harness.store import CampaignDir

WRITERS = ("run", "ingest", "report")

# The harness's own temporary names, and nothing else: safe_write's ``.NAME.<12 hex>.tmp`` (media's
# too) and ingest's staging folders ``runs/.KEY.<8>`` and ``.KEY.old``.
TEMP_FILE = re.compile(r"^\..+\.[0-9a-f]{12}\.tmp$")
STAGING_DIR = re.compile(r"^\..+\.([a-z0-9_]{8}|old)$")
LIVE_STATUSES = ("pending", "running")  # a run folder that may have a live runner (Slurm, an orphan)


@dataclass(frozen=True)
class LockHolder:
    pid: int
    host: str
    started_at: str
    command: str = ""
    writer: str = "run"  # run, ingest or report (a lock file of an older harness: a run)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started_at}"


UNKNOWN_HOLDER = LockHolder(0, "unknown host", "at an unknown time")


def _read_holder(fd: int) -> LockHolder | None:
    try:
        raw = os.pread(fd, 4096, 0)
        data = json.loads(raw.decode()) if raw.strip() else None
        writer = str(data.get("writer", "run"))
        return LockHolder(
            int(data["pid"]), str(data["host"]), str(data["started_at"]), str(data.get("command", "")),
            writer if writer in WRITERS else "run",
        )  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def lock_holder(campaign: CampaignDir) -> LockHolder | None:
    """Who holds the campaign's lock now (None: nobody); takes nothing and creates nothing."""
    import fcntl

    try:
        fd = os.open(campaign.lock_file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        return _read_holder(fd) or UNKNOWN_HOLDER
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


_HELD: dict[str, CampaignLock] = {}  # campaign folder -> the lock this process holds on it


class CampaignLock:
    """The campaign's writer lock, held by ``writer`` for its whole work (``on_wait`` told the holder
    first); taking it removes what killed writers left."""

    RETRY_S = 0.5  # a dry run probing the lock holds it for microseconds; ride over that

    def __init__(
        self, campaign: CampaignDir, writer: str = "run", on_wait: Callable[[LockHolder], None] | None = None
    ):
        self.campaign = campaign
        self.writer = writer
        self.on_wait = on_wait
        self.fd: int | None = None
        self.nested = False  # this process already held it: nothing taken, nothing released
        self.took_over: LockHolder | None = None

    @property
    def _key(self) -> str:
        return os.path.realpath(self.campaign.path)

    def acquire(self) -> CampaignLock:
        import fcntl

        if self._key in _HELD:
            self.nested = True
            return self
        path = self.campaign.lock_file
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as err:
            raise WriteError(path, err, "cannot create the lock file") from None
        try:
            self._take(fd, fcntl)
        except BaseException:
            os.close(fd)
            raise
        self.took_over = _read_holder(fd)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join(sys.argv), "writer": self.writer}  # fmt: skip
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
            os.fsync(fd)
        except OSError as err:  # a full disk: the writer could record nothing either
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise WriteError(path, err, "cannot write the lock file") from None
        self.fd = fd
        _HELD[self._key] = self
        try:
            # Every writer's first look: a folder linked out of the campaign is refused; leftovers go.
            refuse_linked_folders(self.campaign.path)
            remove_stale_temps(self.campaign.path)
        except BaseException:
            self.release()
            raise
        return self

    def _take(self, fd: int, fcntl) -> None:
        deadline = time.monotonic() + self.RETRY_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
            except OSError as err:
                raise HarnessError(
                    f"{self.campaign.lock_file}: cannot lock the campaign ({err.strerror})"
                ) from None
            holder = _read_holder(fd)
            if self.writer == "run" and (holder is None or holder.writer == "run"):
                who = holder.describe() if holder else "a process that has not written its name yet"
                raise CampaignLocked(
                    f"{self.campaign.path}: another harness run holds this campaign ({who}; lock file "
                    f"{self.campaign.lock_file}); wait for it to end or stop it"
                )
            if self.on_wait is not None:
                self.on_wait(holder or UNKNOWN_HOLDER)
            fcntl.flock(fd, fcntl.LOCK_EX)  # blocks until the holder lets go (Ctrl-C stops it)
            return

    def release(self) -> None:
        import fcntl

        if self.fd is None:
            return
        _HELD.pop(self._key, None)
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)  # a clean end leaves no holder behind
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> CampaignLock:
        return self if self.fd is not None or self.nested else self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _may_be_live(run_folder: Path) -> bool:
    """run.json says pending or running: its runner may live on without the lock (files left alone)."""
    try:
        return json.loads((run_folder / "run.json").read_bytes()).get("status") in LIVE_STATUSES
    except (OSError, ValueError, AttributeError):
        return False


def remove_stale_temps(root: Path) -> None:
    """Remove (best effort) the temp files and staging folders killed writers left under ``root``."""
    root = Path(root)
    runs = root / "runs"
    for folder, dirs, files in os.walk(root):  # symbolic links are not followed
        here = Path(folder)
        if here.parent == runs and _may_be_live(here):
            dirs[:] = []
            continue
        if here == runs:
            for name in list(filter(STAGING_DIR.match, dirs)):
                dirs.remove(name)
                if not (here / name).is_symlink():
                    shutil.rmtree(here / name, ignore_errors=True)
        for name in filter(TEMP_FILE.match, files):
            with contextlib.suppress(OSError):
                (here / name).unlink()
