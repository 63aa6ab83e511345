"""Pure-PyTorch emulation of SageAttention numerics (CPU and GPU), step by step as the kernels:
1. smooth K (``k - mean_seq(k)`` in the input dtype, as thu-ml's core.py; softmax ignores it);
2. INT8 Q and K, one scale per token group (:func:`q_group_ids`), ``sm_scale * log2(e)`` folded into Q;
3. ``S = (Qi @ Ki^T) * q_scale * k_scale`` as an fp32 matmul, exact while ``127^2 * D < 2^24``;
4. online softmax in fp32 over ``kv_tile`` key tiles, ``P = exp2(S - m_j + offset)``;
5. P to FP8 e4m3 (``offset = log2 448`` as thu-ml's S_FP8_OFFSET, 0 for aiter's fav3_sage) or fp16;
6. V to FP8 per channel or fp16, ``Pq_j @ Vq_j`` summed in fp32 (or each rounded to fp16 first:
   ``pv_accum="fp16_tile"``, SageAttention 1's ``tl.dot(p, v, out_dtype=tl.float16)``).
Each variant (``VARIANTS``) names the kernel it models (``VARIANT_TEXT``) and whether its numerics were
measured against it (``VARIANT_PROVENANCE``); changing a numeric setting (``NUMERIC_KEYS``) voids the
measured figures. ``padded_keys="unmasked"`` reproduces SageAttention 1.0.6's Triton kernel scoring the
last block's out-of-range keys 0 with V = 0 (measured on an H200: rel L1 0.307 at 74 keys, 0.012 at
128); the other variants mask them.
The tile recurrence is evaluated in closed form (``sum_j exp2(m_j - m_T) * (Pq_j @ Vq_j)``, one matmul
per query chunk); the hardware's reduced-precision inner accumulation is modelled at most as one
rounding per tile, so the emulation is slightly optimistic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from harness.attention.exact import full_fp32_matmul
from harness.attention.registry import (
    AttentionBackend,
    UnsupportedCall,
    check_qkv,
    default_scale,
    register_backend,
)
from harness.emulator_provenance import Fidelity, KernelRef, Provenance
from harness.errors import HarnessError
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

LOG2E = 1.4426950408889634
GRANULARITIES = ("per_block", "per_warp", "per_thread")
# The options that take one of a few values, in the order they are checked.
CHOICES = {
    "pv_accum": ("fp32", "fp16_tile"),
    "granularity": GRANULARITIES,
    "padded_keys": PADDED_KEYS,
    "pv_dtype": ("fp8", "fp16"),
}
# 127^2 * D must stay below 2^24 for the fp32 matmul of int8 values to be exact.
MAX_EXACT_HEAD_DIM = 1040
# The options that drive quantization (``sage_quantize``) and the attention loop (``sage_attend``).
QUANT_KEYS = ("granularity", "blkq", "warpq", "blkk", "smooth_k", "pv_dtype", "v_scale_max", "scale_eps")
ATTEND_KEYS = ("kv_tile", "p_log2_offset", "pv_dtype", "pv_accum", "chunk_elems", "padded_keys")


def q_group_ids(
    n: int, granularity: str, *, blkq: int = 128, warpq: int = 32, device: torch.device | str | None = None
) -> torch.Tensor:
    """Quantization group of each query token; per_thread: rows of a ``warpq`` tile with equal ``i % 8``
    share a scale (the mma fragment layout)."""
    i = torch.arange(n, device=device)
    if granularity == "per_block":
        return i // blkq
    if granularity == "per_warp":
        return i // warpq
    if granularity == "per_thread":
        return (i // warpq) * 8 + i % 8
    raise HarnessError(f"granularity {granularity!r}; expected one of {', '.join(GRANULARITIES)}")


def k_group_ids(
    n: int, granularity: str, *, blkk: int = 64, device: torch.device | str | None = None
) -> torch.Tensor:
    """Quantization group of each key token; per_thread: rows ``{2t, 2t+1} mod 8`` of a ``blkk`` tile."""
    j = torch.arange(n, device=device)
    if granularity in ("per_block", "per_warp"):
        return j // blkk
    if granularity == "per_thread":
        return (j // blkk) * 4 + (j % 8) // 2
    raise HarnessError(f"granularity {granularity!r}; expected one of {', '.join(GRANULARITIES)}")


def quantize_int8(
    x: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-7
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """INT8 with one scale (``amax/127 + eps``) per (batch, head, group) along dim -2, rounded half away
    from zero: (integer-valued fp32 values, each token's scale [B, H, N], each group's [B, H, G])."""
    x = x.float()
    b, h, n, _ = x.shape
    token_amax = x.abs().amax(dim=-1)
    n_groups = int(group_ids.max()) + 1 if n else 0
    group_amax = token_amax.new_zeros(b, h, n_groups)
    group_amax.scatter_reduce_(-1, group_ids.view(1, 1, n).expand(b, h, n), token_amax, reduce="amax")
    group_scale = group_amax / 127.0 + eps
    token_scale = group_scale.index_select(-1, group_ids)
    y = x / token_scale.unsqueeze(-1)
    half = torch.where(y >= 0, 0.5, -0.5)
    xi = y.add_(half).trunc_().clamp_(-127.0, 127.0)
    return xi, token_scale, group_scale


def round_mantissa_nonneg_(x: torch.Tensor, mantissa_bits: int, min_normal_exp: int) -> torch.Tensor:
    """Round non-negative fp32 in place to ``mantissa_bits`` bits, nearest-even, subnormal below
    ``2**min_normal_exp``: adding and subtracting ``2**(e + 23 - mantissa_bits)`` lets the fp32 adder
    round, faster than an fp8 upcast on a CPU (equal to it for e4m3 on [0, 448], tested)."""
    bits = x.view(torch.int32)
    c = torch.bitwise_and(bits, 0x7F800000)
    c.clamp_(min=(127 + min_normal_exp) << 23).add_((23 - mantissa_bits) << 23)
    cf = c.view(torch.float32)
    return x.add_(cf).sub_(cf)


def _round_p_(p: torch.Tensor, pv_dtype: str) -> torch.Tensor:
    if p.is_cuda:  # the real casts are fast on a GPU
        target = torch.float8_e4m3fn if pv_dtype == "fp8" else torch.float16
        return p.copy_(p.to(target))
    if pv_dtype == "fp8":
        return round_mantissa_nonneg_(p, 3, -6)
    return round_mantissa_nonneg_(p, 10, -14)


@dataclass
class SageQuantized:
    """Quantized operands: integer-valued fp32 Q/K with per-token scales, rounded V with per-channel scales."""

    qi: torch.Tensor  # [B, H, Nq, D], sm_scale*log2e folded in
    qs: torch.Tensor  # [B, H, Nq]
    ki: torch.Tensor  # [B, H, Nk, D], smoothed
    ks: torch.Tensor  # [B, H, Nk]
    vq: torch.Tensor  # [B, H, Nk, D] values of the fp8 / fp16 grid, as fp32
    vs: torch.Tensor  # [B, H, D] per-channel V scale (ones for fp16)
    out_dtype: torch.dtype


def sage_quantize(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float | None = None,
    *,
    granularity: str = "per_warp",
    blkq: int = 128,
    warpq: int = 32,
    blkk: int = 64,
    smooth_k: bool = True,
    pv_dtype: str = "fp8",
    v_scale_max: float = FP8_MAX,
    scale_eps: float = 1e-7,
) -> SageQuantized:
    """Steps 1, 2 and 6 of the module docstring (everything done before the attention kernel)."""
    sm = default_scale(q, scale)
    n_q, n_k = q.shape[2], k.shape[2]
    qi, qs, _ = quantize_int8(
        q.float() * (sm * LOG2E),
        q_group_ids(n_q, granularity, blkq=blkq, warpq=warpq, device=q.device),
        scale_eps,
    )
    kf = k.float()
    if smooth_k:
        kf = kf - k.mean(dim=-2, keepdim=True).float()
    ki, ks, _ = quantize_int8(kf, k_group_ids(n_k, granularity, blkk=blkk, device=k.device), scale_eps)
    if pv_dtype == "fp8":
        vf = v.float()
        vs = (vf.abs().amax(dim=-2) / v_scale_max).clamp_(min=torch.finfo(torch.float32).tiny)
        vq = (vf / vs.unsqueeze(-2)).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).float()
    else:
        vq = v.to(torch.float16).float()
        vs = torch.ones(v.shape[0], v.shape[1], v.shape[3], device=v.device)
    return SageQuantized(qi=qi, qs=qs, ki=ki, ks=ks, vq=vq, vs=vs, out_dtype=q.dtype)


def sage_attend(
    z: SageQuantized,
    *,
    kv_tile: int = 64,
    p_log2_offset: float = 8.807,
    pv_dtype: str = "fp8",
    pv_accum: str = "fp32",
    chunk_elems: int = 0,
    padded_keys: str = "masked",
) -> torch.Tensor:
    """Steps 3-6 on quantized operands, tiled over queries; padded keys masked or scored 0 with V = 0."""
    b, h, n_q, d = z.qi.shape
    n_k = z.ki.shape[2]
    n_tiles = -(-n_k // kv_tile)
    n_kp = n_tiles * kv_tile
    pad = n_kp - n_k
    ki, ks, vq = z.ki, z.ks, z.vq
    if pad:
        ki = torch.nn.functional.pad(ki, (0, 0, 0, pad))
        ks = torch.nn.functional.pad(ks, (0, pad), value=1.0)
        vq = torch.nn.functional.pad(vq, (0, 0, 0, pad))
    kt = ki.transpose(-1, -2)
    ks_row = ks.unsqueeze(-2)  # [B, H, 1, Nkp]
    tile_accum = pv_accum == "fp16_tile"
    vq_tiles = vq.view(b, h, n_tiles, kv_tile, d) if tile_accum else None
    # Auto: on a CPU few large ops (each is an OpenMP region; many small ones stall on a busy
    # machine), on a GPU enough to saturate it while the scores stay bounded (512 MiB of fp32).
    elems = chunk_elems or ((1 << 27) if z.qi.device.type == "cuda" else (1 << 22))
    # fp16 tiles keep one product per tile and query ([rows, T, D] beside the [rows, Nkp] scores)
    per_row = b * h * n_kp * ((1 + d / kv_tile) if tile_accum else 1)
    rows = max(1, int(elems // max(1, per_row)))
    out = torch.empty(b, h, n_q, d, dtype=z.out_dtype, device=z.qi.device)
    with full_fp32_matmul():
        for r0 in range(0, n_q, rows):
            r1 = min(n_q, r0 + rows)
            s = torch.matmul(z.qi[:, :, r0:r1], kt)
            # Two in-place scalings instead of the kernels' (q_scale*k_scale) product: one
            # rounding more or less at fp32 level, no temporary the size of the scores.
            s.mul_(ks_row).mul_(z.qs[:, :, r0:r1].unsqueeze(-1))
            if pad and padded_keys == "masked":
                s[..., n_k:] = -math.inf
            st = s.view(b, h, r1 - r0, n_tiles, kv_tile)
            m = torch.cummax(st.amax(dim=-1), dim=-1).values  # running max after each tile
            st.sub_((m - float(p_log2_offset)).unsqueeze(-1)).exp2_()
            rescale = torch.exp2(m - m[..., -1:])  # exp2(m_j - m_T): later tiles' alpha product
            row_sum = (st.sum(dim=-1) * rescale).sum(dim=-1, keepdim=True)
            _round_p_(st, pv_dtype)
            if tile_accum:
                # [B, H, T, rows, kv_tile] @ [B, H, T, kv_tile, D]: one fp16 product per tile
                tiles = torch.matmul(st.transpose(2, 3), vq_tiles).to(torch.float16).float()
                acc = (tiles * rescale.transpose(2, 3).unsqueeze(-1)).sum(dim=2)
            else:
                st.mul_(rescale.unsqueeze(-1))
                acc = torch.matmul(s, vq)
            out[:, :, r0:r1] = (acc.div_(row_sum).mul_(z.vs.unsqueeze(-2))).to(z.out_dtype)
    return out


class SageEmulation(AttentionBackend):
    """Common implementation; the registered subclasses differ in their defaults."""

    emulated = True  # timings are of the emulator, not of a kernel

    def __init__(self, **options: Any):
        variant = options.get("variant", self.default_options["variant"])
        if variant not in VARIANTS:
            raise HarnessError(
                f"{self.name}: option variant={variant!r}; expected one of {', '.join(VARIANTS)}"
            )
        super().__init__(**{**VARIANTS[variant], **options, "variant": variant})

    @classmethod
    def option_problem(cls, options: dict[str, Any]) -> str | None:
        try:
            cls(**options)  # its setup only checks values: no import, no device
        except HarnessError as err:
            return str(err)
        return None

    def setup(self) -> None:
        o = self.options
        for key, choices in CHOICES.items():
            if o[key] not in choices:
                expected = " or ".join(choices) if len(choices) == 2 else f"one of {', '.join(choices)}"
                raise HarnessError(f"{self.name}: option {key}={o[key]!r}; expected {expected}")
        for key in ("blkq", "warpq", "blkk", "kv_tile"):
            if not isinstance(o[key], int) or o[key] <= 0 or o[key] % 8:
                raise HarnessError(f"{self.name}: option {key}={o[key]!r} must be a positive multiple of 8")
        if o["blkq"] % o["warpq"]:
            raise HarnessError(
                f"{self.name}: option blkq={o['blkq']} must be a multiple of warpq={o['warpq']}"
            )
        if not 0 <= float(o["p_log2_offset"]) <= math.log2(FP8_MAX):
            raise HarnessError(f"{self.name}: option p_log2_offset must lie in [0, log2(448)]")
        if o["pv_dtype"] == "fp16" and o["p_log2_offset"]:
            raise HarnessError(f"{self.name}: pv_dtype=fp16 keeps P in [0, 1]; set p_log2_offset=0")

    @property
    def provenance(self) -> Provenance:
        """The variant's provenance; options set away from its settings void the measured figures."""
        variant = self.options["variant"]
        base = {**COMMON_DEFAULTS, **VARIANTS[variant]}
        changed = [k for k in NUMERIC_KEYS if self.options[k] != base[k]]
        return VARIANT_PROVENANCE[variant].with_changes(changed)

    @property
    def params(self) -> dict[str, Any]:
        provenance = self.provenance
        return {
            **super().params,
            "emulates": VARIANT_TEXT[self.options["variant"]],
            "provenance": provenance.model_dump(mode="json", by_alias=True),
            "fidelity": provenance.fidelity.text() if not provenance.changed else provenance.badge(),
            "qk_dtype": "int8 (exact fp32 matmul of integer values)",
            "log2e": LOG2E,
            "p_scale": 2.0 ** float(self.options["p_log2_offset"]),
            "accumulation": "fp32",
            "padded_keys": "scored 0 with V = 0 (SageAttention 1.0.6's Triton defect)"
            if self.options["padded_keys"] == "unmasked"
            else "masked",
        }

    def quantize(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
    ) -> SageQuantized:  # timed alone by `harness kernels` (quant_ms)
        return sage_quantize(q, k, v, scale, **{key: self.options[key] for key in QUANT_KEYS})

    def direct_call(self):
        options = self.options
        return lambda q, k, v, s: sage_attention_emulated(q, k, v, s, **options)

    def __call__(self, q, k, v, scale=None):
        check_qkv(self.name, q, k, v)
        if q.shape[-1] > MAX_EXACT_HEAD_DIM:
            raise UnsupportedCall(
                f"{self.name}: head dim {q.shape[-1]} > {MAX_EXACT_HEAD_DIM} breaks exact INT8 emulation"
            )
        return sage_attention_emulated(q, k, v, scale, **self.options)


@register_backend(
    "sage_emul_thuml",
    exact=False,
    description="PyTorch emulation of thu-ml SageAttention: by default 1.0.6's Triton sageattn (INT8 QK, "
    "FP16 PV, padded keys scored); variant sageattn2_triton models SageAttention2's Triton path (padded keys "
    "masked), sageattn2_fp8 its FP8-PV CUDA path (not measured)",
)
class SageEmulThuml(SageEmulation):
    models = "sage_attn2"
    default_options = {**COMMON_DEFAULTS, **VARIANTS["sageattn1_triton"], "variant": "sageattn1_triton"}


@register_backend(
    "sage_emul_aiter",
    exact=False,
    description="PyTorch emulation of aiter fav3_sage (INT8 QK per_block, FP8 PV with P unscaled)",
)
class SageEmulAiter(SageEmulation):
    models = "aiter_sage_attn"
    default_options = {**COMMON_DEFAULTS, **VARIANTS["aiter_fav3_sage"], "variant": "aiter_fav3_sage"}


def sage_attention_emulated(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float | None = None,
    *,
    variant: str = "sageattn1_triton",
    **options: Any,
) -> torch.Tensor:
    """Direct functional call of the emulation (no registry), e.g. for bitwise checks."""
    if variant not in VARIANTS:
        raise HarnessError(f"sage emulation: variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    o = {**COMMON_DEFAULTS, **VARIANTS[variant], **options}
    z = sage_quantize(q, k, v, scale, **{key: o[key] for key in QUANT_KEYS})
    return sage_attend(z, **{key: o[key] for key in ATTEND_KEYS})
