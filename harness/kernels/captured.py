"""Captured q/k/v as kernel-benchmark shapes: each safetensors file a shadowed run kept
(``insitu/captures/``: ``q``, ``k``, ``v`` [B, H, N, D] and the call's scale, step, block and kind)
is a shape of its real sizes; only its header is read to plan, its tensors when it is measured."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from harness.errors import HarnessError
from harness.kernels.schema import DTYPE_ALIASES, CapturedInputs, KernelShape

SUFFIX = ".safetensors"


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


def _run_name(file: Path) -> str:
    """The run a capture came from (<run>/insitu/captures/<file>), else ''."""
    parts = file.resolve().parts
    return parts[-4] if len(parts) >= 4 and parts[-3:-1] == ("insitu", "captures") else ""


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
        run = _run_name(file)
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
