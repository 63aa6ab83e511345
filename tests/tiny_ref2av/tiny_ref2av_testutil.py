"""Helpers for the tiny_ref2av tests: attention variants, one pipeline run, PSNR."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from harness.records import TimingRecord
from harness.tiny_ref2av.config import PipelineConfig
from harness.tiny_ref2av.run import run_pipeline

PROMPT = "an astronaut waves in a sunny studio"


def exact_attention(q, k, v, scale):
    return F.scaled_dot_product_attention(q, k, v, scale=scale)


def kv_reversed_attention(q, k, v, scale):
    """Exact attention with the key/value order reversed: only the summation order changes."""
    return F.scaled_dot_product_attention(q, k.flip(-2), v.flip(-2), scale=scale)


def _int8(x: torch.Tensor) -> torch.Tensor:
    """Symmetric int8 round trip with one scale per (batch, head, token)."""
    s = x.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / 127.0
    return (x / s).round().clamp(-127, 127) * s


def quantized_attention(q, k, v, scale):
    """A SageAttention-like perturbation: int8 Q/K (K smoothed by its token mean), fp8 P and V."""
    k = k - k.mean(dim=-2, keepdim=True)  # softmax is invariant to this shift
    s = (_int8(q) @ _int8(k).transpose(-1, -2)) * scale
    p = torch.exp(s - s.amax(dim=-1, keepdim=True))
    denom = p.sum(dim=-1, keepdim=True)
    p8 = (p * 448).to(torch.float8_e4m3fn).float() / 448
    vs = v.abs().amax(dim=-2, keepdim=True).clamp_min(1e-12) / 448
    v8 = (v / vs).to(torch.float8_e4m3fn).float() * vs
    return (p8 @ v8) / denom


@dataclass
class Run:
    mp4: Path
    latents: Path
    timing: TimingRecord
    steps_seen: list[tuple[int, int]]


def do_run(cfg: PipelineConfig, out: Path, *, seed: int = 42, attention=exact_attention) -> Run:
    seen: list[tuple[int, int]] = []
    timing = run_pipeline(
        cfg,
        seed=seed,
        prompt=PROMPT,
        attention=attention,
        out_path=out / "output.mp4",
        latents_dir=out / "latents",
        on_step=lambda i, n: seen.append((i, n)),
    )
    return Run(out / "output.mp4", out / "latents", timing, seen)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)
