"""Inside a rank: copy the process's stdout and stderr into ``rank<N>.log``, line by line.

Standard library only: this runs in the ranks' interpreter.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path

# Written by stop() through the tee's own write end once the descriptor is restored: everything
# before it in the pipe was written before stop(), so the pump forwards up to it and ends. Waiting
# for the pipe's end of file instead would wait on any child process that inherited the descriptor.
END_MARK = b"\x00harness.tee.end\x00"
# How long stop() waits for the pump to forward what is still in the pipe: a bound for a reader
# that stopped reading, far above a loaded machine's scheduling delays.
DRAIN_S = 60.0


def _write_all(fd: int, data: bytes) -> None:
    """os.write may write part of ``data`` (a signal, a full pipe): write the rest too."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _held_back(buf: bytes) -> int:
    """How many of buf's last bytes could begin END_MARK (kept until the next read decides)."""
    for n in range(min(len(buf), len(END_MARK) - 1), 0, -1):
        if END_MARK.startswith(buf[-n:]):
            return n
    return 0


class Tee:
    """Copy this process's stdout and stderr (file descriptors 1 and 2) into one file, line by line.

    Both streams still reach their original destinations; the file gets whole lines in the order
    they were written. Works for output from C extensions too, since it works on descriptors.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed in stop()
        self._lock = threading.Lock()
        self._streams: list[tuple[int, int, int, threading.Thread]] = []
        for fd in (1, 2):
            saved = os.dup(fd)
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)  # write_end is kept: stop() sends END_MARK through it
            t = threading.Thread(target=self._pump, args=(read_end, saved), daemon=True, name=f"tee-{fd}")
            t.start()
            self._streams.append((fd, saved, write_end, t))

    def _pump(self, read_end: int, out_fd: int) -> None:
        pending = b""  # the file's partial line
        buf = b""  # read, not yet forwarded (a possible start of END_MARK)
        done = False
        while not done:
            try:
                chunk = os.read(read_end, 65536)
            except OSError:
                chunk = b""
            buf += chunk
            end = buf.find(END_MARK)
            if end >= 0:
                out, buf, done = buf[:end], b"", True
            elif not chunk:
                out, buf, done = buf, b"", True
            else:
                keep = _held_back(buf)
                out, buf = buf[: len(buf) - keep], buf[len(buf) - keep :]
            if not out:
                continue
            with contextlib.suppress(OSError):  # the destination is gone: the file still gets it
                _write_all(out_fd, out)
            pending += out
            cut = pending.rfind(b"\n") + 1
            if cut:
                with self._lock:
                    self._file.write(pending[:cut])
                pending = pending[cut:]
        if pending:  # a last line with no newline: ended here, so the other stream's lines stay whole
            with self._lock:
                self._file.write(pending + b"\n")
        os.close(read_end)

    def stop(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        deadline = time.monotonic() + DRAIN_S
        for fd, saved, write_end, _ in self._streams:
            os.dup2(saved, fd)  # the descriptor writes to its destination again
            _send_end_mark(write_end, deadline)
            os.close(write_end)
        # `saved` stays open until its pump has forwarded the last bytes through it.
        for _, saved, _, t in self._streams:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
            if not t.is_alive():
                os.close(saved)
        self._streams = []
        with self._lock:
            self._file.close()


def _send_end_mark(write_end: int, deadline: float) -> None:
    """END_MARK into a pipe that may be full (a slow pump): retried until the deadline, never blocking."""
    os.set_blocking(write_end, False)
    while True:
        try:
            os.write(write_end, END_MARK)  # shorter than PIPE_BUF: written whole or not at all
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
        except OSError:  # the pump has ended (its read end is closed)
            return
