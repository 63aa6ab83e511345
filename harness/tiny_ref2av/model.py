"""A small DiT over one packed [text | audio | video] sequence after MiniMax-H3, and its sampler. Seeded
weights keep latents and targets in a small "content" subspace the head reads out, so the clean latent is
"target + what the caller's attention mixed in": its numerics show without destroying the output."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from harness.tiny_ref2av.config import PipelineConfig

VIDEO_CH = 8  # video latent channels: 0-2 colour, 3-4 flow, 5 brightness, 6 saturation, 7 spare
AUDIO_CH = 8  # audio latent channels: 0-3 partial levels, 4 pitch, 5 tremolo, 6 pan, 7 gain
VOCAB = 4096  # hashed prompt tokens
Attention = Callable[[Tensor, Tensor, Tensor, float], Tensor]
# The runner's call-site hook: ``site(step=..., steps=...)`` around a DiT step, ``site(block=...,
# kind=...)`` around a block's attention call (harness.attention.insitu.recorder.CallSites.site).
SiteHook = Callable[..., AbstractContextManager[Any]]


def at_site(site: SiteHook | None, **where: Any) -> AbstractContextManager[Any]:
    return site(**where) if site is not None else contextlib.nullcontext()


FREQ_DIM = 256  # sinusoidal timestep features
ROPE_THETA = 10000.0
# Structure constants (chosen so a quantised attention costs ~25-50 dB of video PSNR).
IN_GAIN = 3.0  # content amplitude of latents in the residual stream
TYPE_NORM = 8.0  # norm of the per-segment type embeddings
QK_GAIN = 2.0  # q/k RMS-norm weight: sets attention sharpness
GATE = 0.35  # residual gate of attention / MLP outputs
LEAK = 0.15  # share of block outputs written outside the content subspace
MOD_SCALE = 0.3  # strength of the timestep modulation
# SENSITIVITY_NOTE: the MLP activation is sin(freq * x) with freq = cfg.sensitivity / depth: a
# bounded output whose sensitivity to its input stands in for what 48 layers and 29 steps do
# to small differences in the real model; dividing by depth keeps the stack's amplification
# roughly depth-independent.


@dataclass
class Block:
    wqkv: Tensor  # [d, 3d]
    q_norm: Tensor  # [head_dim]
    k_norm: Tensor  # [head_dim]
    wo: Tensor  # [d, d]
    w1: Tensor  # [d, m]
    w2: Tensor  # [m, d]
    table: Tensor  # [6, d]: shift1, scale1, gate1, shift2, scale2, gate2


@dataclass
class Conditioning:
    """Per-request tensors on the model's device."""

    text: Tensor  # [text_tokens, d] (model dtype)
    target_video: Tensor  # [t, h, w, VIDEO_CH] float32
    target_audio: Tensor  # [audio_tokens, AUDIO_CH] float32
    cos: Tensor  # [seq_len, head_dim] rotary tables (model dtype)
    sin: Tensor


def _randn(g: torch.Generator, *shape: int, std: float = 1.0) -> Tensor:
    return torch.randn(*shape, generator=g) * std


class TinyRef2AV:
    """Weights and forward pass; built once per run (the ``load`` stage)."""

    def __init__(self, cfg: PipelineConfig, device: torch.device, dtype: torch.dtype):
        self.cfg, self.device, self.dtype = cfg, device, dtype
        d, hd, m = cfg.dim, cfg.head_dim, max(8, int(round(cfg.dim * cfg.mlp_ratio)))
        g = torch.Generator(device="cpu").manual_seed(cfg.weight_seed)

        # Orthonormal content basis: noisy-latent and target coordinates for video and audio.
        n_content = 2 * VIDEO_CH + 2 * AUDIO_CH
        basis, _ = torch.linalg.qr(_randn(g, d, n_content + 2))
        basis = basis.T.contiguous()  # rows orthonormal
        content = basis[:n_content]
        self.ex_v, self.er_v, self.ex_a, self.er_a = content.split([VIDEO_CH, VIDEO_CH, AUDIO_CH, AUDIO_CH])
        # Type embeddings live outside the content subspace so the head reads targets exactly.
        self.type_v = basis[n_content] * TYPE_NORM
        self.type_a = basis[n_content + 1] * TYPE_NORM

        # Text encoder: hashed-token embedding + positions, one residual MLP, LayerNorm.
        self.tok_emb = _randn(g, VOCAB, d)
        self.txt_pos = _randn(g, cfg.text_tokens, d, std=0.3)
        self.txt_w1 = _randn(g, d, d, std=1 / math.sqrt(d))
        self.txt_w2 = _randn(g, d, d, std=0.5 / math.sqrt(d))

        # Timestep embedding -> per-segment modulation [6, d].
        self.t_w1 = _randn(g, FREQ_DIM, d, std=1 / math.sqrt(FREQ_DIM))
        self.t_w2 = _randn(g, d, d, std=1 / math.sqrt(d))
        self.t_mod = _randn(g, d, 6 * d, std=MOD_SCALE / math.sqrt(d))

        def out_proj(rows: int) -> Tensor:
            # Mostly into the content subspace (what the head reads), a little everywhere.
            into = _randn(g, rows, n_content, std=1 / math.sqrt(rows)) @ content
            return into + _randn(g, rows, d, std=LEAK / math.sqrt(rows))

        def modulation() -> list[Tensor]:  # shift, scale, gate
            return [_randn(g, d, std=0.1), _randn(g, d, std=0.1), GATE * (1 + _randn(g, d, std=0.2))]

        self.blocks: list[Block] = []
        for _ in range(cfg.depth):
            table = torch.stack([*modulation(), *modulation()])  # before the matrices: the draw order
            self.blocks.append(
                Block(
                    wqkv=_randn(g, d, 3 * d, std=1 / math.sqrt(d)),
                    q_norm=QK_GAIN * (1 + _randn(g, hd, std=0.1)),
                    k_norm=QK_GAIN * (1 + _randn(g, hd, std=0.1)),
                    wo=out_proj(d),
                    w1=_randn(g, d, m, std=1 / math.sqrt(d)),
                    w2=out_proj(m),
                    table=table,
                )
            )

        # Embedding/readout bases stay float32 like the residual stream (see ``forward``).
        for name in ("ex_v", "er_v", "ex_a", "er_a", "type_v", "type_a"):
            setattr(self, name, getattr(self, name).to(device))
        for name in ("tok_emb", "txt_pos", "txt_w1", "txt_w2", "t_w1", "t_w2", "t_mod"):
            setattr(self, name, getattr(self, name).to(device=device, dtype=dtype))
        for b in self.blocks:
            for f in ("wqkv", "q_norm", "k_norm", "wo", "w1", "w2"):
                setattr(b, f, getattr(b, f).to(device=device, dtype=dtype))
            b.table = b.table.to(device)

    def encode_text(self, tokens: Tensor) -> Tensor:
        x = self.tok_emb[tokens.to(self.device)] + self.txt_pos
        x = x + F.gelu(x @ self.txt_w1, approximate="tanh") @ self.txt_w2
        return F.layer_norm(x, (x.shape[-1],), eps=1e-6)

    def rope_tables(self) -> tuple[Tensor, Tensor]:
        """cos/sin [seq_len, head_dim] for split-half rotary embedding over the packed sequence."""
        cfg = self.cfg
        pairs = cfg.head_dim // 2
        n_hw = pairs // 3
        split = (pairs - 2 * n_hw, n_hw, n_hw)  # pairs for t, h, w
        pos = torch.zeros(cfg.seq_len, 3, dtype=torch.float64)
        a0 = cfg.text_tokens
        v0 = a0 + cfg.audio_tokens
        # Audio positions on the video's latent time axis, so the two modalities line up in time.
        ratio = cfg.latent_t / cfg.audio_tokens
        pos[a0:v0, 0] = (torch.arange(cfg.audio_tokens, dtype=torch.float64) + 0.5) * ratio
        t, h, w = torch.meshgrid(
            torch.arange(cfg.latent_t), torch.arange(cfg.latent_h), torch.arange(cfg.latent_w), indexing="ij"
        )
        pos[v0:] = torch.stack([t, h, w], dim=-1).reshape(-1, 3).double()
        angles = []
        for axis, n in enumerate(split):
            freqs = ROPE_THETA ** (-torch.arange(n, dtype=torch.float64) / max(n, 1))
            angles.append(pos[:, axis : axis + 1] * freqs[None])
        ang = torch.cat(angles, dim=-1)
        ang = torch.cat([ang, ang], dim=-1)
        cos, sin = (trig(ang).to(device=self.device, dtype=self.dtype) for trig in (torch.cos, torch.sin))
        return cos, sin

    def _timestep_mod(self, sigmas: list[float]) -> Tensor:
        """[segments, 6, d] modulation from each segment's timestep (sigma * 1000)."""
        t = torch.tensor(sigmas, dtype=torch.float64) * 1000.0
        half = FREQ_DIM // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64) / half)
        arg = t[:, None] * freqs[None]
        feats = torch.cat([arg.cos(), arg.sin()], dim=-1).to(device=self.device, dtype=self.dtype)
        e = F.silu(feats @ self.t_w1) @ self.t_w2
        return (F.silu(e) @ self.t_mod).float().view(len(sigmas), 6, -1)

    def forward(
        self,
        x_video: Tensor,
        x_audio: Tensor,
        sigma_video: float,
        sigma_audio: float,
        cond: Conditioning,
        attention: Attention,
        site: SiteHook | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Predicted clean latents (x0) for video [t, h, w, C] and audio [n, C], float32."""
        cfg, dt = self.cfg, self.dtype
        d, heads, hd = cfg.dim, cfg.heads, cfg.head_dim
        xv = x_video.reshape(-1, VIDEO_CH)
        tv = cond.target_video.reshape(-1, VIDEO_CH)
        # The residual stream is float32 whatever the dtype; matmuls and attention run in dtype.
        hv = IN_GAIN * (xv @ self.ex_v + tv @ self.er_v) + self.type_v
        ha = IN_GAIN * (x_audio @ self.ex_a + cond.target_audio @ self.er_a) + self.type_a
        h = torch.cat([cond.text.float(), ha, hv], dim=0)
        n = h.shape[0]
        a0, v0 = cfg.text_tokens, cfg.text_tokens + cfg.audio_tokens
        bounds = [(0, a0), (a0, v0), (v0, cfg.seq_len)]
        mod = self._timestep_mod([0.0, sigma_audio, sigma_video])  # text tokens are clean
        scale = 1.0 / math.sqrt(hd)
        act_freq = cfg.sensitivity / cfg.depth
        for index, blk in enumerate(self.blocks):
            m = mod + blk.table[None]
            x = _modulate(F.layer_norm(h, (d,), eps=1e-6), m[:, 0], m[:, 1], bounds).to(dt)
            qkv = (x @ blk.wqkv).view(n, 3, heads, hd).permute(1, 2, 0, 3)
            q = _rope(F.rms_norm(qkv[0], (hd,), blk.q_norm, eps=1e-6), cond.cos, cond.sin)
            k = _rope(F.rms_norm(qkv[1], (hd,), blk.k_norm, eps=1e-6), cond.cos, cond.sin)
            v = qkv[2]
            with at_site(site, block=index, kind="dit_self"):
                o = attention(q[None].contiguous(), k[None].contiguous(), v[None].contiguous(), scale)
            o = o.reshape(heads, n, hd).transpose(0, 1).reshape(n, d).to(dt)
            _gated_add(h, (o @ blk.wo).float(), m[:, 2], bounds)
            x = _modulate(F.layer_norm(h, (d,), eps=1e-6), m[:, 3], m[:, 4], bounds).to(dt)
            hidden = torch.sin(act_freq * (x @ blk.w1).float()).to(dt)  # phase in float32
            _gated_add(h, (hidden @ blk.w2).float(), m[:, 5], bounds)
        x0_audio = (h[a0:v0] @ self.er_a.T) / IN_GAIN
        x0_video = (h[v0:] @ self.er_v.T) / IN_GAIN
        return x0_video.view_as(x_video), x0_audio

    def velocity(self, x_video: Tensor, x_audio: Tensor, *args: Any) -> tuple[Tensor, Tensor]:
        """Flow-matching velocity v = (x_t - x0) / sigma for x_t = (1 - sigma) x0 + sigma * noise;
        ``args``: ``forward``'s after the latents, the two sigmas first."""
        x0v, x0a = self.forward(x_video, x_audio, *args)
        return (x_video - x0v) / args[0], (x_audio - x0a) / args[1]


def _modulate(x: Tensor, shift: Tensor, scale: Tensor, bounds: list[tuple[int, int]]) -> Tensor:
    """x * (1 + scale_s) + shift_s on each segment s, in place on the fresh LayerNorm output."""
    for i, (s, e) in enumerate(bounds):
        x[s:e].mul_(1 + scale[i]).add_(shift[i])
    return x


def _gated_add(h: Tensor, out: Tensor, gate: Tensor, bounds: list[tuple[int, int]]) -> None:
    for i, (s, e) in enumerate(bounds):
        h[s:e].add_(out[s:e] * gate[i])


def _rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Split-half rotary embedding of x [heads, N, head_dim]."""
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rot * sin


# --- the sampler: flow-matching Euler, video and audio each with its sigma shift, as MiniMax-H3 -------
# schedules it (``infer_steps`` sigma points including the terminal 0: N-1 DiT steps); the initial
# noise is drawn on the CPU from the run seed, the same on every device and backend.


def shifted_sigmas(infer_steps: int, shift: float) -> list[float]:
    """``infer_steps`` points from 1 to 0, warped by sigma' = s*sigma / (1 + (s-1)*sigma)."""
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
