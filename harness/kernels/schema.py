"""Schema of the ``kernels:`` block of a scenario of kind ``kernels`` (no torch import here; an
example: scenarios/kernels_smoke.yaml), the part that kind adds to the scenario core (``SCENARIO_PART``,
registered in ``harness.registry``), and captured q/k/v as shapes: each safetensors file a shadowed run
kept (``insitu/captures/``: ``q``, ``k``, ``v`` [B, H, N, D] and the call's scale, step, block and kind)
is a shape of its real sizes; only its header is read to plan, its tensors when it is measured."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from harness.errors import HarnessError
from harness.registry import did_you_mean
from harness.scenario.model import Strict
from harness.scenario.parts import FieldProblem, ScenarioPart

if TYPE_CHECKING:
    import torch

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\[\]-]*$"
DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32"} | {
    name: name for name in ("bfloat16", "float16", "float32")
}
GPU_MIN_REPEATS = 20
SUFFIX = ".safetensors"


def _repeated(names: list[str]) -> str:
    return ", ".join(sorted({n for n in names if names.count(n) > 1}))


def attention_flops(b: int, h: int, n_q: int, n_k: int, d: int) -> float:
    """4*B*H*Nq*Nk*D: the QK^T and PV matmuls, non-causal (both SageAttention and aiter count this)."""
    return 4.0 * b * h * n_q * n_k * d


class KernelShape(Strict):
    """One attention problem: q [batch, heads, seq_q, head_dim], k/v [batch, heads, seq_k, head_dim]."""

    name: str = Field(pattern=_NAME)
    batch: int = Field(1, ge=1)
    heads: int = Field(ge=1)
    seq_q: int = Field(ge=1)
    seq_k: int | None = Field(None, ge=1, description="Default: seq_q (self-attention).")
    head_dim: int = Field(ge=1)
    dtype: str = Field("bfloat16", description="bf16 | fp16 | fp32")
    # Input distribution: q = q_scale*N(0,1); k, v = N(0,1) + bias*N(0,1) per channel (outliers).
    q_scale: float = Field(1.0, gt=0)
    k_bias: float = Field(0.0, ge=0)
    v_bias: float = Field(0.0, ge=0)
    backends: list[str] | None = Field(None, description="Labels to run on this shape (default: all).")
    note: str | None = Field(None, description="Where the shape comes from.")

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, v: str) -> str:
        if v not in DTYPE_ALIASES:
            raise ValueError(f"dtype {v!r}; expected one of bf16, fp16, fp32")
        return DTYPE_ALIASES[v]

    @model_validator(mode="after")
    def _seq_k(self) -> KernelShape:
        if self.seq_k is None:
            self.seq_k = self.seq_q
        return self

    @property
    def flops(self) -> float:
        return attention_flops(self.batch, self.heads, self.seq_q, self.seq_k or self.seq_q, self.head_dim)


class BackendEntry(Strict):
    """A backend of the registry, optionally with options and a label that names its rows."""

    backend: str
    label: str | None = Field(None, pattern=_NAME)
    options: dict[str, Any] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.label or self.backend


class CapturedInputs(Strict):
    """Real q/k/v kept by a shadowed run (``insitu.capture`` of an arm): each captured call is
    measured as a shape of its own, beside the synthetic ones (its activations' outliers are
    what INT8 and FP8 quantisation errors depend on)."""

    path: str = Field(
        description="A captured .safetensors file, or a folder searched for them (a run's insitu/captures, a "
        "run, a campaign); relative to the working directory (${SCENARIO_DIR} is the scenario's folder)."
    )
    label: str | None = Field(
        None, pattern=_NAME, description="Prefix of the shapes' names (default: captured)."
    )
    backends: list[str] | None = Field(None, description="Labels to run on these inputs (default: all).")
    max_files: int = Field(16, ge=1, description="At most this many captured calls from the folder (sorted).")


class KernelsBlock(Strict):
    shapes: list[KernelShape] = Field(min_length=1)
    captured: list[CapturedInputs] = Field(
        default_factory=list, description="Captured q/k/v of real runs, measured beside the shapes."
    )
    backends: list[BackendEntry] = Field(min_length=1)
    reference: Literal["auto", "fp64", "fp32"] = Field(
        "auto", description="auto: fp64 when B*H*Nq*Nk <= 2^28, else fp32 (chunked over queries)."
    )
    noise_floor: bool = Field(True, description="Add torch_sdpa with K/V reversed as the noise-floor row.")
    bitwise: bool = Field(
        True, description="Registry call vs direct op call, and LightX2V-style packed calls."
    )
    warmup: int = Field(3, ge=0)
    repeats: int = Field(GPU_MIN_REPEATS, ge=1, description="Timed calls; at least 20 on a GPU.")
    emulation_repeats: int = Field(3, ge=1, description="Timed calls of emulated (non-kernel) backends.")
    flush_l2: bool = Field(True, description="Write a flush buffer between timed GPU calls.")
    flush_mb: int = Field(256, ge=1)
    do_bench: bool = Field(True, description="Also time with triton.testing.do_bench when triton imports.")
    timing: bool = Field(True, description="Measure speed at all (accuracy only when false).")
    peak: bool = Field(True, description="Measure the matmul peak of each dtype in the same run.")
    peak_size: int | None = Field(None, ge=64, description="Square matmul size (auto: 8192 GPU, 512 CPU).")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    seed: int = 0

    @field_validator("backends", mode="before")
    @classmethod
    def _entries(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"backend": x} if isinstance(x, str) else x for x in v]
        return v

    @model_validator(mode="after")
    def _consistent(self) -> KernelsBlock:
        keys = [b.key for b in self.backends]
        if dups := _repeated(keys):
            raise ValueError(f"backend labels must be unique (give `label:`); repeated: {dups}")
        if dups := _repeated([s.name for s in self.shapes]):
            raise ValueError(f"shape names must be unique; repeated: {dups}")
        for s in (*self.shapes, *self.captured):
            if unknown := sorted(set(s.backends or []) - set(keys)):
                what = f"shape {s.name}" if isinstance(s, KernelShape) else f"captured {s.path}"
                raise ValueError(f"{what}: backends {', '.join(unknown)} are not in the backends list")
        if self.device == "cuda" and self.repeats < GPU_MIN_REPEATS:
            raise ValueError(f"repeats must be >= {GPU_MIN_REPEATS} on a GPU (got {self.repeats})")
        return self

    def entries_for(self, shape: KernelShape) -> list[BackendEntry]:
        if shape.backends is None:
            return list(self.backends)
        return [b for b in self.backends if b.key in shape.backends]


def check_backends(scenario: Any) -> None:
    """Every backend the block names is one of the harness registry, with options it accepts."""
    from harness.attention.registry import BACKENDS, check_options

    known = BACKENDS.names()
    for i, entry in enumerate(scenario.kernels.backends):
        if entry.backend not in known:
            raise FieldProblem(
                ("kernels", "backends", i),
                f"unknown attention backend {entry.backend!r}{did_you_mean(entry.backend, known)} "
                f"(the harness registry has: {', '.join(known)})",
            )
        if why := check_options(entry.backend, entry.options):
            raise FieldProblem(("kernels", "backends", i, "options"), why)


SCENARIO_PART = ScenarioPart(block="kernels", model=KernelsBlock, required=True, check=check_backends)


@dataclass
class CapturedShape:
    shape: KernelShape
    file: Path
    scale: float


def _files(entry: CapturedInputs) -> list[Path]:
    path = Path(entry.path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise HarnessError(f"kernels.captured: {path}: no such file or folder")
    found = sorted(p for p in path.rglob(f"*{SUFFIX}") if not p.name.startswith("."))
    if not found:
        raise HarnessError(f"kernels.captured: {path}: no captured q/k/v (*{SUFFIX}) inside")
    return found[: entry.max_files]


def captured_shapes(entry: CapturedInputs) -> list[CapturedShape]:
    """The shapes of one ``captured:`` entry (a one-line HarnessError for a missing or foreign file)."""
    from safetensors import SafetensorError, safe_open

    out = []
    for file in _files(entry):
        try:
            with safe_open(str(file), framework="pt") as f:
                keys, meta = set(f.keys()), f.metadata() or {}
                if not {"q", "k", "v"} <= keys:
                    raise HarnessError(
                        f"kernels.captured: {file}: not a captured call (needs tensors q, k, v)"
                    )
                q, k = f.get_slice("q"), f.get_slice("k")
                q_shape, k_shape, dtype = q.get_shape(), k.get_shape(), q.get_dtype()
        except (SafetensorError, OSError) as err:
            raise HarnessError(f"kernels.captured: {file}: unreadable ({err})") from None
        name_dtype = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}.get(dtype)
        if name_dtype is None or len(q_shape) != 4 or len(k_shape) != 4:
            raise HarnessError(
                f"kernels.captured: {file}: q {q_shape} {dtype}: expected [B, H, N, D] bf16/fp16/fp32"
            )
        parts = file.resolve().parts  # the run it came from: <run>/insitu/captures/<file>
        run = parts[-4] if len(parts) >= 4 and parts[-3:-1] == ("insitu", "captures") else ""
        where = ", ".join(f"{k} {meta[k]}" for k in ("step", "block", "kind") if k in meta)
        shape = KernelShape(
            name=".".join(x for x in (entry.label or "captured", run, file.stem) if x),
            batch=q_shape[0],
            heads=q_shape[1],
            seq_q=q_shape[2],
            seq_k=k_shape[2],
            head_dim=q_shape[3],
            dtype=DTYPE_ALIASES[name_dtype],
            backends=entry.backends,
            note=f"captured q/k/v of a real run ({where or 'no site recorded'}): {file}",
        )
        scale = float(meta["scale"]) if "scale" in meta else q_shape[3] ** -0.5
        out.append(CapturedShape(shape, file, scale))
    return out


def load_captured(
    captured: CapturedShape, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    from safetensors.torch import load_file

    tensors = load_file(str(captured.file), device="cpu")
    return tuple(tensors[n].to(device).contiguous() for n in "qkv")  # type: ignore[return-value]
