"""Attention backends behind one calling convention: ``backend(q, k, v, scale=None) -> out``.

q, k, v are ``[B, H, N, D]`` (Nq may differ from Nk), attention is non-causal and ``out`` has
q's dtype and shape. Backends register by decorator (importing this package registers the harness's
own); optional packages (sageattention, aiter) are imported only when such a backend is constructed.
A plug-in kernel subclasses ``AttentionBackend`` under ``register_backend`` and refuses a call it
cannot serve with ``UnsupportedCall`` (README): those three names stay importable from here.
"""

from harness.attention import exact, gpu_backends, planted, sage_emul  # noqa: F401  (registration)
from harness.attention.registry import AttentionBackend, UnsupportedCall, register_backend  # noqa: F401  (plug-in API)
