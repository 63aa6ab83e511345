"""Wrappers around a backend: hybrid schedules (exact on the named DiT steps, the arm's own backend on
the others; the per-step counts prove the routing), the noise floor's exact perturbations, call counting
with fallback, a bitwise check of the backend against its op called directly on a run's first call, and
the chains a run builds from them (``make_attention``; ``shadowed_attention`` with its shadows)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from harness.attention.insitu.recorder import CallSites, InSituRecorder
from harness.attention.insitu.shadow import ShadowedAttention
from harness.attention.registry import (
    AttentionBackend,
    AttentionOp,
    UnsupportedCall,
    WrappedOp,
    default_scale,
    get_backend,
)
from harness.errors import BackendUnavailable, HarnessError
from harness.records import (
    AttentionChoice,
    DirectCheck,
    InSituSettings,
    RankCalls,
    ShadowSpec,
    StepSchedule,
)


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
                devices = [q.device] if q.is_cuda else []
                with torch.random.fork_rng(devices=devices, device_type="cuda" if q.is_cuda else None):
                    self.inner(*(x.detach().clone() for x in (q, k, v)), scale)
        self.served = op.name
        return op(q, k, v, scale)

    def __repr__(self) -> str:
        return f"ScheduledAttention({self.inner!r}, exact={self.exact_op!r}, {schedule_text(self.schedule)})"


class OutputContractError(HarnessError):
    """A backend's output does not have the shape, dtype or device its call asks for."""


def output_problem(q: torch.Tensor, v: torch.Tensor, out: Any) -> str | None:
    """What is wrong with ``out`` against q's shape (v's last dimension), dtype and device (None: nothing)."""
    want = (*q.shape[:-1], v.shape[-1])
    if not isinstance(out, torch.Tensor):
        return f"is a {type(out).__name__}, not a tensor"
    checks = (
        ("shape", list(out.shape), list(want)),
        ("dtype", out.dtype, q.dtype),
        ("device", out.device, q.device),
    )
    wrong = [f"{name} {got} (expected {expected})" for name, got, expected in checks if got != expected]
    return f"has {', '.join(wrong)}" if wrong else None


class KVReversed(WrappedOp):
    """K and V reversed along the sequence: only the summation order changes (the noise floor)."""

    @property
    def params(self) -> dict[str, Any]:  # type: ignore[override]
        return {**self.inner.params, "kv_reversed": True}

    def __call__(self, q, k, v, scale=None):
        return self.inner(q, k.flip(-2), v.flip(-2), scale)


def chunk_logsumexp(q: torch.Tensor, k: torch.Tensor, scale: float, max_chunk_elems: int = 0) -> torch.Tensor:
    """fp32 logsumexp over keys of ``q k^T * scale``, ``[B, H, Nq]``, chunked over queries."""
    from harness.attention.exact import full_fp32_matmul

    b, h, n_q, _ = q.shape
    budget = max_chunk_elems or ((1 << 28) if q.is_cuda else (1 << 22))
    rows = max(1, budget // max(1, b * h * k.shape[2]))
    kt = k.float().transpose(-1, -2)
    out = torch.empty(b, h, n_q, dtype=torch.float32, device=q.device)
    with full_fp32_matmul():
        for r0 in range(0, n_q, rows):
            r1 = min(n_q, r0 + rows)
            scores = torch.matmul(q[:, :, r0:r1].float(), kt).mul_(scale)
            out[:, :, r0:r1] = torch.logsumexp(scores, dim=-1)
    return out


class KVChunked(WrappedOp):
    """K and V in ``chunks`` pieces, the outputs merged by their fp32 log-sum-exp weights: a second exact
    perturbation beside K/V reversal (its extra work makes the arm's timings no baseline)."""

    def __init__(self, backend: AttentionOp, chunks: int = 2):
        if chunks < 2:
            raise ValueError(f"KVChunked needs 2 or more chunks (got {chunks})")
        super().__init__(backend)
        self.chunks = chunks

    @property
    def params(self) -> dict[str, Any]:  # type: ignore[override]
        return {**self.inner.params, "kv_chunks": self.chunks}

    def __call__(self, q, k, v, scale=None):
        s = default_scale(q, scale)
        n_k = k.shape[-2]
        bounds = [round(i * n_k / self.chunks) for i in range(self.chunks + 1)]
        outs, lses = [], []
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            if hi <= lo:
                continue
            kc, vc = k[:, :, lo:hi], v[:, :, lo:hi]
            outs.append(self.inner(q, kc, vc, scale))
            lses.append(chunk_logsumexp(q, kc, s))
        total = torch.logsumexp(torch.stack(lses), dim=0)
        acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        for o, lse in zip(outs, lses, strict=True):
            acc.add_(o.float() * torch.exp(lse - total).unsqueeze(-1))
        return acc.to(q.dtype)

    def __repr__(self) -> str:
        return f"KVChunked({self.inner!r}, chunks={self.chunks})"


def bitwise_fields(out: torch.Tensor, ref: torch.Tensor) -> dict[str, Any]:
    """``out`` against ``ref`` bitwise: identical, or the largest difference, or a note that the shapes differ."""
    if out.shape != ref.shape:
        return {"identical": False, "note": f"shapes differ {tuple(out.shape)} vs {tuple(ref.shape)}"}
    if torch.equal(out, ref):
        return {"identical": True}
    return {"identical": False, "max_abs_diff": float((out.float() - ref.float()).abs().max())}


def check_against_direct(
    run: Any, direct: Any, qkv: tuple, q_shape: list[int], *, tolerant: bool = False
) -> tuple[Any, dict[str, Any]]:
    """``run(*qkv)`` and the ``DirectCheck`` fields of its output against ``direct`` called on copies taken
    first (an op may change its inputs in place: SageAttention 1.x subtracts K's mean from K); a second
    direct call where they differ tells a nondeterministic op from a backend that changes it.
    ``tolerant``: a direct call that fails is a note, not an error."""
    before = [x.clone() for x in qkv]
    out = run(*qkv)
    modified = [name for name, b, a in zip("qkv", before, qkv, strict=True) if not torch.equal(b, a)]
    seen = {"q_shape": q_shape, "inputs_modified": modified}
    try:
        ref = direct(*(x.clone() for x in before))
    except Exception as err:
        if not tolerant:
            raise
        return out, {**seen, "identical": False, "note": f"direct call failed: {type(err).__name__}: {err}"}
    found = bitwise_fields(out, ref)
    if "max_abs_diff" in found:
        found["op_repeatable"] = bool(torch.equal(direct(*(x.clone() for x in before)), ref))
    return out, {**seen, **found}


class FirstCallCheck(WrappedOp):
    """On the first call, also call the backend's op directly on the same inputs and compare bitwise."""

    def __init__(self, backend: AttentionBackend, direct: Any):
        super().__init__(backend)
        self.direct = direct
        self.result: DirectCheck | None = None

    def __call__(self, q, k, v, scale=None):
        if self.result is not None:
            return self.inner(q, k, v, scale)
        out, found = check_against_direct(
            lambda *qkv: self.inner(*qkv, scale),
            lambda *qkv: self.direct(*qkv, default_scale(q, scale)),
            (q, k, v),
            list(q.shape),
        )
        self.result = DirectCheck(**found)
        return out


class CountingBackend(WrappedOp):
    """Count calls per serving backend (and per DiT step with ``sites``); hand a refused call to
    ``fallback`` or record and raise it; an output breaking the contract fails the run at once."""

    max_errors = 20

    def __init__(
        self,
        backend: AttentionOp,
        requested: str,
        fallback: AttentionOp | str | None = None,
        direct_check: FirstCallCheck | None = None,
        sites: CallSites | None = None,
    ):
        super().__init__(backend)
        self.sites = sites
        self.per_step: dict[str, Counter[str]] = {}
        self.direct_check = direct_check
        self.requested = requested
        self.fallback = get_backend(fallback) if isinstance(fallback, str) else fallback
        self.calls: Counter[str] = Counter()
        self.fallbacks: Counter[str] = Counter()
        self.errors: list[str] = []

    @property
    def params(self) -> dict[str, Any]:  # type: ignore[override]
        return {**self.inner.params, "fallback": self.fallback.name if self.fallback is not None else None}

    def _note_error(self, message: str) -> None:
        if message not in self.errors and len(self.errors) < self.max_errors:
            self.errors.append(message)

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
    ) -> torch.Tensor:
        fell_back = False
        try:
            out = self.inner(q, k, v, scale)
            served = getattr(self.inner, "served", self.inner.name)
        except UnsupportedCall as err:
            self._note_error(str(err))
            if self.fallback is None:
                raise
            out, served, fell_back = self.fallback(q, k, v, scale), self.fallback.name, True
        if (problem := output_problem(q, v, out)) is not None:
            call = sum(self.calls.values()) + 1
            message = (
                f"attention backend {served}: call {call} (q {list(q.shape)} {q.dtype} on {q.device}): "
                f"its output {problem}"
            )
            self._note_error(message)
            raise OutputContractError(message)
        self.calls[served] += 1
        if self.sites is not None:
            self.per_step.setdefault(self.sites.current.step_key, Counter())[served] += 1
        if fell_back:
            self.fallbacks[served] += 1
        return out

    def rank_calls(self) -> RankCalls:
        check = self.direct_check.result if self.direct_check is not None else None
        return RankCalls(
            calls=dict(self.calls),
            fallbacks=dict(self.fallbacks),
            errors=list(self.errors),
            direct_check=check,
            per_step={step: dict(c) for step, c in self.per_step.items()},
        )

    def backend_params(self) -> dict[str, Any]:
        """The requested backend's params as attn_calls.json records them (non-JSON values by ``str``)."""
        return json.loads(json.dumps(self.inner.params, default=str))

    def __repr__(self) -> str:
        return f"CountingBackend({self.inner!r}, requested={self.requested!r}, fallback={self.fallback!r})"


def make_attention(
    choice: AttentionChoice | str,
    *,
    fallback: str | None = None,
    schedule: StepSchedule | None = None,
    sites: CallSites | None = None,
) -> CountingBackend:
    """backend [-> FirstCallCheck] [-> KVReversed] [-> KVChunked] [-> ScheduledAttention] -> CountingBackend
    for a run's ``choice``; the fallback and a schedule's exact backend get the same perturbation."""
    if isinstance(choice, str):
        choice = AttentionChoice(attn_type=choice)
    backend = get_backend(choice.attn_type, **choice.attn_options)
    if sites is not None:
        backend.bind_sites(sites)
    direct = backend.direct_call()
    checker = FirstCallCheck(backend, direct) if direct is not None else None
    op: AttentionOp = checker or backend
    fb: AttentionOp | None = get_backend(fallback) if fallback else None
    op, fb = _perturbed(op, choice), _perturbed(fb, choice)
    if schedule is not None:
        if sites is None:
            raise ValueError("make_attention: a schedule needs the run's call sites (sites=)")
        exact = _perturbed(get_backend(schedule.exact, **schedule.exact_options), choice)
        op = ScheduledAttention(op, exact, schedule, sites)
    return CountingBackend(op, requested=choice.attn_type, fallback=fb, direct_check=checker, sites=sites)


def _perturbed(op: AttentionOp | None, choice: AttentionChoice) -> AttentionOp | None:
    """``op`` under the choice's exact perturbation: K/V reversed, then K/V in chunks."""
    if op is not None and choice.kv_reversed:
        op = KVReversed(op)
    if op is not None and choice.kv_chunks > 1:
        op = KVChunked(op, choice.kv_chunks)
    return op


def shadowed_attention(
    primary: AttentionOp,
    shadows: list[ShadowSpec],
    settings: InSituSettings | None,
    folder: Path,
    *,
    primary_name: str,
    rank: str | int = "0",
    sites: CallSites | None = None,
) -> ShadowedAttention:
    """The primary with its shadows (each its own counted chain, no fallback), recording to ``folder``
    as ``rank``; a shadow that cannot run here is noted and left out. Close ``result.recorder`` at the end."""
    settings = settings or InSituSettings()
    recorder = InSituRecorder(folder, settings, rank=rank, sites=sites)
    ops: dict[str, AttentionOp] = {}
    for s in shadows:
        try:
            ops[s.name] = make_attention(s, sites=sites)
        except BackendUnavailable as err:
            recorder.note(f"shadow {s.name} not measured: {err}")
    return ShadowedAttention(primary, ops, recorder=recorder, primary_name=primary_name)
