"""Reading a shadowed run's in-situ lines back, and errors pooled per op over any grouping of calls:
rel L1 as sum|o - r| / sum|r| and RMSE over all of them, cosine the mean (and minimum), the worst-row
cosine the lowest of any call; a refused, failed or non-finite call counts in ``failed`` only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from harness.attention.insitu.recorder import iter_lines
from harness.errors import HarnessError
from harness.insitu_records import InSituCall, InSituMeta, InSituStats
from harness.safe_write import file_name, is_plain_name
from harness.store import read_record


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
    metas = sorted(folder.glob("rank*.meta.json")) if folder.is_dir() else []
    if not metas:
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
