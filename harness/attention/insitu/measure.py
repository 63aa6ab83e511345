"""The in-situ yardstick (exact attention on a sample of query rows: 256 of 111k tokens cost 0.2 % of
an exact call) and every op's error against it on the same rows, reduced on the device to a few scalars.
"""

from __future__ import annotations

import math

import torch

from harness.attention.exact import exact_attention
from harness.insitu_records import InSituOpError

# Scalars reduced per op and call, in this order (one device-to-host copy per call).
FIELDS = (
    "cosine", "rel_l1", "rmse", "max_abs", "row_cos_p1", "row_cos_p10", "nan", "inf", "scale", "rel_l1_unscaled"
)  # fmt: skip
YARDSTICK_DTYPES = {"float32": torch.float32, "float64": torch.float64}


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
    compute = YARDSTICK_DTYPES[dtype]
    budget = (1 << 27) if q.is_cuda else (1 << 23)  # scores per chunk: bounded memory at any length
    return exact_attention(
        q.index_select(2, rows), k, v, scale, compute_dtype=compute, max_chunk_elems=budget
    )


def error_scalars(out: torch.Tensor, ref: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """The FIELDS of ``out`` against ``ref`` (the yardstick on ``rows``), one fp64 tensor on the device."""
    full = out
    o = out.index_select(2, rows).to(torch.float64)
    r = ref.to(torch.float64)
    d = o - r
    dot, oo, rr = (o * r).sum(), (o * o).sum(), (r * r).sum()
    cosine = dot / (oo * rr).sqrt()
    rel_l1 = d.abs().sum() / r.abs().sum()
    rmse = (d * d).mean().sqrt()
    max_abs = d.abs().max()
    o_norm, r_norm = o.norm(dim=-1), r.norm(dim=-1)
    row_cos = (o * r).sum(-1) / (o_norm * r_norm).clamp_min(torch.finfo(torch.float64).tiny)
    row_cos = torch.where((o_norm == 0) & (r_norm == 0), torch.ones_like(row_cos), row_cos).reshape(-1)
    # nan_to_num: one NaN row would make both quantiles NaN; NaNs are counted apart.
    p = torch.quantile(
        row_cos.nan_to_num(nan=-1.0), torch.tensor([0.01, 0.10], dtype=torch.float64, device=o.device)
    )
    counts = torch.stack([torch.isnan(full).sum(), torch.isinf(full).sum()]).to(torch.float64)
    # Least squares o ~ scale x r, and the error left once the scale is divided out: a softmax that
    # counts padded keys scales every row and keeps its direction (cosine near 1, rel L1 not).
    scale = dot / rr
    unscaled = (o / scale - r).abs().sum() / r.abs().sum()
    return torch.cat(
        [torch.stack([cosine, rel_l1, rmse, max_abs]), p, counts, torch.stack([scale, unscaled])]
    )


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
