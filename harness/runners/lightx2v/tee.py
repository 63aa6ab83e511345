"""Inside a rank: copy the process's stdout and stderr into ``rank<N>.log``, line by line.

Standard library only: this runs in the ranks' interpreter.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path


class Tee:
    """Copy this process's stdout and stderr (file descriptors 1 and 2) into one file, line by line.

    Both streams still reach their original destinations; the file gets whole lines in the order
    they were written. Works for output from C extensions too, since it works on descriptors.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed in stop()
        self._lock = threading.Lock()
        self._streams: list[tuple[int, int, threading.Thread]] = []
        for fd in (1, 2):
            saved = os.dup(fd)
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            t = threading.Thread(target=self._pump, args=(read_end, saved), daemon=True, name=f"tee-{fd}")
            t.start()
            self._streams.append((fd, saved, t))

    def _pump(self, read_end: int, out_fd: int) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(read_end, 65536)
            except OSError:
                break
            if not chunk:
                break
            try:
                os.write(out_fd, chunk)
            except OSError:
                pass
            pending += chunk
            cut = pending.rfind(b"\n") + 1
            if cut:
                with self._lock:
                    self._file.write(pending[:cut])
                pending = pending[cut:]
        if pending:
            with self._lock:
                self._file.write(pending)
        os.close(read_end)

    def stop(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        for fd, saved, _ in self._streams:
            os.dup2(saved, fd)  # closes the pipe's last write end: the pump sees EOF
            os.close(saved)
        for _, _, t in self._streams:
            t.join(timeout=5)
        self._streams = []
        self._file.close()
