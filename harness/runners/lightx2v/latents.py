"""Inside a rank: chosen DiT steps' latents in the builtin runner's files (rank N > 0 in ``rankN/``:
TP ranks show whether they agree), copied inside the timed step (``copy_s``), written by a thread.
Standard library at import time; torch and numpy when a step is saved."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from queue import Queue
from typing import Any

from harness.runners.common import LATENTS_DIR, write_step_latents

AUTO_ALL = 10
AUTO_EVERY = 5


def parse_steps(text: str) -> Callable[[int, int | None], bool]:
    """``--latent-steps`` (all, none, auto or a comma list) as a predicate ``(step, total) -> save?``."""
    text = text.strip()
    named = {"all": lambda step, total: True, "none": lambda step, total: False, "auto": auto_step}
    if text in named:
        return named[text]
    try:
        chosen = {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise ValueError(f"expected all, none, auto or a comma list of steps, got {text!r}") from None
    if not chosen or min(chosen) < 1:
        raise ValueError(f"steps count from 1, got {text!r}")
    return lambda step, total: step in chosen


def auto_step(step: int, total: int | None) -> bool:
    if total is None or total <= AUTO_ALL:
        return True
    return step == 1 or step == total or step % AUTO_EVERY == 0


class LatentSaver:
    """``on_step_end(step, scheduler)``: copy the chosen steps' latents, write them in the background."""

    def __init__(self, run_dir: Path, rank: str, choose: Callable[[int, int | None], bool]):
        self.folder = Path(run_dir) / LATENTS_DIR / ("" if rank == "0" else f"rank{rank}")
        self.choose = choose
        self.saved: list[int] = []
        self.copy_s = 0.0
        self.errors: list[str] = []
        self._queue: Queue[tuple[int, dict[str, Any]] | None] = Queue(maxsize=2)
        self._thread: threading.Thread | None = None

    def on_step_end(self, step: int, scheduler: Any) -> None:
        if not self.choose(step, getattr(scheduler, "infer_steps", None)):
            return
        t0 = time.perf_counter()
        try:  # a MiniMax-H3 scheduler's target rows and the sigmas reached (the step has just ended)
            index = int(scheduler.step_index)
            video = scheduler.video_latents[int(getattr(scheduler, "num_condition_video_rows", 0) or 0) :]
            audio = scheduler.audio_latents[int(getattr(scheduler, "num_condition_audio_rows", 0) or 0) :]
            arrays = {k: v.detach().float().cpu() for k, v in (("video", video), ("audio", audio))}
            arrays["sigma_video"] = float(scheduler.video_sigmas[index + 1])
            arrays["sigma_audio"] = float(scheduler.audio_sigmas[index + 1])
        except Exception as err:  # a scheduler of another layout: noted once, the run goes on
            self._error(f"latents of step {step} not saved: {type(err).__name__}: {err}")
            return
        self.copy_s += time.perf_counter() - t0
        if self._thread is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._thread = threading.Thread(target=self._write_loop, daemon=True, name="latents")
            self._thread.start()
        self._queue.put((step, arrays))

    def close(self, timeout_s: float = 120.0) -> None:
        """Wait for the pending files (called before the rank's record is written)."""
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._error(f"latent files still being written after {timeout_s:.0f} s")
        self._thread = None

    def to_json(self) -> dict[str, Any]:
        return {"folder": self.folder.name, "steps": list(self.saved), "copy_s": round(self.copy_s, 6)}

    def _error(self, text: str) -> None:
        if text not in self.errors:
            self.errors.append(text)

    def _write_loop(self) -> None:
        import numpy as np

        while True:
            item = self._queue.get()
            if item is None:
                return
            step, arrays = item
            try:
                numpy = {k: v.numpy() if hasattr(v, "numpy") else np.float64(v) for k, v in arrays.items()}
                write_step_latents(self.folder, step, numpy)
                self.saved.append(step)
            except Exception as err:  # a full disk: noted, the run goes on
                self._error(f"latents of step {step}: {type(err).__name__}: {err}")
