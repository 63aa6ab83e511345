"""Synthetic diffusers pipelines: deterministic from the seed, written only into an empty folder, loaded by
the pipelines' own from_pretrained, and every pipeline class of the runner generates from them."""

from __future__ import annotations

import pytest
from cli_testutil import harness, the_error_line
from diffusers_support import (
    call_params,
    needs_diffusers,
    synthetic,
    write_image,
)

pytestmark = needs_diffusers

torch = pytest.importorskip("torch")


def test_same_seed_same_files_other_seed_other_weights(tmp_path_factory, tmp_path):
    from harness.runners.diffusers.checkpoint import read_marker, write_pipeline

    first = read_marker(synthetic(tmp_path_factory, "wan2.1_t2v"))
    again = write_pipeline(tmp_path / "again", "wan2.1_t2v", "tiny", 0)
    other = write_pipeline(tmp_path / "other", "wan2.1_t2v", "tiny", 1)
    assert first["files"] == again["files"]
    weights = "transformer/diffusion_pytorch_model.safetensors"
    assert other["files"][weights] != first["files"][weights]
    assert other["files"]["tokenizer/tokenizer.json"] == first["files"]["tokenizer/tokenizer.json"]


def test_the_writer_never_overwrites(tmp_path):
    from harness.runners.diffusers.checkpoint import write_pipeline

    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an empty folder"):
        write_pipeline(tmp_path / "full", "ltx2")
    res = harness("diffusers", "tiny-checkpoint", tmp_path / "full", "--model", "ltx2")
    assert res.returncode == 2
    assert "exists and is not an empty folder" in the_error_line(res)
    res = harness("diffusers", "tiny-checkpoint", tmp_path / "new", "--model", "ltx3")
    assert res.returncode == 2 and "--model ltx3: expected one of ltx2, wan2.1_t2v" in the_error_line(res)
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine" and not (tmp_path / "new").exists()
    res = harness("diffusers")
    assert res.returncode == 2 and "a command is required (one of: probe, tiny-checkpoint" in the_error_line(
        res
    )


# Every pipeline class the runner drives, each from a synthetic model that serves it.
CASES = [
    ("ltx2", "ltx2_i2v", "LTX2ImageToVideoPipeline"),
    ("wan2.2_t2v", "wan_t2v", "WanPipeline"),
    ("wan2.1_i2v", "wan_i2v", "WanImageToVideoPipeline"),
    ("wan2.2_i2v", "wan_i2v", "WanImageToVideoPipeline"),
]


@pytest.mark.parametrize(("model", "pipeline", "cls"), CASES)
def test_each_pipeline_loads_and_generates_from_its_synthetic_model(
    tmp_path_factory, tmp_path, model, pipeline, cls
):
    from harness.media import probe
    from harness.runners.diffusers.launch import generate, load_pipeline

    folder = synthetic(tmp_path_factory, model)
    pipe = load_pipeline(
        {"pipeline": {"name": pipeline}, "model_path": str(folder)}, torch.device("cpu"), torch.float32
    )
    assert type(pipe).__name__ == cls
    if model.startswith("wan2.2"):
        assert pipe.transformer_2 is not None and pipe.config.boundary_ratio is not None
    over = {"num_frames": 5, "num_inference_steps": 2}
    if pipeline.endswith("i2v"):
        over["image_path"] = str(write_image(tmp_path / "in.png"))
    if model == "wan2.1_i2v":
        over["max_sequence_length"] = 512  # its image cross-attention splits the context at 512 text tokens
    timing = generate(pipe, call_params(pipeline, **over), seed=3, device=torch.device("cpu"),
                      out_path=tmp_path / "o.mp4", latents_dir=tmp_path / "latents")  # fmt: skip
    assert timing.dit_steps == 2 and sorted(p.name for p in (tmp_path / "latents").iterdir()) == [
        "step_001.npz", "step_002.npz"
    ]  # fmt: skip
    assert {"text_encoder", "vae_decode"} <= set(timing.stages)  # a forward and a method, timed alike
    info = probe(tmp_path / "o.mp4")
    assert (info.frames, info.width, info.height) == (5, 32, 32)
    assert info.has_audio == pipeline.startswith("ltx2")
    if pipeline.startswith("ltx2"):
        assert info.audio_rate == 16000 and "audio_decode" in timing.stages


def test_the_lossless_twin_holds_the_frames_and_audio_before_compression(tmp_path_factory, tmp_path):
    import numpy as np

    from harness.media import iter_frames, probe, read_audio, write_av
    from harness.runners.diffusers.launch import generate, load_pipeline

    folder = synthetic(tmp_path_factory, "ltx2")
    pipe = load_pipeline(
        {"pipeline": {"name": "ltx2_t2v"}, "model_path": str(folder)}, torch.device("cpu"), torch.float32
    )
    mp4, mkv = tmp_path / "o.mp4", tmp_path / "o_lossless.mkv"
    generate(pipe, call_params("ltx2_t2v", num_frames=5), seed=3, device=torch.device("cpu"), out_path=mp4,
             lossless_path=mkv)  # fmt: skip
    twin, (pcm, rate) = list(iter_frames(mkv)), read_audio(mkv)
    assert len(twin) == probe(mp4).frames == 5 and twin[0].shape == (32, 32, 3)
    assert rate == probe(mp4).audio_rate == 16000 and pcm.dtype == np.float32 and pcm.size
    # The twin holds what the mp4 was encoded from: encoded again as the run did, the same bytes.
    write_av(tmp_path / "again.mp4", twin, pcm, fps=24.0, sample_rate=rate, crf=18, preset="ultrafast")
    assert (tmp_path / "again.mp4").read_bytes() == mp4.read_bytes()
