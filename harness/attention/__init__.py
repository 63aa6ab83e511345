"""Attention backends behind one calling convention: ``backend(q, k, v, scale=None) -> out``.

q, k, v are ``[B, H, N, D]`` (Nq may differ from Nk), attention is non-causal and ``out`` has
q's dtype and shape. Backends register by decorator (importing this package registers the harness's
own); optional packages (sageattention, aiter) are imported only when such a backend is constructed.
"""

from harness.attention import aiter_ops, exact, sage_emul, sage_thuml  # noqa: F401  (registration)
