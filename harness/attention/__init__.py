"""Attention backends behind one calling convention: ``backend(q, k, v, scale=None) -> out``.

q, k, v are ``[B, H, N, D]`` (Nq may differ from Nk), attention is non-causal and ``out`` has
q's dtype and shape. Backends register by decorator; optional packages (sageattention, aiter)
are imported only when such a backend is constructed. The names below are the package's API.
"""

from harness.attention import aiter_ops, exact, sage_emul, sage_thuml  # noqa: F401  (registration)
from harness.attention.exact import exact_attention, full_fp32_matmul  # noqa: F401
from harness.attention.registry import (  # noqa: F401
    AttentionBackend,
    AttentionOp,
    UnsupportedCall,
    availability,
    backend_class,
    get_backend,
    list_backends,
    register_backend,
)
from harness.attention.sage_emul import sage_attention_emulated  # noqa: F401
from harness.attention.wrappers import CountingBackend, KVChunked, KVReversed, make_attention  # noqa: F401
