"""A `sageattention` package served by aiter's gfx1201 op (``sageattention: aiter_shim``), bitwise
``aiter_sage_attn``; what the op cannot honour is refused, never computed otherwise; variant knobs ignored.
"""

from __future__ import annotations

import functools
import importlib
import math
from typing import Any

from harness.runners.lightx2v.rank_env import sageattn_over

__version__ = "0.0.0+aiter.gfx1201"
IS_AITER_SHIM = True  # lets the harness tell this package from thu-ml's
OP_MODULE = "aiter.ops.gfx1201.sage_attention"
OP_NAME = "gfx1201_sage_attention"


def _op():
    """The aiter function, looked up on every call (a counting wrapper put on it is seen)."""
    try:
        module = importlib.import_module(OP_MODULE)
    except ImportError as err:
        raise ImportError(f"sageattention (aiter shim): cannot import {OP_MODULE} ({err})") from err
    fn = getattr(module, OP_NAME, None)
    if fn is None:
        raise ImportError(f"sageattention (aiter shim): {OP_MODULE} has no {OP_NAME}")
    return fn


def _refuse(q, is_causal: bool, sm_scale: float | None, return_lse: bool, attn_mask: Any) -> None:
    if is_causal:
        raise NotImplementedError("sageattention (aiter shim): the gfx1201 op is non-causal only")
    if attn_mask is not None:
        raise NotImplementedError("sageattention (aiter shim): the gfx1201 op takes no attention mask")
    if return_lse:
        raise NotImplementedError("sageattention (aiter shim): the gfx1201 op does not return the LSE")
    if q.ndim != 4:
        raise ValueError(f"sageattention (aiter shim): expected 4-D q/k/v, got {q.ndim}-D")
    head_dim = q.shape[-1]
    if sm_scale is not None and not math.isclose(sm_scale, head_dim**-0.5, rel_tol=1e-6):
        raise NotImplementedError(
            f"sageattention (aiter shim): the gfx1201 op uses scale head_dim**-0.5 = {head_dim**-0.5:.6g}, "
            f"got sm_scale={sm_scale:.6g}"
        )


def _run(q, k, v, _scale):  # [B, N, H, D], contiguous: the op's own layout (and its fixed scale)
    return _op()(*(t.contiguous() for t in (q, k, v)))


_entry = functools.partial(sageattn_over, "aiter shim", "NHD", _refuse, _run, __name__)
sageattn = _entry("sageattn")
# the entry LightX2V picks on devices reporting capability (8, 9) or (12, 0); same op
sageattn_qk_int8_pv_fp16_triton = _entry("sageattn_qk_int8_pv_fp16_triton")

__all__ = ["sageattn", "sageattn_qk_int8_pv_fp16_triton", "IS_AITER_SHIM", "__version__"]
