"""Helpers for the kernel benchmark tests: a small block on the CPU, the scenario folder."""

from __future__ import annotations

from pathlib import Path

import torch

from harness.kernels.schema import KernelsBlock

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
GPU_PRESENT = torch.cuda.is_available()


def make_block(**overrides) -> KernelsBlock:
    data = {
        "shapes": [{"name": "tiny", "heads": 2, "seq_q": 64, "seq_k": 80, "head_dim": 32, "dtype": "bf16"}],
        "backends": ["torch_sdpa", "sage_emul_aiter"],
        "warmup": 0,
        "repeats": 1,
        "emulation_repeats": 1,
        "peak_size": 64,
        "device": "cpu",
    }
    data.update(overrides)
    return KernelsBlock.model_validate(data)
