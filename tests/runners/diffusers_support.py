"""Shared by the diffusers runner's tests: synthetic pipelines written once per session, and the
parameters of a small in-process generation (imported by the tests)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

needs_diffusers = pytest.mark.skipif(
    importlib.util.find_spec("diffusers") is None or importlib.util.find_spec("transformers") is None,
    reason="diffusers and transformers are not installed (the `diffusers` extra)",
)

_WRITTEN: dict[tuple[str, str, int], Path] = {}


def synthetic(
    tmp_path_factory: pytest.TempPathFactory, model: str, preset: str = "tiny", seed: int = 0
) -> Path:
    """A synthetic pipeline folder, written in this process on first use and shared by the session."""
    key = (model, preset, seed)
    if key not in _WRITTEN:
        from harness.runners.diffusers.checkpoint import write_pipeline

        out = tmp_path_factory.mktemp("diffusers_models") / f"{model}_{preset}_{seed}"
        write_pipeline(out, model, preset, seed)
        _WRITTEN[key] = out
    return _WRITTEN[key]


def call_params(pipeline: str, **over: Any) -> dict[str, Any]:
    """The spec's ``pipeline`` parameters of a small, fast generation (32x32, 9 frames, 2 steps)."""
    params: dict[str, Any] = {
        "name": pipeline, "prompt": "a robot dances in the street", "negative_prompt": "", "image_path": None,
        "height": 32, "width": 32, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 1.0,
        "frame_rate": 24.0, "max_sequence_length": 16, "call_kwargs": {}, "crf": 18, "x264_preset": "ultrafast",
    }  # fmt: skip
    if pipeline.startswith("ltx2"):
        params["call_kwargs"] = {"stg_scale": 0.0, "modality_scale": 1.0, "audio_stg_scale": 0.0,
                                 "audio_modality_scale": 1.0}  # fmt: skip
    params.update(over)
    return params


def write_image(path: Path, size: int = 48) -> Path:
    """A deterministic RGB test image (the conditioning image of image-to-video pipelines)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(7)
    Image.fromarray((rng.random((size, size, 3)) * 255).astype("uint8")).save(path)
    return path
