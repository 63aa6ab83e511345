"""Shared helpers of the attention tests (random inputs, error metrics)."""

from __future__ import annotations

import torch


def make_qkv(
    n_q: int,
    n_k: int | None = None,
    *,
    b: int = 1,
    h: int = 2,
    d: int = 64,
    q_scale: float = 1.0,
    k_bias: float = 0.0,
    v_bias: float = 0.0,
    dtype: torch.dtype = torch.bfloat16,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random attention inputs; k_bias / v_bias add a per-channel offset (channel outliers)."""
    n_k = n_q if n_k is None else n_k
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, n_q, d, generator=g) * q_scale
    k = torch.randn(b, h, n_k, d, generator=g) + k_bias * torch.randn(b, h, 1, d, generator=g)
    v = torch.randn(b, h, n_k, d, generator=g) + v_bias * torch.randn(b, h, 1, d, generator=g)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def errors(out: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    """Cosine, relative L1 and RMSE in fp64 (SageAttention's accuracy metrics)."""
    o, r = out.double().flatten(), ref.double().flatten()
    return {
        "cos": float(o @ r / (o.norm() * r.norm())),
        "rel_l1": float((o - r).abs().sum() / r.abs().sum()),
        "rmse": float((o - r).pow(2).mean().sqrt()),
        "max_abs": float((o - r).abs().max()),
    }
