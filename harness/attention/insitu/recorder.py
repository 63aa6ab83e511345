"""Where a shadowed run's measurements go: one JSON line per call appended to ``insitu/rank<r>.jsonl``
(flushed every few calls), a ``rank<r>.meta.json``, and the q/k/v of chosen calls as safetensors under
``insitu/captures/`` for ``harness kernels``. The runner owns one recorder per rank and closes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch

from harness.attention.insitu.sites import CallSite, CallSites
from harness.insitu_records import CapturedCall, InSituCall, InSituMeta, InSituOp
from harness.records import InSituSettings
from harness.store import write_record

INSITU_DIR = "insitu"
CAPTURES_DIR = "captures"
FLUSH_EVERY = 32  # lines held before they are appended to the file


class InSituRecorder:
    """Per-call lines of one rank, the meta record, and the captured calls."""

    def __init__(
        self,
        folder: Path,
        settings: InSituSettings | None = None,
        *,
        rank: str | int = "0",
        sites: CallSites | None = None,
        flush_every: int = FLUSH_EVERY,
    ):
        self.folder = Path(folder)
        self.rank = str(rank)
        self.settings = settings or InSituSettings()
        self.sites = sites or CallSites()
        self.flush_every = max(1, flush_every)
        self.meta = InSituMeta(rank=self.rank, primary="", settings=self.settings)
        self._pending: list[str] = []
        self._captured_bytes = 0
        self.lines = self.folder / f"rank{self.rank}.jsonl"
        self.folder.mkdir(parents=True, exist_ok=True)
        # A rerun in the same folder starts afresh: no line or captured call of an earlier run stays.
        self.lines.write_text("")
        for old in (self.folder / CAPTURES_DIR).glob(f"rank{self.rank}_*.safetensors"):
            old.unlink()

    @property
    def current(self) -> CallSite:
        return self.sites.current

    def set_ops(self, primary: str, ops: list[InSituOp]) -> None:
        self.meta.primary = primary
        self.meta.ops = list(ops)
        self._write_meta()

    def note(self, text: str) -> None:
        if text not in self.meta.notes:
            self.meta.notes.append(text)
            self._write_meta()

    def next_call(self) -> int:
        self.meta.calls += 1
        return self.meta.calls

    def write(self, line: InSituCall) -> None:
        self._pending.append(line.model_dump_json())
        if len(self._pending) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            with self.lines.open("a") as fh:
                fh.write("\n".join(self._pending) + "\n")
            self._pending.clear()

    def close(self) -> None:
        """Flush every line and mark the rank complete (a run that died leaves complete: false)."""
        self.flush()
        self.meta.complete = True
        self._write_meta()

    def _write_meta(self) -> None:
        write_record(self.folder / f"rank{self.rank}.meta.json", self.meta)

    def wants_capture(self, site: CallSite) -> bool:
        cap = self.settings.capture
        if cap is None or len(self.meta.captured) >= cap.max_calls or site.step is None:
            return False
        steps = {s if s > 0 else (site.steps + 1 + s if site.steps else None) for s in cap.steps}
        if site.step not in steps or site.block not in cap.blocks:
            return False
        if cap.kinds is not None and site.kind not in cap.kinds:
            return False
        return not any(
            (c.step, c.block, c.kind) == (site.step, site.block, site.kind) for c in self.meta.captured
        )

    def capture(
        self, site: CallSite, call: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
    ) -> None:
        """Keep this call's q/k/v (first ``capture.heads`` heads) unless over the byte budget."""
        from safetensors.torch import save_file

        cap = self.settings.capture
        assert cap is not None
        heads = cap.heads or q.shape[1]
        tensors = {n: x[:, :heads].detach().contiguous().cpu() for n, x in zip("qkv", (q, k, v), strict=True)}
        size = sum(t.numel() * t.element_size() for t in tensors.values())
        if self._captured_bytes + size > cap.max_mb * 2**20:
            self.note(
                f"capture of step {site.step} {site.kind} block {site.block} skipped: {size / 2**20:.0f} MB would pass "
                f"max_mb {cap.max_mb:g} (capture.heads keeps fewer heads)"
            )
            return
        # site.kind is one of sites.KINDS (checked where a site is set): safe in a file name
        name = f"rank{self.rank}_step{site.step:03d}_{site.kind}_block{site.block:03d}.safetensors"
        folder = self.folder / CAPTURES_DIR
        folder.mkdir(parents=True, exist_ok=True)
        meta = {
            "scale": repr(float(scale)),
            **{key: str(getattr(site, key)) for key in ("step", "block", "kind")},
        }
        tmp = folder / f".{name}.tmp"
        save_file(tensors, str(tmp), metadata=meta)
        tmp.replace(folder / name)
        self._captured_bytes += size
        self.meta.captured.append(
            CapturedCall(
                file=f"{CAPTURES_DIR}/{name}",
                call=call,
                rank=self.rank,
                step=site.step,
                block=site.block,
                kind=site.kind,
                q_shape=list(tensors["q"].shape),
                k_len=int(k.shape[2]),
                dtype=str(q.dtype).removeprefix("torch."),
                scale=float(scale),
                bytes=size,
            )
        )
        self._write_meta()


def iter_lines(path: Path) -> Iterator[str]:
    """The complete lines of a rank's file (a last line cut short by a crash is left out)."""
    with Path(path).open() as fh:
        for line in fh:
            if line.endswith("\n") and line.strip():
                yield line
