"""A shadowed run's in-situ record, both ends. Writing: the call site (DiT step, block, kind) the runner's
hooks set while the model runs (a nested ``site(...)`` keeps what it does not set); one JSON line per call
appended to ``insitu/rank<r>.jsonl`` (flushed every few calls), a ``rank<r>.meta.json``, and the q/k/v of
chosen calls as safetensors under ``insitu/captures/`` for ``harness kernels``; the runner owns one
recorder per rank and closes it. Reading: the lines back, and errors pooled per op over any grouping of
calls: rel L1 as sum|o - r| / sum|r| and RMSE over all of them, cosine the mean (and minimum), the
worst-row cosine the lowest of any call; a refused, failed or non-finite call counts in ``failed`` only.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from pydantic import ValidationError

from harness.errors import HarnessError
from harness.insitu_records import CALL_KINDS as KINDS
from harness.insitu_records import CapturedCall, InSituCall, InSituMeta, InSituOp, InSituStats
from harness.records import InSituSettings
from harness.safe_write import file_name, is_plain_name
from harness.store import read_record, write_record


@dataclass(frozen=True)
class CallSite:
    step: int | None = None  # DiT step, from 1
    block: int | None = None  # transformer block, from 0
    kind: str = "other"  # one of KINDS
    steps: int | None = None  # DiT steps of the run, when the runner knows them (schedules need it)

    @property
    def step_key(self) -> str:
        """The step as the per-step call counts key it ("-": outside any step)."""
        return "-" if self.step is None else str(self.step)


class CallSites:
    """The current call site, set by nested ``site(...)`` blocks (one tracker per process)."""

    def __init__(self, steps: int | None = None):
        self.current = CallSite(steps=steps)

    @contextlib.contextmanager
    def site(self, **fields: Any) -> Iterator[CallSite]:
        """The given ``CallSite`` fields inside the block (as ``set`` sets them); restored after."""
        outer = self.current
        self.set(**fields)
        try:
            yield self.current
        finally:
            self.current = outer

    def set(self, **fields: Any) -> CallSite:
        """Set the given fields (entering a step clears the block; for hooks that see only the start of
        a step or block)."""
        if "step" in fields:
            fields = {"block": None, "kind": "other", **fields}
        if "kind" in fields and fields["kind"] not in KINDS:
            raise ValueError(f"call site kind {fields['kind']!r}; expected one of {', '.join(KINDS)}")
        self.current = replace(self.current, **fields)
        return self.current


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


@dataclass
class InSituRun:
    """A run's in-situ record: the meta of every rank and their calls (ranks in order)."""

    folder: Path
    metas: list[InSituMeta] = field(default_factory=list)
    calls: list[InSituCall] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # unreadable lines, incomplete ranks

    @property
    def primary(self) -> str:
        return self.metas[0].primary if self.metas else ""

    def op_names(self) -> list[str]:
        """Every op measured, the primary first, in the order the meta lists them."""
        names: list[str] = []
        for m in self.metas:
            names += [o.name for o in m.ops if o.name not in names]
        return names

    def op(self, name: str):
        return next((o for m in self.metas for o in m.ops if o.name == name), None)

    def steps(self) -> list[int]:
        return sorted({c.step for c in self.calls if c.step is not None})

    def blocks(self) -> list[int]:
        return sorted({c.block for c in self.calls if c.block is not None})


def read_insitu(folder: Path) -> InSituRun | None:
    """The in-situ record under ``folder`` (None: none); unparsable lines are left out and noted, and each
    rank's lines are read beside its meta whatever rank it claims."""
    folder = Path(folder)
    if not (metas := sorted(folder.glob("rank*.meta.json")) if folder.is_dir() else []):
        return None
    run = InSituRun(folder)
    for path in metas:
        meta = read_record(path, InSituMeta)
        renamed = plain_op_names(meta, path, run.notes)
        run.metas.append(meta)
        if not meta.complete:
            run.notes.append(f"rank {meta.rank}: the run did not close its in-situ record (it stopped early)")
        lines = path.with_name(path.name.removesuffix(".meta.json") + ".jsonl")  # never a path the meta names
        bad = 0
        if lines.is_file():
            for line in iter_lines(lines):
                try:
                    call = InSituCall.model_validate(json.loads(line))
                except (ValueError, ValidationError):
                    bad += 1
                    continue
                if renamed:
                    call.errors = {renamed.get(k, k): e for k, e in call.errors.items()}
                run.calls.append(call)
        if bad:
            run.notes.append(f"rank {meta.rank}: {bad} unreadable line(s) left out")
    run.metas.sort(key=lambda m: (len(m.rank), m.rank))
    return run


def plain_op_names(meta: InSituMeta, path: Path, notes: list[str]) -> dict[str, str]:
    """Op names of ``meta`` made plain file names in place (heatmaps are named after them), each noted."""
    renamed = {name: file_name(name) for name in (meta.primary, *(op.name for op in meta.ops))}
    renamed = {old: new for old, new in renamed.items() if not is_plain_name(old)}
    for op in meta.ops:
        op.name = renamed.get(op.name, op.name)
    meta.primary = renamed.get(meta.primary, meta.primary)
    notes += [
        f"{path.name}: op name {old!r} is not a plain name: read as {new!r}" for old, new in renamed.items()
    ]
    return renamed


def read_insitu_or_note(folder: Path, notes: list[str]) -> InSituRun | None:
    """read_insitu, with an unreadable record as a note instead of an error."""
    try:
        return read_insitu(folder)
    except HarnessError as err:
        notes.append(f"{folder}: in-situ record unreadable: {err}")
        return None


def pool(calls: Iterable[InSituCall], op: str) -> InSituStats:
    """``op``'s errors pooled over ``calls`` (calls that did not measure it are skipped)."""
    s = InSituStats()
    l1 = ref = sq = n = cos_sum = p10_sum = 0.0
    good = 0
    for c in calls:
        e = c.errors.get(op)
        if e is None:
            continue
        s.calls += 1
        s.nan += e.nan
        s.inf += e.inf
        if not e.finite:  # NaN anywhere in the output fails the call, even outside the sampled rows
            s.failed += 1
            s.nonfinite += int(c.returned_nonfinite(op))
            continue
        good += 1
        l1 += e.rel_l1 * c.ref_l1
        ref += c.ref_l1
        sq += e.rmse**2 * c.elements
        n += c.elements
        cos_sum += e.cosine
        p10_sum += e.row_cos_p10
        s.cosine_min = e.cosine if s.cosine_min is None else min(s.cosine_min, e.cosine)
        s.max_abs = e.max_abs if s.max_abs is None else max(s.max_abs, e.max_abs)
        s.row_cos_p1 = e.row_cos_p1 if s.row_cos_p1 is None else min(s.row_cos_p1, e.row_cos_p1)
    if good:
        s.rel_l1 = l1 / ref if ref > 0 else None
        s.rmse = math.sqrt(sq / n) if n > 0 else None
        s.cosine = cos_sum / good
        s.row_cos_p10 = p10_sum / good
    return s


def grouped(
    calls: Iterable[InSituCall], op: str, key: Callable[[InSituCall], Hashable]
) -> dict[Hashable, InSituStats]:
    """``op`` pooled per group of calls (``key``: a call's step, block, ...), in the keys' order."""
    groups: dict[Hashable, list[InSituCall]] = {}
    for c in calls:
        groups.setdefault(key(c), []).append(c)
    return {k: pool(groups[k], op) for k in sorted(groups, key=_order)}


def _order(key: Hashable) -> tuple:
    parts = key if isinstance(key, tuple) else (key,)
    return tuple((p is None, p if p is not None else 0) for p in parts)
