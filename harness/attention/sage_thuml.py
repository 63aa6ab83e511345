"""thu-ml SageAttention (the ``sageattention`` package) as the ``sage_attn2`` backend.

The name follows LightX2V's attention type; what runs depends on the installed package: 2.x
exposes ``sageattn_qk_int8_pv_fp16_triton`` (INT8 QK per block, fp16 PV, the path LightX2V picks
on sm89/sm120 and the one that also runs under HIP); 1.x only has ``sageattn`` (the same Triton
scheme, SageAttention 1: what runs on the H200, where 1.0.6 is installed). The package is imported at construction, never at harness import.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import torch

from harness.attention.registry import (
    AttentionBackend,
    UnsupportedCall,
    check_qkv,
    default_scale,
    register_backend,
)
from harness.envinfo import package_version
from harness.errors import BackendUnavailable

PREFERRED_FUNCTION = "sageattn_qk_int8_pv_fp16_triton"


@register_backend(
    "sage_attn2",
    exact=False,
    description=(
        "thu-ml sageattention as installed: 2.x sageattn_qk_int8_pv_fp16_triton; 1.x sageattn "
        "(SageAttention 1, e.g. 1.0.6 on the H200, not SageAttention2); GPU only"
    ),
)
class SageAttn2(AttentionBackend):
    # function: "auto" picks PREFERRED_FUNCTION when the package has it, else "sageattn".
    # kwargs: extra keyword arguments for the function (e.g. {"pv_accum_dtype": "fp32+fp32"}).
    default_options = {"function": "auto", "kwargs": {}}

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        if not torch.cuda.is_available():
            return False, "no GPU visible to torch (torch.cuda.is_available() is False)"
        if importlib.util.find_spec("sageattention") is None:
            return False, "the python package 'sageattention' is not installed"
        version = package_version("sageattention") or "?"
        runs = "sageattn, the 1.x Triton kernel" if version.startswith("1.") else PREFERRED_FUNCTION
        return True, f"sageattention {version} installed: runs {runs}"

    def setup(self) -> None:
        try:
            import sageattention
        except Exception as err:  # a broken build raises more than ImportError
            raise BackendUnavailable(f"sage_attn2: importing sageattention failed: {err}") from err
        choice = self.options["function"]
        if choice == "auto":
            choice = PREFERRED_FUNCTION if hasattr(sageattention, PREFERRED_FUNCTION) else "sageattn"
        fn = getattr(sageattention, choice, None)
        if fn is None:
            raise BackendUnavailable(f"sage_attn2: sageattention has no function {choice!r}")
        self._fn = fn
        self._function = choice
        self._version = package_version("sageattention")

    @property
    def params(self) -> dict[str, Any]:
        return {
            **super().params,
            "function": self._function,
            "package_version": self._version,
            "tensor_layout": "HND",
            "is_causal": False,
        }

    def direct_call(self):
        fn = getattr(importlib.import_module("sageattention"), self._function)
        kwargs = self.options["kwargs"]
        return lambda q, k, v, s: fn(q, k, v, tensor_layout="HND", is_causal=False, sm_scale=s, **kwargs)

    def supported_head_dim(self, d: int) -> bool:
        if self._function == "sageattn" and (self._version or "").startswith("1."):
            return d in (64, 96, 128)  # the 1.x Triton kernels are specialised per head dim
        return d <= 128  # 2.x pads to 64 or 128 and raises above

    def __call__(self, q, k, v, scale=None):
        check_qkv(self.name, q, k, v)
        if q.device.type != "cuda":
            raise UnsupportedCall(f"sage_attn2: tensors on {q.device}; the kernels need a GPU")
        if q.dtype not in (torch.float16, torch.bfloat16):
            raise UnsupportedCall(f"sage_attn2: dtype {q.dtype} (fp16 or bf16 only)")
        if not self.supported_head_dim(q.shape[-1]):
            raise UnsupportedCall(f"sage_attn2: head dim {q.shape[-1]} unsupported by {self._function}")
        out = self._fn(
            q,
            k,
            v,
            tensor_layout="HND",
            is_causal=False,
            sm_scale=default_scale(q, scale),
            **self.options["kwargs"],
        )
        return out[0] if isinstance(out, tuple) else out
