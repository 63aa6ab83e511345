from __future__ import annotations

import av
import numpy as np
import pytest
import torch
from tiny_ref2av_testutil import PROMPT, exact_attention, psnr

from harness.errors import HarnessError
from harness.media import iter_frames, read_audio
from harness.tiny_ref2av.config import PRESETS
from harness.tiny_ref2av.run import fit_reference, load_reference, run_pipeline


def frames(run) -> np.ndarray:
    return np.stack(list(iter_frames(run.mp4)))


def test_mp4_is_h264_yuv420p_with_stereo_aac_32k(tiny_runs, tiny_cfg):
    with av.open(str(tiny_runs["exact"].mp4)) as c:
        vs, aus = c.streams.video[0], c.streams.audio[0]
        assert vs.codec_context.name == "h264"
        assert vs.codec_context.pix_fmt == "yuv420p"
        assert (vs.codec_context.width, vs.codec_context.height) == (tiny_cfg.width, tiny_cfg.height)
        assert float(vs.average_rate) == 24.0
        assert aus.codec_context.name == "aac"
        assert aus.codec_context.sample_rate == 32000
        assert aus.codec_context.channels == 2
    assert len(frames(tiny_runs["exact"])) == tiny_cfg.frames


def test_timing_record(tiny_runs, tiny_cfg):
    run = tiny_runs["exact"]
    t = run.timing
    assert t.source == "builtin"
    assert t.dit_steps == tiny_cfg.infer_steps - 1  # N sigma points -> N-1 DiT steps
    assert [s.index for s in t.steps] == [1, 2, 3]
    assert all(s.seconds > 0 for s in t.steps)
    assert {"load", "text_encoder", "dit", "vae_decode", "save"} <= set(t.stages)
    assert sum(s.seconds for s in t.steps) <= t.stages["dit"] + 1e-6
    assert 0 < t.pipeline_total_s <= t.wall_total_s
    assert t.seq_len == tiny_cfg.seq_len
    assert t.packed_layout == {"text": 16, "audio": 37, "video": 112, "total": 165}
    assert run.steps_seen == [(1, 3), (2, 3), (3, 3)]


def test_same_seed_is_bitwise_identical(tiny_runs):
    a, b = tiny_runs["exact"], tiny_runs["exact_again"]
    assert a.mp4.read_bytes() == b.mp4.read_bytes()
    assert np.array_equal(frames(a), frames(b))
    assert np.array_equal(read_audio(a.mp4)[0], read_audio(b.mp4)[0])
    for i in (1, 2, 3):
        la, lb = np.load(a.latents / f"step_{i:03d}.npz"), np.load(b.latents / f"step_{i:03d}.npz")
        assert np.array_equal(la["video"], lb["video"]) and np.array_equal(la["audio"], lb["audio"])


def test_frames_show_the_reference_and_move(tiny_runs, tiny_cfg):
    fr = frames(tiny_runs["exact"])
    ref = np.round(fit_reference(load_reference("astronaut"), tiny_cfg.height, tiny_cfg.width).numpy() * 255)
    ref = ref.transpose(1, 2, 0)
    corr = np.corrcoef(fr[0].astype(float).ravel(), ref.ravel())[0, 1]
    assert corr > 0.8 and psnr(fr[0], ref) > 15
    noise = np.random.default_rng(0).integers(0, 256, fr[0].shape)
    assert abs(np.corrcoef(noise.ravel(), ref.ravel())[0, 1]) < 0.1  # what "not the picture" scores
    motion = np.abs(np.diff(fr.astype(np.int16), axis=0)).mean(axis=(1, 2, 3))
    assert (motion > 0).all() and motion.mean() > 0.5


def test_audio_is_stereo_32k_tonal_and_as_long_as_the_video(tiny_runs, tiny_cfg):
    audio, rate = read_audio(tiny_runs["exact"].mp4)
    assert rate == 32000 and audio.shape[0] == 2
    expect = tiny_cfg.frames / 24 * 32000
    assert abs(audio.shape[1] - expect) <= 2048  # AAC priming/padding
    rms = float(np.sqrt(np.mean(audio**2)))
    assert 0.01 < rms < 0.5
    # Tonal, not white noise: spectral flatness (geometric / arithmetic mean of power) is low.
    power = np.abs(np.fft.rfft(audio[0])) ** 2 + 1e-12
    flatness = np.exp(np.mean(np.log(power))) / np.mean(power)
    assert flatness < 0.05


def test_attention_numerics_change_the_output_measurably_but_sanely(tiny_runs):
    ref = frames(tiny_runs["exact"])
    q = frames(tiny_runs["quantized"])
    p = np.mean([psnr(a, b) for a, b in zip(ref, q, strict=True)])
    assert 25 < p < 50
    rev = np.mean([psnr(a, b) for a, b in zip(ref, frames(tiny_runs["kv_reversed"]), strict=True)])
    assert rev > p + 5  # the exact-attention noise floor sits well above the quantised arm
    # Reversing K/V order in exact attention perturbs the latents far less than quantising.
    base = np.load(tiny_runs["exact"].latents / "step_003.npz")["video"]
    rev_lat = np.load(tiny_runs["kv_reversed"].latents / "step_003.npz")["video"]
    quant = np.load(tiny_runs["quantized"].latents / "step_003.npz")["video"]
    err_rev = np.abs(rev_lat - base).max()
    err_q = np.abs(quant - base).max()
    assert err_rev < 1e-3 and err_q > 100 * max(err_rev, 1e-7)


def test_different_seeds_differ(tiny_runs):
    a, b = frames(tiny_runs["exact"]), frames(tiny_runs["seed43"])
    p = np.mean([psnr(x, y) for x, y in zip(a, b, strict=True)])
    assert 12 < p < 35  # visibly different takes on the same picture
    qa = np.mean([psnr(x, y) for x, y in zip(a, frames(tiny_runs["quantized"]), strict=True)])
    assert p < qa  # a new seed moves the output more than quantised attention does


def test_latents_saved_after_every_step(tiny_runs, tiny_cfg):
    lat = tiny_runs["exact"].latents
    assert sorted(p.name for p in lat.iterdir()) == ["step_001.npz", "step_002.npz", "step_003.npz"]
    s1, s3 = np.load(lat / "step_001.npz"), np.load(lat / "step_003.npz")
    assert s1["video"].shape == (tiny_cfg.latent_t, tiny_cfg.latent_h, tiny_cfg.latent_w, 8)
    assert s1["audio"].shape == (tiny_cfg.audio_tokens, 8) and s1["video"].dtype == np.float32
    assert float(s3["sigma_video"]) == 0.0 and 0 < float(s1["sigma_video"]) < 1
    assert not np.array_equal(s1["video"], s3["video"])


def test_save_latents_flag_defaults_next_to_the_output(tmp_path, tiny_cfg):
    cfg = tiny_cfg.with_overrides({"infer_steps": 2, "save_latents": True})
    t = run_pipeline(cfg, seed=1, prompt=PROMPT, attention=exact_attention, out_path=tmp_path / "o.mp4")
    assert t.dit_steps == 1
    assert (tmp_path / "latents" / "step_001.npz").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without a GPU")
def test_cuda_without_gpu_is_a_clear_error(tmp_path, tiny_cfg):
    with pytest.raises(HarnessError, match="cuda"):
        run_pipeline(
            tiny_cfg.with_overrides({"device": "cuda"}),
            seed=1,
            prompt=PROMPT,
            attention=exact_attention,
            out_path=tmp_path / "o.mp4",
        )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU")
def test_gpu_bf16_run(tmp_path, tiny_cfg):
    cfg = tiny_cfg.with_overrides({"device": "cuda", "dtype": "bfloat16"})
    t = run_pipeline(cfg, seed=1, prompt=PROMPT, attention=exact_attention, out_path=tmp_path / "o.mp4")
    assert t.dit_steps == 3
    assert len(list(iter_frames(tmp_path / "o.mp4"))) == cfg.frames


@pytest.mark.slow
def test_cpu_preset_runs(tmp_path):
    t = run_pipeline(
        PRESETS["cpu"], seed=42, prompt=PROMPT, attention=exact_attention, out_path=tmp_path / "o.mp4"
    )
    assert t.dit_steps == 3 and t.seq_len == PRESETS["cpu"].seq_len


def test_lossless_copy_holds_the_frames_before_compression(tmp_path, tiny_cfg):
    cfg = tiny_cfg.with_overrides({"infer_steps": 2})
    t = run_pipeline(cfg, seed=1, prompt=PROMPT, attention=exact_attention, out_path=tmp_path / "o.mp4",
                     lossless_path=tmp_path / "o.mkv")  # fmt: skip
    assert t.stages["lossless_copy"] > 0  # kept out of the pipeline total
    raw, mp4 = list(iter_frames(tmp_path / "o.mkv")), list(iter_frames(tmp_path / "o.mp4"))
    assert len(raw) == len(mp4) == cfg.frames
    assert any(not np.array_equal(a, b) for a, b in zip(raw, mp4, strict=True))  # H.264 moved pixels
    assert read_audio(tmp_path / "o.mkv")[0].shape[1] <= read_audio(tmp_path / "o.mp4")[0].shape[1]
