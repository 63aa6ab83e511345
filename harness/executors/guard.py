"""Keeps a runner from outliving the harness process that started it: ``python -m harness.executors.guard
FD -- COMMAND...`` (what ``execute_run`` launches, leading a new session) runs COMMAND in its group and
waits. ``FD`` is the read end of a pipe whose write end only the harness holds and never writes: it
reads end-of-file exactly when the harness is gone, however it died (SIGKILL included); then the guard
stops the whole group, torchrun's ranks included. Signals sent to the group reach the runner directly;
the guard exits as the runner did. A process that leaves the group (``setsid``, a daemon) is reparented
to the guard (a Linux child subreaper) and ended with the runner, so nothing of an arm outlives it.
The runner's stdout and stderr pass through the guard into the run's logs, each capped (``CappedLog``)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping

ORPHAN_GRACE_S = 5.0  # SIGTERM first, SIGKILL after this long
POLL_S = 0.2
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
LOG_CAP_ENV = "HARNESS_LOG_CAP_BYTES"
LOG_CAP = 64 << 20  # bytes of each log a run keeps: an arm printing megabytes a call fills no disk
CUT = b"\n[harness: %d bytes of this log cut here: a log keeps its first %d bytes and its newest]\n"


class CappedLog:
    """One stream of the runner copied to the guard's own (the run's log file), at most ``cap`` bytes
    and a line: its first quarter kept, then the newest output after a line saying how much was cut."""

    def __init__(self, src: int, dst: int, cap: int):
        self.src, self.dst, self.cap, self.head = src, dst, cap, cap // 4
        self.size = self.cut = self.mark = 0  # mark: the length of the line saying what was cut

    def pump(self) -> bool:
        """Copy what the pipe holds; False once it is closed (or would block: nothing now)."""
        try:
            data = os.read(self.src, min(1 << 16, self.head))
        except BlockingIOError:
            return False
        if not data:
            return False
        if self.size + len(data) > self.cap:  # cut the middle: keep the head, say so, go on
            self.cut += self.size - self.head - self.mark
            os.ftruncate(self.dst, self.head)
            os.lseek(self.dst, self.head, os.SEEK_SET)
            self.mark = os.write(self.dst, CUT % (self.cut, self.head))
            self.size = self.head + self.mark
        os.write(self.dst, data)
        self.size += len(data)
        return True


def log_cap(env: Mapping[str, str] = os.environ) -> int:
    try:
        return max(1024, int(env.get(LOG_CAP_ENV, LOG_CAP)))
    except ValueError:
        return LOG_CAP


def cut_bytes(path: str | os.PathLike, cap: int) -> int:
    """The bytes a capped log says were cut from it (0: none), read where its line would be."""
    with contextlib.suppress(OSError), open(path, "rb") as f:
        f.seek(cap // 4)
        line = f.read(256)
        if line.startswith(b"\n[harness: "):
            return int(line.split()[1])
    return 0


def stat_fields(pid: int | str) -> list[bytes]:
    """The fields of /proc/PID/stat after the command name (which may hold spaces and parentheses:
    split after the last ')'), from the state on; [] where there is none (gone meanwhile)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def children(pid: int) -> list[int]:
    """The live (not zombie) processes whose parent is ``pid``, from /proc (none where there is none)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    fields = {int(e): stat_fields(e) for e in entries if e.isdigit()}
    return [p for p, f in fields.items() if f and f[0] != b"Z" and int(f[1]) == pid]


def sweep() -> None:
    """SIGKILL every process still a child of this guard (the runner's orphans, reparented here;
    the runner is done, nothing of it is waited for) and theirs as they are reparented, reaping each."""
    me = os.getpid()
    for _ in range(100):  # a tree that forks faster than it is killed is bounded by the rounds
        with contextlib.suppress(ChildProcessError):  # reap the ended ones; none left
            while os.waitpid(-1, os.WNOHANG)[0] != 0:
                pass
        kids = children(me)
        if not kids:
            return
        for pid in kids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def _stop_group(child: subprocess.Popen) -> None:
    """SIGTERM everything in our group but us, SIGKILL what is left after the grace, then us."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.killpg(0, signal.SIGTERM)
    deadline = time.monotonic() + ORPHAN_GRACE_S
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    sweep()  # what left the group; the runner too, if it is still there
    os.killpg(0, signal.SIGKILL)  # grandchildren that ignored SIGTERM, and this guard


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m harness.executors.guard FD -- COMMAND...", file=sys.stderr)
        return 2
    fd = int(argv[0])
    with contextlib.suppress(OSError, AttributeError):  # Linux: the runner's orphans are reparented here
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        child = subprocess.Popen(argv[2:], close_fds=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as err:
        print(f"cannot start {argv[2]}: {err.strerror}", file=sys.stderr)
        return 127
    cap = log_cap()
    logs = {p.fileno(): CappedLog(p.fileno(), dst, cap) for p, dst in ((child.stdout, 1), (child.stderr, 2))}
    # The group's signals are for the runner; the guard waits for it to act on them. (A Python
    # handler, not SIG_IGN: the runner was started first and keeps the default dispositions.)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)
    poller = select.poll()
    for watched in (fd, *logs):
        poller.register(watched, select.POLLIN | select.POLLHUP | select.POLLERR)
    while child.poll() is None:
        try:
            events = poller.poll(POLL_S * 1000)
        except InterruptedError:
            continue
        for ready, _ in events:
            if ready in logs:
                if not logs[ready].pump():
                    poller.unregister(ready)
            elif not os.read(fd, 1):  # end of file: the harness process is gone
                _stop_group(child)
    for log in logs.values():  # what the runner wrote last (bounded: a process it left may still write)
        os.set_blocking(log.src, False)
        for _ in range(1024):
            if not log.pump():
                break
    rc = child.returncode
    sweep()
    if rc < 0:  # died of a signal: die of the same one, so the harness sees what the runner saw
        signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
