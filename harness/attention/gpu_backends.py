"""The GPU kernel backends: thu-ml SageAttention as ``sage_attn2`` (LightX2V's name; option ``package``
picks the build) and ROCm aiter's ``aiter_sage_attn`` and ``aiter_attn`` (BSHD ops, ``call_bshd``
transposes). Their packages are imported at construction, never at harness import."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
from collections.abc import Callable
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

PREFERRED_FUNCTION = "sageattn_qk_int8_pv_fp16_triton"  # the path LightX2V picks on gfx1201
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
        if why := self.option_problem(self.options):
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
        if getattr(module, choice, None) is None:
            raise BackendUnavailable(f"sage_attn2: sageattention ({package}) has no function {choice!r}")
        self._module, self._function = module, choice

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
        # looked up at each direct call, as before the merge: a wrapper put on the module is seen
        fn, kwargs = getattr(self._module, self._function), self.options["kwargs"]
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


SAGE_OP = "gfx1201_sage_attention"


def _import_aiter() -> Any:
    try:
        return importlib.import_module("aiter")
    except Exception as err:
        raise BackendUnavailable(f"importing aiter failed: {err}") from err


def _find_sage_op(aiter: Any) -> tuple[Callable[..., Any], str]:
    """The op as a package attribute, a module function, or a registered torch op (in that order)."""
    fn = getattr(aiter, SAGE_OP, None)
    if fn is not None:
        return fn, f"aiter.{SAGE_OP}"
    try:
        module = importlib.import_module("aiter.ops.gfx1201.sage_attention")
        return getattr(module, SAGE_OP), f"aiter.ops.gfx1201.sage_attention.{SAGE_OP}"
    except (ImportError, AttributeError):
        pass
    try:
        return getattr(torch.ops.aiter, SAGE_OP), f"torch.ops.aiter.{SAGE_OP}"
    except (AttributeError, RuntimeError):
        raise BackendUnavailable(f"aiter_sage_attn: this aiter build has no {SAGE_OP} op") from None


def _scale_parameter(fn: Callable[..., Any]) -> str | None:
    try:
        names = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    return next((name for name in ("softmax_scale", "sm_scale", "scale") if name in names), None)


def call_bshd(op: Callable[..., Any], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs: Any):
    """Layout adapter: ``op`` takes and returns [B, N, H, D]; the harness speaks [B, H, N, D]."""
    out = op(*[x.transpose(1, 2).contiguous() for x in (q, k, v)], **kwargs)
    return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)


class AiterBackend(AttentionBackend):
    """What the aiter backends share: cheap availability checks (no GPU work, aiter not imported)."""

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        if torch.version.hip is None:
            return False, "torch is not a ROCm build (torch.version.hip is None)"
        if not torch.cuda.is_available():
            return False, "no GPU visible to torch (torch.cuda.is_available() is False)"
        if importlib.util.find_spec("aiter") is None:
            return False, "the python package 'aiter' (amd-aiter) is not installed"
        return True, f"ROCm {torch.version.hip}, amd-aiter {package_version('amd-aiter')}"


@register_backend(
    "aiter_sage_attn",
    exact=False,
    description="aiter gfx1201 SageAttention op (INT8 QK, FP8 PV; ROCm gfx1201 only)",
)
class AiterSageAttn(AiterBackend):
    default_options = {"arch": "gfx1201"}

    def setup(self) -> None:
        arch = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]  # "gfx90a:xnack-": "gfx90a"
        if arch != self.options["arch"]:
            raise BackendUnavailable(
                f"aiter_sage_attn: GPU architecture {arch} is not {self.options['arch']}"
            )
        self._arch = arch
        self._fn, self._entry = _find_sage_op(_import_aiter())
        self._scale_arg = _scale_parameter(self._fn)

    @property
    def params(self) -> dict[str, Any]:
        return {
            **super().params,
            "op": self._entry,
            "gpu_arch": self._arch,
            "layout": "BSHD",
            "softmax_scale": "passed" if self._scale_arg else "fixed head_dim**-0.5",
            "aiter_version": package_version("amd-aiter"),
        }

    def direct_call(self):
        op, arg = self._fn, self._scale_arg
        return lambda q, k, v, s: call_bshd(op, q, k, v, **({arg: s} if arg else {}))

    def __call__(self, q, k, v, scale=None):
        check_gpu_call(self.name, q, k, v)
        if q.shape[-1] != 128:
            raise UnsupportedCall(f"aiter_sage_attn: head dim {q.shape[-1]} (only 128)")
        if q.shape != k.shape:
            raise UnsupportedCall("aiter_sage_attn: Nq != Nk (cross-attention) is unsupported")
        fixed = not self._scale_arg and scale is not None
        if fixed and not math.isclose(scale, q.shape[-1] ** -0.5, rel_tol=1e-6):
            raise UnsupportedCall(f"aiter_sage_attn: the op fixes softmax scale head_dim**-0.5, got {scale}")
        try:
            return self.direct_call()(q, k, v, default_scale(q, scale))
        except ValueError as err:  # the op's own input validation
            raise UnsupportedCall(f"aiter_sage_attn: {err}") from err


@register_backend(
    "aiter_attn",
    exact=True,
    description="aiter.flash_attn_func (exact flash attention, BSHD; ROCm)",
)
class AiterAttn(AiterBackend):
    def setup(self) -> None:
        aiter = _import_aiter()
        fn = getattr(aiter, "flash_attn_func", None)
        if fn is None:
            raise BackendUnavailable("aiter_attn: this aiter build has no flash_attn_func")
        self._fn = fn

    @property
    def params(self) -> dict[str, Any]:
        return {
            **super().params,
            "op": "aiter.flash_attn_func",
            "layout": "BSHD",
            "aiter_version": package_version("amd-aiter"),
        }

    def direct_call(self):
        return lambda q, k, v, s: call_bshd(self._fn, q, k, v, dropout_p=0.0, softmax_scale=s, causal=False)

    def __call__(self, q, k, v, scale=None):
        check_gpu_call(self.name, q, k, v)
        return self.direct_call()(q, k, v, default_scale(q, scale))
