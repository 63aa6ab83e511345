"""thu-ml SageAttention (the ``sageattention`` package) as the ``sage_attn2`` backend (LightX2V's name).
Option ``package``: ``sageattention2`` (d1a57a5 from ``make sageattention``'s pinned install, its
``sageattn_qk_int8_pv_fp16_triton``, the path LightX2V picks on gfx1201), ``sageattention1`` (1.0.6,
``sageattn``), ``environment`` (whatever ``import sageattention`` finds) or ``auto`` (the first where
installed, else the last); imported at construction only.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import torch

from harness.attention.registry import (
    AttentionBackend,
    UnsupportedCall,
    check_gpu_call,
    default_scale,
    register_backend,
)
from harness.envinfo import package_version
from harness.errors import BackendUnavailable, HarnessError
from harness.sage_packages import PACKAGES, installed, load, read_marker

PREFERRED_FUNCTION = "sageattn_qk_int8_pv_fp16_triton"
PACKAGE_CHOICES = ("auto", "environment", *PACKAGES)
INSTALL_HINT = "make sageattention (on a CUDA or ROCm machine)"


@register_backend(
    "sage_attn2",
    exact=False,
    description=(
        "thu-ml SageAttention: option package sageattention2 (d1a57a5, sageattn_qk_int8_pv_fp16_triton) | "
        "sageattention1 (1.0.6 sageattn) | environment | auto; GPU only"
    ),
)
class SageAttn2(AttentionBackend):
    # function: "auto" picks PREFERRED_FUNCTION when the package has it, else "sageattn".
    # kwargs: extra keyword arguments for the function (e.g. {"pv_accum_dtype": "fp32+fp32"}).
    default_options = {"function": "auto", "kwargs": {}, "package": "auto"}

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        if not torch.cuda.is_available():
            return False, "no GPU visible to torch (torch.cuda.is_available() is False)"
        if installed("sageattention2"):
            return (
                True,
                f"{PACKAGES['sageattention2'].label} installed by the harness: runs {PREFERRED_FUNCTION}",
            )
        if importlib.util.find_spec("sageattention") is None:
            return False, f"the python package 'sageattention' is not installed ({INSTALL_HINT})"
        version = package_version("sageattention") or "?"
        runs = "sageattn, the 1.x Triton kernel" if version.startswith("1.") else PREFERRED_FUNCTION
        return True, f"sageattention {version} installed: runs {runs}"

    @classmethod
    def option_problem(cls, options: dict[str, Any]) -> str | None:
        package = options.get("package", cls.default_options["package"])
        if package not in PACKAGE_CHOICES:
            return f"sage_attn2: option package={package!r}; expected one of {', '.join(PACKAGE_CHOICES)}"
        return None

    def setup(self) -> None:
        why = self.option_problem(self.options)
        if why:
            raise HarnessError(why)
        package = self.options["package"]
        if package == "auto":
            package = "sageattention2" if installed("sageattention2") else "environment"
        self._package = package
        self._marker = None if package == "environment" else read_marker(PACKAGES[package])
        if package != "environment" and self._marker is None:
            raise BackendUnavailable(
                f"sage_attn2: {PACKAGES[package].label} is not installed ({INSTALL_HINT})"
            )
        try:
            if package == "environment":
                module = importlib.import_module("sageattention")
                self._version = package_version("sageattention")
            else:
                module = load(package)
                self._version = str(self._marker.get("version") or PACKAGES[package].version)
        except Exception as err:  # a broken build raises more than ImportError
            raise BackendUnavailable(
                f"sage_attn2: importing sageattention ({package}) failed: {err}"
            ) from err
        choice = self.options["function"]
        if choice == "auto":
            choice = PREFERRED_FUNCTION if hasattr(module, PREFERRED_FUNCTION) else "sageattn"
        fn = getattr(module, choice, None)
        if fn is None:
            raise BackendUnavailable(f"sage_attn2: sageattention ({package}) has no function {choice!r}")
        self._fn = fn
        self._function = choice

    @property
    def params(self) -> dict[str, Any]:
        marker = self._marker or {}
        return {
            **super().params,
            "package": self._package,  # the choice resolved ("auto" says which it became)
            "function": self._function,
            "package_version": self._version,
            **{f"package_{key}": marker[key] for key in ("commit", "source_sha256") if marker.get(key)},
            "tensor_layout": "HND",
            "is_causal": False,
        }

    def direct_call(self):
        fn, kwargs = self._fn, self.options["kwargs"]
        return lambda q, k, v, s: fn(q, k, v, tensor_layout="HND", is_causal=False, sm_scale=s, **kwargs)

    def supported_head_dim(self, d: int) -> bool:
        if self._function == "sageattn" and (self._version or "").startswith("1."):
            return d in (64, 96, 128)  # the 1.x Triton kernels are specialised per head dim
        return d <= 128  # 2.x pads to 64 or 128 and raises above

    def __call__(self, q, k, v, scale=None):
        check_gpu_call(self.name, q, k, v, needs="the kernels need a GPU", dtypes="fp16 or bf16")
        if not self.supported_head_dim(q.shape[-1]):
            raise UnsupportedCall(f"sage_attn2: head dim {q.shape[-1]} unsupported by {self._function}")
        out = self.direct_call()(q, k, v, default_scale(q, scale))
        return out[0] if isinstance(out, tuple) else out
