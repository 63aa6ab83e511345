"""Keeps a runner from outliving the harness process that started it.

``python -m harness.executors.guard FD -- COMMAND...`` is what ``execute_run`` launches, as the
leader of a new session: the guard starts COMMAND in its own process group and waits. ``FD`` is
the read end of a pipe whose write end only the harness process holds; the harness never writes
to it, so the pipe reads end-of-file exactly when that process is gone, however it died (SIGKILL
included, on a workstation or inside a Slurm job). Then the guard stops the whole group
(SIGTERM, SIGKILL after a grace), torchrun's rank processes included.

Signals sent to the group (``execute_run``'s stop, Slurm's cancel) reach the runner directly;
the guard only waits for it and exits as it did (same code, or the same signal).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

ORPHAN_GRACE_S = 5.0  # SIGTERM first, SIGKILL after this long
POLL_S = 0.2


def _stop_group(child: subprocess.Popen) -> None:
    """SIGTERM everything in our group but us, SIGKILL what is left after the grace, then us."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.killpg(0, signal.SIGTERM)
    except OSError:
        pass
    deadline = time.monotonic() + ORPHAN_GRACE_S
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(0, signal.SIGKILL)  # grandchildren that ignored SIGTERM, and this guard


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m harness.executors.guard FD -- COMMAND...", file=sys.stderr)
        return 2
    fd = int(argv[0])
    try:
        child = subprocess.Popen(argv[2:], close_fds=True)
    except OSError as err:
        print(f"cannot start {argv[2]}: {err.strerror}", file=sys.stderr)
        return 127
    # The group's signals are for the runner; the guard waits for it to act on them. (A Python
    # handler, not SIG_IGN: the runner was started first and keeps the default dispositions.)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while child.poll() is None:
        try:
            events = poller.poll(POLL_S * 1000)
        except InterruptedError:
            continue
        if events and not os.read(fd, 1):  # end of file: the harness process is gone
            _stop_group(child)
    rc = child.returncode
    if rc < 0:  # died of a signal: die of the same one, so the harness sees what the runner saw
        signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
