"""A plugin kernel for tests: SDPA computed in fp16 (close to exact, not bitwise)."""

from __future__ import annotations

FP16_KERNEL = """
import torch
from harness.attention.registry import AttentionBackend, register_backend


@register_backend("{name}", exact=False, description="SDPA computed in fp16{tag}")
class FP16SDPA(AttentionBackend):
    default_options = {{"block": 64}}

    def __call__(self, q, k, v, scale=None):
        out = torch.nn.functional.scaled_dot_product_attention(q.half(), k.half(), v.half(), scale=scale)
        return out.to(q.dtype)
"""


def fp16_kernel(name: str, tag: str = "") -> str:
    """The source of a plugin file registering the fp16 kernel as ``name``."""
    return FP16_KERNEL.format(name=name, tag=tag)
