"""One ref2av request end to end: load, encode, sample, decode, write the mp4, time it all. On one
machine the same config, seed, prompt and attention give bitwise-identical latents, frames and
waveform (TF32 off for the call); CPU results hold for a given torch thread count, left alone here.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch

from harness.envinfo import resolve_device
from harness.records import StepTiming, TimingRecord
from harness.tiny_ref2av.conditioning import (
    audio_target,
    downsample,
    fit_reference,
    load_reference,
    tokenize,
    video_target,
)
from harness.tiny_ref2av.config import PipelineConfig
from harness.tiny_ref2av.decode import VideoDecoder, decode_audio
from harness.tiny_ref2av.model import Attention, Conditioning, SiteHook, TinyRef2AV
from harness.tiny_ref2av.sampler import StepResult, sample, synchronize

T = TypeVar("T")


@contextlib.contextmanager
def exact_matmul() -> Iterator[None]:
    """No TF32 inside the block (fp32 runs stay fp32 on GPUs). Deterministic algorithms are not
    switched on: every op here has a deterministic forward, and the flag makes CPU kernels ~10x slower."""
    prev = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = prev


def save_latents(directory: Path, step: StepResult) -> None:
    """latents_dir/step_NNN.npz: video [t, h, w, C], audio [n, C] (float32) and the sigmas reached."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"step_{step.index:03d}.npz"
    tmp = directory / f".step_{step.index:03d}.tmp.npz"
    np.savez(
        tmp,
        video=step.video.detach().float().cpu().numpy(),
        audio=step.audio.detach().float().cpu().numpy(),
        sigma_video=np.float64(step.sigma_video),
        sigma_audio=np.float64(step.sigma_audio),
    )
    tmp.replace(final)


def run_pipeline(
    cfg: PipelineConfig,
    *,
    seed: int,
    prompt: str,
    attention: Attention,
    out_path: Path,
    latents_dir: Path | None = None,
    on_step: Callable[[int, int], None] | None = None,
    lossless_path: Path | None = None,
    site: SiteHook | None = None,
) -> TimingRecord:
    """Generate ``out_path`` (H.264 + AAC mp4); its timing. ``attention`` maps [B, H, N, D] q, k, v to
    [B, H, N, D]; ``lossless_path`` gets the same media losslessly, its time kept out of the total."""
    from harness.media import LosslessWriter, write_av

    wall0 = time.perf_counter()
    out_path = Path(out_path)
    if latents_dir is None and cfg.save_latents:
        latents_dir = out_path.parent / "latents"
    device = torch.device(resolve_device(cfg.device, context="pipeline config"))
    dtype = getattr(torch, cfg.dtype)  # float32 or bfloat16
    stages: dict[str, float] = {}
    steps: list[StepTiming] = []

    def timed(name: str, fn: Callable[[], T]) -> T:
        synchronize(device)
        t0 = time.perf_counter()
        result = fn()
        synchronize(device)
        stages[name] = stages.get(name, 0.0) + time.perf_counter() - t0
        return result

    with exact_matmul(), torch.inference_mode():
        model = timed("load", lambda: TinyRef2AV(cfg, device, dtype))
        pipe0 = time.perf_counter()
        text = timed("text_encoder", lambda: model.encode_text(tokenize(prompt, cfg.text_tokens)))

        def encode_reference() -> tuple[torch.Tensor, torch.Tensor, Conditioning]:
            ref = fit_reference(load_reference(cfg.reference), cfg.height, cfg.width)
            ref_low = downsample(ref, cfg.latent_h, cfg.latent_w)
            tv = video_target(ref_low, cfg.latent_t, prompt)
            ta = audio_target(cfg.audio_tokens, cfg.frames / cfg.fps, prompt)
            cos, sin = model.rope_tables()
            return ref, ref_low, Conditioning(text, tv.to(device), ta.to(device), cos, sin)

        ref, ref_low, cond = timed("ref_encoder", encode_reference)

        save_s = 0.0

        def step_done(res: StepResult) -> None:
            nonlocal save_s
            steps.append(StepTiming(index=res.index, seconds=res.seconds))
            if latents_dir is not None:
                t0 = time.perf_counter()
                save_latents(Path(latents_dir), res)
                save_s += time.perf_counter() - t0
            if on_step is not None:
                on_step(res.index, res.total)

        dit0 = time.perf_counter()
        lat_v, lat_a = sample(model, cond, seed, attention, step_done, site)
        stages["dit"] = time.perf_counter() - dit0 - save_s
        if latents_dir is not None:
            stages["latents_save"] = save_s

        audio = timed("vae_decode", lambda: decode_audio(lat_a, cfg))
        decoder = VideoDecoder(cfg, ref, ref_low, device)
        t0 = time.perf_counter()
        frames = decoder.frames(lat_v)
        lossless = None
        if lossless_path is not None:
            lossless = LosslessWriter(lossless_path, fps=cfg.fps, audio=audio, sample_rate=cfg.audio_rate)
            frames = lossless.tee(frames)
        write_av(
            out_path,
            frames,
            audio,
            fps=cfg.fps,
            sample_rate=cfg.audio_rate,
            crf=cfg.crf,
            preset=cfg.x264_preset,
        )
        if lossless is not None:
            lossless.close()
        copy_s = lossless.seconds if lossless is not None else 0.0
        write_s = time.perf_counter() - t0 - copy_s
        stages["vae_decode"] += decoder.seconds
        stages["save"] = write_s - decoder.seconds
        if lossless is not None:
            stages["lossless_copy"] = copy_s
        pipeline_total = time.perf_counter() - pipe0 - copy_s
    return TimingRecord(
        source="builtin",
        steps=steps,
        stages={k: round(v, 6) for k, v in stages.items()},
        pipeline_total_s=pipeline_total,
        wall_total_s=time.perf_counter() - wall0,
        seq_len=cfg.seq_len,
        packed_layout=cfg.packed_layout,
        ranks=["0"],
    )
