"""Flow-matching Euler sampler with shifted sigmas (video and audio each with its shift), as
MiniMax-H3 schedules it: ``infer_steps`` sigma points including the terminal 0 give N-1 DiT steps.
The initial noise is drawn on the CPU from the run seed: the same on every device and backend.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from harness.tiny_ref2av.conditioning import AUDIO_CH, VIDEO_CH
from harness.tiny_ref2av.config import PipelineConfig
from harness.tiny_ref2av.model import Attention, Conditioning, SiteHook, TinyRef2AV, at_site


def shifted_sigmas(infer_steps: int, shift: float) -> list[float]:
    """``infer_steps`` points from 1 to 0, warped by sigma' = s*sigma / (1 + (s-1)*sigma)."""
    if infer_steps < 2:
        raise ValueError("infer_steps counts sigma points including the terminal 0: it must be >= 2")
    base = torch.linspace(1.0, 0.0, infer_steps, dtype=torch.float64)
    return (shift * base / (1.0 + (shift - 1.0) * base)).tolist()


def initial_noise(cfg: PipelineConfig, seed: int) -> tuple[Tensor, Tensor]:
    """Video [t, h, w, C] then audio [n, C] standard normal noise, float32, on the CPU."""
    g = torch.Generator(device="cpu").manual_seed(int(seed))
    video = torch.randn(cfg.latent_t, cfg.latent_h, cfg.latent_w, VIDEO_CH, generator=g)
    return video, torch.randn(cfg.audio_tokens, AUDIO_CH, generator=g)  # drawn after the video's


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class StepResult:
    index: int  # 1-based DiT step
    total: int
    seconds: float
    video: Tensor  # latents after the step, float32 on the device
    audio: Tensor
    sigma_video: float  # sigma reached by the step
    sigma_audio: float


def sample(
    model: TinyRef2AV,
    cond: Conditioning,
    seed: int,
    attention: Attention,
    on_step: Callable[[StepResult], None] | None = None,
    site: SiteHook | None = None,
) -> tuple[Tensor, Tensor]:
    """Run the N-1 Euler steps; the final video/audio latents (float32, on the device)."""
    cfg, device = model.cfg, model.device
    sig_v = shifted_sigmas(cfg.infer_steps, cfg.video_flow_shift)
    sig_a = shifted_sigmas(cfg.infer_steps, cfg.audio_flow_shift)
    noise_v, noise_a = initial_noise(cfg, seed)
    x_v, x_a = noise_v.to(device), noise_a.to(device)
    n = cfg.dit_steps
    for i in range(n):
        synchronize(device)
        t0 = time.perf_counter()
        with at_site(site, step=i + 1, steps=n):
            v_v, v_a = model.velocity(x_v, x_a, sig_v[i], sig_a[i], cond, attention, site)
        # Latents stay float32 between steps (H3: keep_latents_dtype_in_scheduler).
        x_v = x_v + (sig_v[i + 1] - sig_v[i]) * v_v.float()
        x_a = x_a + (sig_a[i + 1] - sig_a[i]) * v_a.float()
        synchronize(device)
        seconds = time.perf_counter() - t0
        if on_step is not None:
            on_step(StepResult(i + 1, n, seconds, x_v, x_a, sig_v[i + 1], sig_a[i + 1]))
    return x_v, x_a
