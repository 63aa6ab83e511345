"""Inside a rank: the LightX2V attention class against its underlying op, called directly.

The builtin runner's first-call check (``harness.attention.wrappers.FirstCallCheck``), made on a
LightX2V run: on the first DiT self-attention call of the requested backend, its output is
compared bitwise with the op it binds (``DIRECT_OPS``), called on copies of the same inputs with
LightX2V's layout adapter only. A backend without an entry is "not checked". The result has the
fields of ``harness.records.DirectCheck`` (this module runs without pydantic). Standard library
at import time; torch is imported by the check.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from harness.runners.lightx2v.rank_env import SAGE_MODULE

AITER_OP = "aiter.ops.gfx1201.sage_attention:gfx1201_sage_attention"
FLASH_MODULE = "lightx2v.common.ops.attn.flash_attn"


def _batched(q, k, v):
    """LightX2V's packed ``[N, H, D]`` (or ``[B, N, H, D]``) as ``[B, N, H, D]``."""
    return tuple(t.unsqueeze(0) for t in (q, k, v)) if q.ndim == 3 else (q, k, v)


def sdpa_direct(q, k, v, causal: bool = False):
    import torch.nn.functional as F

    q4, k4, v4 = (t.transpose(1, 2) for t in _batched(q, k, v))
    x = F.scaled_dot_product_attention(q4, k4, v4, is_causal=causal).transpose(1, 2)
    return x.reshape(x.shape[0], x.shape[1], -1).squeeze(0)


def _bound(module: str, name: str) -> Callable:
    fn = getattr(sys.modules.get(module), name, None)
    if fn is None:
        raise LookupError(f"{module} bound no {name}")
    return fn


def sage_direct(q, k, v, causal: bool = False):
    q4, k4, v4 = (t.contiguous() for t in _batched(q, k, v))
    out = _bound(SAGE_MODULE, "sageattn")(q4, k4, v4, tensor_layout="NHD")
    return out.view(q4.shape[0] * q4.shape[1], -1)


def flash3_direct(q, k, v, causal: bool = False):
    q4, k4, v4 = _batched(q, k, v)
    out = _bound(FLASH_MODULE, "flash_attn_func_v3")(q4, k4, v4, softmax_scale=None, causal=causal)
    return out.reshape(q4.shape[0] * q4.shape[1], -1)


def aiter_direct(q, k, v, causal: bool = False):
    import importlib

    module, _, name = AITER_OP.partition(":")
    q4, k4, v4 = (t.contiguous() for t in _batched(q, k, v))
    out = getattr(importlib.import_module(module), name)(q4, k4, v4)
    return out.reshape(q4.shape[0] * q4.shape[1], -1)


DIRECT_OPS: dict[str, Callable] = {
    "torch_sdpa": sdpa_direct,  # F.scaled_dot_product_attention on [B, H, N, D]
    "sage_attn2": sage_direct,  # the sageattn LightX2V bound at import (thu-ml's or a shim's), NHD
    "flash_attn3": flash3_direct,  # the flash_attn_func_v3 LightX2V bound
    # the pull request's backend (or the name AITER_SAGE_ATTN_TYPE gives): aiter's op, [B, N, H, D]
    os.environ.get("AITER_SAGE_ATTN_TYPE") or "aiter_sage_attn": aiter_direct,
}


def q_shape(q) -> list[int]:
    """``[B, H, N, D]`` of a LightX2V call's q (the builtin's DirectCheck convention)."""
    shape = [1, *q.shape] if len(q.shape) == 3 else list(q.shape)
    return [shape[0], shape[2], shape[1], shape[3]] if len(shape) == 4 else shape


def check_call(
    name: str, run: Callable[[Any, Any, Any], Any], q, k, v, causal: bool = False
) -> tuple[Any, dict[str, Any] | None]:
    """Run the call (``run(q, k, v)``) and compare it with the direct op: (output, check or None).

    Copies come first: an op may change its inputs in place (SageAttention 1.x subtracts K's mean
    from K), and the direct call must see what the backend saw.
    """
    import torch

    direct = DIRECT_OPS.get(name)
    if direct is None:
        return run(q, k, v), None
    before = [t.clone() for t in (q, k, v)]
    out = run(q, k, v)
    modified = [n for n, b, a in zip("qkv", before, (q, k, v), strict=True) if not torch.equal(b, a)]
    result: dict[str, Any] = {"q_shape": q_shape(before[0]), "inputs_modified": modified}
    try:
        ref = direct(*(t.clone() for t in before), causal=causal)
    except Exception as err:  # the op is not callable this way: say why, never fail the run
        return out, {**result, "identical": False, "note": f"direct call failed: {type(err).__name__}: {err}"}
    if tuple(ref.shape) != tuple(out.shape):
        note = f"shapes differ {tuple(out.shape)} vs {tuple(ref.shape)}"
        return out, {**result, "identical": False, "note": note}
    if torch.equal(out, ref):
        return out, {**result, "identical": True}
    again = direct(*(t.clone() for t in before), causal=causal)
    return out, {
        **result,
        "identical": False,
        "max_abs_diff": float((out.float() - ref.float()).abs().max()),
        "op_repeatable": bool(torch.equal(again, ref)),
    }
