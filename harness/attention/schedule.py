"""Hybrid schedules: attention routed by DiT step (the run's call site), exact on the named steps and
the arm's own backend on the others; the per-step counts prove the routing.
"""

from __future__ import annotations

from typing import Any

import torch

from harness.attention.insitu.sites import CallSites
from harness.attention.registry import AttentionOp, WrappedOp
from harness.records import StepSchedule


def exact_on(schedule: StepSchedule, step: int | None, total: int | None) -> bool:
    """Whether step ``step`` (from 1) of ``total`` runs the exact backend (outside any step: no)."""
    if step is None:
        return False
    if step <= schedule.exact_first or step in schedule.exact_steps:
        return True
    return total is not None and step > total - schedule.exact_last


def exact_steps(schedule: StepSchedule, total: int) -> list[int]:
    """The steps of a run of ``total`` DiT steps that run the exact backend."""
    return [s for s in range(1, total + 1) if exact_on(schedule, s, total)]


def schedule_text(schedule: StepSchedule) -> str:
    """'torch_sdpa on the first 1 and last 1 step(s)'."""
    bits = []
    if schedule.exact_first:
        bits.append(f"first {schedule.exact_first}")
    if schedule.exact_last:
        bits.append(f"last {schedule.exact_last}")
    if schedule.exact_steps:
        bits.append("steps " + ", ".join(map(str, sorted(schedule.exact_steps))))
    return f"{schedule.exact} on the {' and '.join(bits) or 'no'} step(s)"


class ScheduledAttention(WrappedOp):
    """The ``exact`` op on the schedule's steps, ``candidate`` on the others (``served``: the last one);
    the candidate runs once on copies of each new call shape, so its warm-up falls in step 1."""

    def __init__(self, candidate: AttentionOp, exact: AttentionOp, schedule: StepSchedule, sites: CallSites):
        super().__init__(candidate)
        self.exact_op = exact
        self.schedule = schedule
        self.sites = sites
        self.served = candidate.name
        self.warmed: set[tuple] = set()  # call shapes the candidate has run

    @property
    def params(self) -> dict[str, Any]:  # type: ignore[override]
        return {
            **self.inner.params,
            "schedule": self.schedule.model_dump(mode="json"),
            "schedule_exact": self.exact_op.params,
        }

    def __call__(self, q, k, v, scale=None):
        site = self.sites.current
        op = self.exact_op if exact_on(self.schedule, site.step, site.steps) else self.inner
        shape = (tuple(q.shape), tuple(k.shape), q.dtype)
        if shape not in self.warmed:
            self.warmed.add(shape)
            if op is self.exact_op:
                copies = [x.detach().clone() for x in (q, k, v)]
                devices = [q.device] if q.is_cuda else []
                with torch.random.fork_rng(devices=devices, device_type="cuda" if q.is_cuda else None):
                    self.inner(*copies, scale)
                del copies
        self.served = op.name
        return op(q, k, v, scale)

    def __repr__(self) -> str:
        return f"ScheduledAttention({self.inner!r}, exact={self.exact_op!r}, {schedule_text(self.schedule)})"
