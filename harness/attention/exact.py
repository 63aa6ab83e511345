"""Exact attention: the torch SDPA backend and a high-precision reference."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from harness.attention.registry import (
    AttentionBackend,
    UnsupportedCall,
    check_qkv,
    default_scale,
    register_backend,
)
from harness.errors import BackendUnavailable, HarnessError

_SDPA_BACKENDS = ("auto", "flash", "efficient", "cudnn", "math")
_GPU_ONLY = ("efficient", "cudnn")  # flash and math also run on a CPU


@contextlib.contextmanager
def full_fp32_matmul() -> Iterator[None]:
    """Force IEEE fp32 matmuls (no TF32 / bf16 shortcuts) on every device for the block."""
    prev_precision = torch.get_float32_matmul_precision()
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
        torch.set_float32_matmul_precision(prev_precision)


def _sdpa_context(choice: str) -> contextlib.AbstractContextManager[Any]:
    if choice == "auto":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kernel = {
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "math": SDPBackend.MATH,
    }[choice]
    return sdpa_kernel([kernel])


@register_backend(
    "torch_sdpa",
    exact=True,
    description="torch.nn.functional.scaled_dot_product_attention (exact; the reference arm)",
)
class TorchSDPA(AttentionBackend):
    default_options = {"sdpa_backend": "auto"}

    def setup(self) -> None:
        choice = self.options["sdpa_backend"]
        if choice not in _SDPA_BACKENDS:
            raise HarnessError(
                f"torch_sdpa: option sdpa_backend={choice!r}; expected one of {', '.join(_SDPA_BACKENDS)}"
            )
        if choice in _GPU_ONLY and not torch.cuda.is_available():
            raise BackendUnavailable(f"torch_sdpa[{choice}]: torch has this SDPA kernel on GPUs only")

    @property
    def params(self) -> dict[str, Any]:
        return {**super().params, "impl": "torch.nn.functional.scaled_dot_product_attention"}

    def direct_call(self):
        return self._sdpa

    def _sdpa(self, q, k, v, scale):
        with _sdpa_context(self.options["sdpa_backend"]):
            return F.scaled_dot_product_attention(q, k, v, scale=scale)

    def __call__(self, q, k, v, scale=None):
        check_qkv(self.name, q, k, v)
        try:
            return self._sdpa(q, k, v, default_scale(q, scale))
        except RuntimeError as err:
            if self.options["sdpa_backend"] == "auto":
                raise
            # A pinned SDPA kernel that cannot take these inputs: a refusal, not a crash.
            raise UnsupportedCall(f"torch_sdpa[{self.options['sdpa_backend']}]: {err}") from err


def exact_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float | None = None,
    compute_dtype: torch.dtype = torch.float64,
    max_chunk_elems: int = 1 << 26,
) -> torch.Tensor:
    """softmax(q k^T * scale) v as [B, H, Nq, D] in ``compute_dtype``, chunked over queries: each chunk holds
    at most ``max_chunk_elems`` scores, so the peak is about 3x that many elements plus the upcast K, V."""
    check_qkv("exact_attention", q, k, v)
    s = default_scale(q, scale)
    b, h, n_q, _ = q.shape
    n_k = k.shape[2]
    kt = k.to(compute_dtype).transpose(-1, -2)
    vc = v.to(compute_dtype)
    rows = max(1, max_chunk_elems // max(1, b * h * n_k))
    out = torch.empty(q.shape, dtype=compute_dtype, device=q.device)
    with full_fp32_matmul():
        for r0 in range(0, n_q, rows):
            scores = torch.matmul(q[:, :, r0 : r0 + rows].to(compute_dtype), kt).mul_(s)
            scores.sub_(scores.amax(dim=-1, keepdim=True)).exp_()
            out[:, :, r0 : r0 + rows] = torch.matmul(scores, vc).div_(scores.sum(dim=-1, keepdim=True))
    return out
