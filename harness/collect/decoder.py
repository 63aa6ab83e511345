"""One video file decoded on its own thread into a bounded queue, with a side thread that hashes
and (on CPU) measures every frame: the producer half of the pair measurement in ``suite``."""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path
from typing import Any

import numpy as np

from harness.collect.stats import StatsReducer
from harness.errors import HarnessError
from harness.media import iter_frames

QUEUE_FRAMES = 2  # decoded frames buffered per stream (and per side thread)
_DONE = object()


class FrameDecoder(threading.Thread):
    """Decodes one file into a bounded queue; a second thread hashes and (on CPU) measures
    every frame, so that on many cores neither chain limits the other."""

    def __init__(self, path: Path, limit: int, *, cpu_stats: bool, stop: threading.Event):
        super().__init__(daemon=True, name=f"decode-{path.name}")
        self.path, self.limit, self.cpu_stats, self.stop = path, limit, cpu_stats, stop
        # FFmpeg threads: none on small machines (our own threads keep the cores busy, and FFmpeg's
        # add overhead), a few on large ones (where decoding limits a GPU)
        self.threads = max(1, min(4, ((os.cpu_count() or 2) - 2) // 2))
        self.q: queue.Queue = queue.Queue(maxsize=QUEUE_FRAMES)
        self.side_q: queue.Queue = queue.Queue(maxsize=QUEUE_FRAMES)
        self.side = threading.Thread(target=self._measure, daemon=True, name=f"stats-{path.name}")
        self.side_error: BaseException | None = None
        self.stats = StatsReducer()
        self.count = 0
        self.ended = False  # the end marker was handed to the consumer

    def _put(self, q: queue.Queue, item: Any) -> bool:
        while not self.stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _measure(self) -> None:
        prev = None
        try:
            while not self.stop.is_set():
                try:
                    frame = self.side_q.get(timeout=0.1)
                except queue.Empty:
                    continue
                if frame is _DONE:
                    return
                if self.cpu_stats:
                    self.stats.push(frame, prev)
                else:
                    self.stats.update_hash(frame)
                prev = frame
        except BaseException as exc:
            self.side_error = exc
            self.stop.set()

    def run(self) -> None:
        self.side.start()
        try:
            # strict: a file that ends before its declared length is an error, not a short run
            frames = iter_frames(self.path, strict=True, threads=self.threads)
            for frame in frames:
                if self.count >= self.limit:
                    frames.close()
                    break
                self.count += 1
                if not (self._put(self.side_q, frame) and self._put(self.q, frame)):
                    return
            self._put(self.side_q, _DONE)
            self.side.join()  # the statistics are complete before the consumer sees the end
            self._put(self.q, self.side_error or _DONE)
        except BaseException as exc:  # handed to the main thread, which raises it
            self._put(self.q, exc)

    def get(self) -> np.ndarray | None:
        while True:
            try:
                item = self.q.get(timeout=0.1)
                break
            except queue.Empty:
                if self.side_error is not None:
                    raise self.side_error from None
                if not self.is_alive() and self.q.empty():
                    raise HarnessError(f"{self.path}: decoding stopped unexpectedly") from None
        if isinstance(item, BaseException):
            raise item
        if item is _DONE:
            self.ended = True
            return None
        return item

    def wait_end(self) -> None:
        """Block until the end marker: only then has the side thread hashed and measured every frame."""
        while not self.ended:
            self.get()

    def finish(self) -> None:
        self.join()
        self.side.join()
