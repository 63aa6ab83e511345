"""Shadowed attention: the run's own attention, plus every shadow op on copies of the same q/k/v, each
measured against an exact yardstick on sampled query rows (256 of 111k tokens cost 0.2 % of an exact
call), reduced on the device to a few scalars. The model receives bitwise what the run without shadows
gives (the primary runs first on its own tensors; the rest under ``fork_rng``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from harness.attention.exact import exact_attention
from harness.attention.insitu.recorder import InSituRecorder
from harness.attention.registry import AttentionOp, UnsupportedCall, WrappedOp, default_scale
from harness.insitu_records import InSituCall, InSituOp, InSituOpError

# Scalars reduced per op and call, in this order (one device-to-host copy per call).
FIELDS = (
    "cosine", "rel_l1", "rmse", "max_abs", "row_cos_p1", "row_cos_p10", "nan", "inf", "scale", "rel_l1_unscaled"
)  # fmt: skip


def sample_rows(n_q: int, rows: int, generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """``rows`` distinct query indices in [0, n_q), sorted (all of them when rows >= n_q)."""
    if rows >= n_q:
        return torch.arange(n_q, device=device)
    idx = torch.randperm(n_q, generator=generator)[:rows]
    return idx.sort().values.to(device)


def yardstick(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, rows: torch.Tensor, dtype: str
) -> torch.Tensor:
    """Exact attention of the sampled query rows against every key, ``[B, H, rows, D]`` in ``dtype``."""
    budget = (1 << 27) if q.is_cuda else (1 << 23)  # scores per chunk: bounded memory at any length
    return exact_attention(
        q.index_select(2, rows), k, v, scale, getattr(torch, dtype), max_chunk_elems=budget
    )


def error_sums(o: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """fp64 ``o`` against ``r`` (last dim a row), on the device: sum(o r), sum(o^2), sum(r^2), sum|o - r|, sum|r|,
    sum (o - r)^2, max|o - r|; each row's cosine (1 where both are 0); rows where only ``o``'s is 0."""
    d = o - r
    o_norm, r_norm = o.norm(dim=-1), r.norm(dim=-1)
    row_cos = (o * r).sum(-1) / (o_norm * r_norm).clamp_min(torch.finfo(torch.float64).tiny)
    row_cos = torch.where((o_norm == 0) & (r_norm == 0), torch.ones_like(row_cos), row_cos)
    dot, oo, rr = (o * r).sum(), (o * o).sum(), (r * r).sum()
    sums = torch.stack([dot, oo, rr, d.abs().sum(), r.abs().sum(), (d * d).sum(), d.abs().max()])
    return sums, row_cos, ((o_norm == 0) & (r_norm > 0)).sum()


def error_scalars(out: torch.Tensor, ref: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """The FIELDS of ``out`` against ``ref`` (the yardstick on ``rows``), one fp64 tensor on the device."""
    o = out.index_select(2, rows).to(torch.float64)
    r = ref.to(torch.float64)
    sums, row_cos, _ = error_sums(o, r)
    dot, oo, rr, l1, ref_l1, sq, max_abs = sums
    # nan_to_num: one NaN row would make both quantiles NaN; NaNs are counted apart.
    p = torch.quantile(
        row_cos.nan_to_num(nan=-1.0), torch.tensor([0.01, 0.10], dtype=torch.float64, device=o.device)
    )
    counts = torch.stack([torch.isnan(out).sum(), torch.isinf(out).sum()]).to(torch.float64)
    # Least squares o ~ scale x r, and the error left once the scale is divided out: a softmax that
    # counts padded keys scales every row and keeps its direction (cosine near 1, rel L1 not).
    scale = dot / rr
    unscaled = (o / scale - r).abs().sum() / ref_l1
    head = torch.stack([dot / (oo * rr).sqrt(), l1 / ref_l1, (sq / o.numel()).sqrt(), max_abs])
    return torch.cat([head, p, counts, torch.stack([scale, unscaled])])


def op_error(values: list[float]) -> InSituOpError:
    """An InSituOpError from the FIELDS as error_scalars ordered them."""
    named = dict(zip(FIELDS, values, strict=True))
    return InSituOpError(
        **{k: v for k, v in named.items() if k not in ("nan", "inf")},
        nan=int(named["nan"]),
        inf=int(named["inf"]),
    )


def failed_op(message: str) -> InSituOpError:
    """The error of an op that refused or failed on a call: every metric NaN, the reason kept."""
    return InSituOpError(**dict.fromkeys(FIELDS[:6], math.nan), error=message)


def op_record(name: str, role: str, op: AttentionOp) -> InSituOp:
    """What the meta record says of an op (its backend's parameters; perturbations included)."""
    params = dict(getattr(op, "params", {}) or {})
    return InSituOp(
        name=name,
        role=role,
        attn_type=str(params.get("backend", op.name)),
        exact=bool(op.exact),
        kv_reversed=bool(params.get("kv_reversed", False)),
        kv_chunks=int(params.get("kv_chunks", 1)),
        params=params,
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class ShadowedAttention(WrappedOp):
    """The primary's output, measuring the shadows beside it; a shadow's refusal is that call's NaN
    with the reason, any other failure drops it for the rest of the run (named in the meta notes)."""

    def __init__(
        self,
        primary: AttentionOp,
        shadows: dict[str, AttentionOp],
        *,
        recorder: InSituRecorder,
        primary_name: str | None = None,
    ):
        super().__init__(primary)
        self.shadows = dict(shadows)
        self.recorder = recorder
        self.primary_name = primary_name or primary.name
        if self.primary_name in self.shadows:
            raise ValueError(f"shadow {self.primary_name!r} has the primary's name")
        self.generator = torch.Generator(device="cpu").manual_seed(recorder.settings.seed)
        ops = [op_record(self.primary_name, "primary", primary)]
        ops += [op_record(n, "shadow", op) for n, op in self.shadows.items()]
        recorder.set_ops(self.primary_name, ops)

    def __getattr__(self, name: str) -> Any:
        # The runner reads the primary's counts and checks (rank_calls, direct_check) through us.
        if name in ("inner", "__setstate__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __call__(self, q, k, v, scale=None):
        site = self.recorder.sites.current
        call = self.recorder.next_call()
        pristine = [x.detach().clone() for x in (q, k, v)]
        out = self.inner(q, k, v, scale)
        cuda = q.is_cuda
        with torch.random.fork_rng(devices=[q.device] if cuda else [], device_type="cuda" if cuda else None):
            self._measure(call, site, out, pristine, default_scale(pristine[0], scale))
        return out

    def _measure(self, call: int, site, out: torch.Tensor, qkv: list[torch.Tensor], scale: float) -> None:
        q, k, v = qkv
        device = q.device
        _sync(device)
        t0 = time.perf_counter()
        if self.recorder.wants_capture(site):
            self.recorder.capture(site, call, q, k, v, scale)
        rows = sample_rows(q.shape[2], self.recorder.settings.sample_rows, self.generator, device)
        with torch.no_grad():
            ref = yardstick(q, k, v, scale, rows, self.recorder.settings.yardstick)
            scalars = {self.primary_name: error_scalars(out.detach(), ref, rows)}
            failed = {}
            for name, op in list(self.shadows.items()):
                try:
                    shadow_out = op(*(x.clone() for x in qkv), scale)
                    scalars[name] = error_scalars(shadow_out, ref, rows)
                    del shadow_out
                except UnsupportedCall as err:
                    failed[name] = failed_op(f"refused: {err}")
                except (RuntimeError, ValueError) as err:  # OOM, a kernel error: stop measuring it
                    message = f"{type(err).__name__}: {err}".splitlines()[0]
                    failed[name] = failed_op(message)
                    del self.shadows[name]
                    self.recorder.note(f"shadow {name} failed on call {call} and was dropped: {message}")
            names = list(scalars)
            # One device-to-host copy per call: sum|r| first, then every op's scalars.
            flat = torch.cat([ref.to(torch.float64).abs().sum().view(1), *(scalars[n] for n in names)])
            values = flat.cpu().tolist()
        ref_l1, width = values[0], len(values[1:]) // max(1, len(names))
        errors = {n: op_error(values[1 + i * width : 1 + (i + 1) * width]) for i, n in enumerate(names)}
        errors.update(failed)
        _sync(device)
        b, h, n_q, d = q.shape
        self.recorder.write(
            InSituCall(
                call=call,
                rank=self.recorder.rank,
                step=site.step,
                block=site.block,
                kind=site.kind,
                batch=b,
                heads=h,
                q_len=n_q,
                k_len=k.shape[2],
                head_dim=d,
                rows=int(rows.numel()),
                elements=b * h * int(rows.numel()) * d,
                ref_l1=ref_l1,
                seconds=time.perf_counter() - t0,
                errors={n: errors[n] for n in [self.primary_name, *self.shadows, *failed] if n in errors},
            )
        )

    def __repr__(self) -> str:
        return f"ShadowedAttention({self.inner!r}, shadows={list(self.shadows)})"
