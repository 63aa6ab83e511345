"""Attention backends behind one calling convention: ``backend(q, k, v, scale=None) -> out``.

q, k, v are ``[B, H, N, D]`` (Nq may differ from Nk), attention is non-causal and ``out`` has
q's dtype and shape. Backends register by decorator; optional packages (sageattention, aiter)
are imported only when such a backend is constructed.
"""

from harness.attention import aiter_ops, exact, sage_emul, sage_thuml  # noqa: F401  (registration)
from harness.attention.exact import exact_attention, full_fp32_matmul
from harness.attention.registry import (
    AttentionBackend,
    AttentionOp,
    UnsupportedCall,
    availability,
    backend_class,
    get_backend,
    list_backends,
    register_backend,
)
from harness.attention.sage_emul import sage_attention_emulated
from harness.attention.wrappers import CountingBackend, KVChunked, KVReversed, make_attention

__all__ = [
    "AttentionBackend",
    "AttentionOp",
    "CountingBackend",
    "KVChunked",
    "KVReversed",
    "UnsupportedCall",
    "availability",
    "backend_class",
    "exact_attention",
    "full_fp32_matmul",
    "get_backend",
    "list_backends",
    "make_attention",
    "register_backend",
    "sage_attention_emulated",
]
