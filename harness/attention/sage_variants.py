"""The variants of the SageAttention emulation: each one's settings (``VARIANTS``), the kernel it models
(``VARIANT_TEXT``) and its provenance (``VARIANT_PROVENANCE``): whether its numerics were measured against
that kernel; changing a numeric setting (``NUMERIC_KEYS``) voids the measured figures. ``sageattn2_fp8``
is a call no GPU's default dispatch makes.
"""

from __future__ import annotations

from typing import Any

from harness.emulator_provenance import Fidelity, KernelRef, Provenance
from harness.sage_packages import PACKAGES

FP8_MAX = 448.0
PADDED_KEYS = ("masked", "unmasked")

COMMON_DEFAULTS: dict[str, Any] = {
    "blkq": 128,
    "warpq": 32,
    "blkk": 64,
    "kv_tile": 64,
    "smooth_k": True,
    "v_scale_max": FP8_MAX,
    "scale_eps": 1e-7,
    "chunk_elems": 0,
}

# Each variant's settings; a backend's options start from its variant and may override any one.
_TRITON_FP16 = {"granularity": "per_block", "pv_dtype": "fp16", "p_log2_offset": 0.0, "pv_accum": "fp16_tile"}
# Padded keys, measured on an H200: SageAttention 1.0.6 scores them, SageAttention2 at d1a57a5 masks them.
VARIANTS: dict[str, dict[str, Any]] = {
    "sageattn1_triton": {**_TRITON_FP16, "padded_keys": "unmasked"},
    "sageattn2_triton": {**_TRITON_FP16, "padded_keys": "masked"},
    "sageattn2_fp8": {
        "granularity": "per_warp",
        "pv_dtype": "fp8",
        "p_log2_offset": 8.807,
        "pv_accum": "fp32",
        "padded_keys": "masked",  # the CUDA kernels' handling of a partial last tile: not measured
    },
    "aiter_fav3_sage": {
        "granularity": "per_block",
        "pv_dtype": "fp8",
        "p_log2_offset": 0.0,
        "pv_accum": "fp32",
        "padded_keys": "masked",  # gfx1201's op on a partial last tile: unknown, not measured
    },
}
VARIANT_TEXT = {
    "sageattn1_triton": "thu-ml SageAttention 1.0.6 sageattn, Triton (INT8 QK per block 128/64, K smoothed; P "
    "and V in fp16, P@V accumulated in fp16 per 64-key tile; the last 64-key block's padded keys scored)",
    "sageattn2_triton": "thu-ml SageAttention2 sageattn_qk_int8_pv_fp16_triton at d1a57a5 (INT8 QK per block "
    "128/64, K smoothed; P and V in fp16, P@V accumulated in fp16 per 64-key tile; padded keys masked)",
    "sageattn2_fp8": "thu-ml SageAttention2 sageattn_qk_int8_pv_fp8_cuda with qk_quant_gran=per_warp, "
    "pv_accum_dtype=fp32 (P x448 before e4m3, V per channel in e4m3; no GPU's default dispatch)",
    "aiter_fav3_sage": "aiter fav3_sage (per_block Q/K, P in [0,1] cast to e4m3 without offset)",
}

# Where the measured variants' figures are: ``harness kernels`` beside the kernel on an H200.
H200_EVIDENCE = "reports/examples/h200/kernels_lengths_sageattention2/kernels/kernels.json"
H200_SHAPES = "bf16 N(0,1) q/k/v, 56 heads x 128, 63 to 1,025 keys (1 to 63 padded in the last 64-key block)"


def _measured_on_h200(rel_l1_range: str) -> Fidelity:
    """The 2026-12-03 sweep (H200_EVIDENCE): both thu-ml variants agreed with their kernels on every shape."""
    return Fidelity(
        measured=True,
        machine="one NVIDIA H200",
        machine_short="H200",
        software="torch 2.11, triton 3.6",
        date="2026-12-03",
        shapes=H200_SHAPES,
        agreement=f"agrees on 10 of 10 shapes: rel L1 within 1.5 % of the kernel's ({rel_l1_range}), "
        "fitted scale within 0.001",
        evidence=H200_EVIDENCE,
    )


def _pinned_version(choice: str) -> str:
    """'1.0.6', or '2.2.0 at d1a57a5' where the pinned source is a commit and not a release."""
    pkg = PACKAGES[choice]
    return f"{pkg.version} at {pkg.commit[:7]}" if pkg.commit else pkg.version


def _pinned(choice: str, package: str, short: str) -> KernelRef:
    """The kernel of a pinned SageAttention, as ``sage_attn2`` runs it with option ``package: choice``."""
    return KernelRef(
        package=package, function=PACKAGES[choice].function, version=_pinned_version(choice), short=short,
        backend="sage_attn2", package_choice=choice,
    )  # fmt: skip


_KERNELS: dict[str, tuple[KernelRef, Fidelity]] = {  # each variant's kernel and fidelity
    "sageattn1_triton": (
        _pinned("sageattention1", "thu-ml SageAttention", "SageAttention 1.0.6 sageattn"),
        _measured_on_h200("0.0118 to 0.371"),
    ),
    "sageattn2_triton": (
        _pinned("sageattention2", "thu-ml SageAttention2", "SageAttention2 d1a57a5 Triton"),
        _measured_on_h200("0.0116 to 0.0130"),
    ),
    "sageattn2_fp8": (
        KernelRef(
            package="thu-ml SageAttention2",
            function="sageattn_qk_int8_pv_fp8_cuda",
            version=_pinned_version("sageattention2"),  # the CUDA path of the same source
            short="SageAttention2 d1a57a5 FP8 PV (CUDA)",
        ),
        Fidelity(
            measured=False,
            unmeasured="read from core.py at d1a57a5; its CUDA kernels are not in the pinned source and "
            "were never run beside it, so their FP22 accumulation and partial last tile are unknown",
        ),
    ),
    "aiter_fav3_sage": (
        KernelRef(
            package="ROCm aiter",
            function="fav3_sage_wrapper_func",
            version="e404860",
            short="aiter fav3_sage",
        ),
        Fidelity(
            measured=False,
            unmeasured="read from aiter's Triton source; never run beside it (no gfx942/gfx950 here), and "
            "the pull request's gfx1201 op is another kernel that is not public",
        ),
    ),
}
VARIANT_PROVENANCE = {
    name: Provenance(variant=name, kernel=k, fidelity=f) for name, (k, f) in _KERNELS.items()
}
# The settings that make a variant what its provenance says (the rest change speed, not numerics).
NUMERIC_KEYS = (
    "granularity", "blkq", "warpq", "blkk", "kv_tile", "smooth_k", "p_log2_offset", "pv_dtype", "pv_accum",
    "v_scale_max", "scale_eps", "padded_keys",
)  # fmt: skip
