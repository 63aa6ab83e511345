"""A `sageattention` package served by ``sage_emul_thuml`` (``sageattention: emulator``): the real LightX2V
on any device, CPU included (timings are no kernel's). Non-causal, unmasked, no LSE; variant knobs ignored.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.0.0+harness.sage_emul_thuml"
IS_HARNESS_EMULATOR = True  # lets the harness tell this package from thu-ml's
EMULATED = "sage_emul_thuml"

_IGNORED = frozenset(
    {"quantization_backend", "qk_quant_gran", "pv_accum_dtype", "smooth_k", "smooth_v", "output_dtype"}
)
_backend: Any = None


def _emulation():
    global _backend
    if _backend is None:
        from harness.attention.registry import get_backend

        _backend = get_backend(EMULATED)
    return _backend


def provenance() -> dict:
    """What the emulation models and whether it was measured."""
    return _emulation().params["provenance"]


def sageattn(
    q, k, v, tensor_layout: str = "HND", is_causal: bool = False, sm_scale=None, return_lse=False, **kwargs
):
    """thu-ml's ``sageattn`` signature; the output has the input layout and dtype."""
    unknown = sorted(set(kwargs) - _IGNORED - {"attn_mask"})
    if unknown:
        raise TypeError(f"sageattention (harness emulator): unsupported argument(s) {', '.join(unknown)}")
    if is_causal or kwargs.get("attn_mask") is not None or return_lse:
        raise NotImplementedError("sageattention (harness emulator): non-causal, unmasked, no LSE only")
    if tensor_layout == "NHD":  # [B, N, H, D]
        out = _emulation()(*(t.transpose(1, 2) for t in (q, k, v)), sm_scale)
        return out.transpose(1, 2).contiguous()
    if tensor_layout == "HND":  # [B, H, N, D]: the emulation's own layout
        return _emulation()(q, k, v, sm_scale)
    raise ValueError(
        f"sageattention (harness emulator): tensor_layout must be 'HND' or 'NHD', got {tensor_layout!r}"
    )


# the entry LightX2V picks on devices reporting capability (8, 9) or (12, 0); same emulation
sageattn_qk_int8_pv_fp16_triton = sageattn

__all__ = ["sageattn", "sageattn_qk_int8_pv_fp16_triton", "IS_HARNESS_EMULATOR", "__version__"]
