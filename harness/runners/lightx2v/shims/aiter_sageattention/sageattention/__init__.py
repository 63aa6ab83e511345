"""A `sageattention` package served by aiter's gfx1201 op (``sageattention: aiter_shim``), bitwise
``aiter_sage_attn``; what the op cannot honour is refused, never computed otherwise; variant knobs ignored.
"""

from __future__ import annotations

import importlib
import math
from typing import Any

__version__ = "0.0.0+aiter.gfx1201"
IS_AITER_SHIM = True  # lets the harness tell this package from thu-ml's
OP_MODULE = "aiter.ops.gfx1201.sage_attention"
OP_NAME = "gfx1201_sage_attention"

_IGNORED = frozenset(
    {"quantization_backend", "qk_quant_gran", "pv_accum_dtype", "smooth_k", "smooth_v", "output_dtype"}
)


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


def _check(
    q, is_causal: bool, sm_scale: float | None, return_lse: bool, attn_mask: Any, kwargs: dict
) -> None:
    unknown = sorted(set(kwargs) - _IGNORED)
    if unknown:
        raise TypeError(f"sageattention (aiter shim): unsupported argument(s) {', '.join(unknown)}")
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


def _run(q, k, v, tensor_layout: str):
    if tensor_layout == "NHD":  # [B, N, H, D]: the op's own layout
        return _op()(q.contiguous(), k.contiguous(), v.contiguous())
    if tensor_layout == "HND":  # [B, H, N, D]
        out = _op()(*(t.transpose(1, 2).contiguous() for t in (q, k, v)))
        return out.transpose(1, 2).contiguous()
    raise ValueError(
        f"sageattention (aiter shim): tensor_layout must be 'HND' or 'NHD', got {tensor_layout!r}"
    )


def sageattn(
    q, k, v, tensor_layout: str = "HND", is_causal: bool = False, sm_scale=None, return_lse=False, **kwargs
):
    """thu-ml's ``sageattn`` signature; the output has the input layout and dtype."""
    attn_mask = kwargs.pop("attn_mask", None)
    _check(q, is_causal, sm_scale, return_lse, attn_mask, kwargs)
    return _run(q, k, v, tensor_layout)


def sageattn_qk_int8_pv_fp16_triton(
    q, k, v, tensor_layout: str = "HND", quantization_backend: str = "triton", is_causal: bool = False,
    attn_mask: Any = None, sm_scale: float | None = None, smooth_k: bool = True, return_lse: bool = False,
    **kwargs: Any,
):  # fmt: skip
    """The entry LightX2V picks on devices reporting capability (8, 9) or (12, 0); same op."""
    _check(q, is_causal, sm_scale, return_lse, attn_mask, kwargs)
    return _run(q, k, v, tensor_layout)


__all__ = ["sageattn", "sageattn_qk_int8_pv_fp16_triton", "IS_AITER_SHIM", "__version__"]
