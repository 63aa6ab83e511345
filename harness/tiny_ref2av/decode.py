"""The 'VAE decode': latents warp and modulate the reference photograph into RGB frames (a viewer sees
it moving, never noise) and drive a tuned oscillator bank into a stereo waveform (float64, CPU).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from harness.tiny_ref2av.conditioning import PITCH_UNIT, encode_colour
from harness.tiny_ref2av.config import PipelineConfig
from harness.tiny_ref2av.sampler import synchronize

ZOOM = 0.08  # camera zoom-in over the clip
PAN = (0.05, 0.03)  # camera drift over the clip, normalised coordinates (x, y)
FLOW_CELLS = 0.2  # displacement, in latent cells, per unit of flow latent
COLOUR_GAIN = 1.2
BRIGHT_GAIN = 0.2
SAT_GAIN = 0.4


class VideoDecoder:
    """Streams uint8 HxWx3 frames; ``seconds`` accumulates the decode time (device-synchronised)."""

    def __init__(self, cfg: PipelineConfig, reference: Tensor, ref_colour: Tensor, device: torch.device):
        self.cfg, self.device = cfg, device
        self.reference = reference.to(device)  # [3, H, W] in [0, 1]
        # The reference as the decoder sees it through the latent colour channels.
        self.ref_code = encode_colour(ref_colour.to(device))  # [3, h, w]: the reference's colour latent
        self.seconds = 0.0
        h, w = cfg.height, cfg.width
        ys = (torch.arange(h, dtype=torch.float32, device=device) + 0.5) / h * 2 - 1
        xs = (torch.arange(w, dtype=torch.float32, device=device) + 0.5) / w * 2 - 1
        self.gy, self.gx = torch.meshgrid(ys, xs, indexing="ij")

    def frames(self, latents: Tensor, chunk: int | None = None) -> Iterator[np.ndarray]:
        """Decoded frames of latents [t, h, w, C] (float32), ``chunk`` frames at a time."""
        cfg = self.cfg
        chunk = chunk or (8 if self.device.type == "cuda" else 4)
        lat = latents.float().permute(0, 3, 1, 2).contiguous()  # [t, C, h, w]
        # Colour is decoded as its deviation from the reference's colour latent, re-anchored on
        # the reference: a clip-wide colour cast is removed, local colour changes are kept.
        lat[:, 0:3] -= self.ref_code[None]
        lat[:, 0:3] -= lat[:, 0:3].mean(dim=(0, 2, 3), keepdim=True)
        for start in range(0, cfg.frames, chunk):
            synchronize(self.device)
            t0 = time.perf_counter()
            idx = list(range(start, min(start + chunk, cfg.frames)))
            out = self._decode(lat, idx).cpu().numpy()
            self.seconds += time.perf_counter() - t0
            yield from out

    def _decode(self, lat: Tensor, idx: list[int]) -> Tensor:
        cfg = self.cfg
        n_lat = lat.shape[0]
        u = torch.tensor(idx, dtype=torch.float32, device=self.device) / max(cfg.frames - 1, 1)
        pos = u * (n_lat - 1)
        i0 = pos.floor().long().clamp(max=n_lat - 2)
        frac = (pos - i0.float()).view(-1, 1, 1, 1)
        fields = lat[i0] * (1 - frac) + lat[i0 + 1] * frac  # [B, C, h, w]
        up = F.interpolate(_smooth(fields), size=(cfg.height, cfg.width), mode="bicubic", align_corners=False)

        zoom = (1 + ZOOM * u).view(-1, 1, 1)
        fx, fy = 2 * FLOW_CELLS / cfg.latent_w, 2 * FLOW_CELLS / cfg.latent_h
        gx = self.gx[None] / zoom + PAN[0] * u.view(-1, 1, 1) + fx * up[:, 3]
        gy = self.gy[None] / zoom + PAN[1] * u.view(-1, 1, 1) + fy * up[:, 4]
        grid = torch.stack([gx, gy], dim=-1)
        ref = self.reference[None].expand(len(idx), -1, -1, -1)
        img = F.grid_sample(ref, grid, mode="bilinear", padding_mode="reflection", align_corners=False)

        img = img * (1 + BRIGHT_GAIN * torch.tanh(up[:, 5:6])) + COLOUR_GAIN * 0.5 * up[:, 0:3]
        grey = img.mean(dim=1, keepdim=True)
        img = grey + (img - grey) * (1 + SAT_GAIN * torch.tanh(up[:, 6:7]))
        rgb = (img.clamp(0, 1) * 255).round().to(torch.uint8)
        return rgb.permute(0, 2, 3, 1).contiguous()


def _smooth(x: Tensor) -> Tensor:
    """Separable [1, 2, 1] / 4 blur over the latent grid (replicate edges): spatial context."""
    c = x.shape[1]
    k = torch.tensor([0.25, 0.5, 0.25], dtype=x.dtype, device=x.device)
    x = F.conv2d(F.pad(x, (1, 1, 0, 0), mode="replicate"), k.view(1, 1, 1, 3).expand(c, 1, 1, 3), groups=c)
    return F.conv2d(F.pad(x, (0, 0, 1, 1), mode="replicate"), k.view(1, 1, 3, 1).expand(c, 1, 3, 1), groups=c)


def decode_audio(latents: Tensor, cfg: PipelineConfig) -> np.ndarray:
    """Stereo float32 [2, samples] at ``cfg.audio_rate`` from audio latents [n, C]."""
    lat = latents.detach().double().cpu().numpy()
    n_tok = lat.shape[0]
    n = cfg.audio_samples
    duration = n / cfg.audio_rate
    t = np.arange(n, dtype=np.float64) / cfg.audio_rate
    t_tok = (np.arange(n_tok, dtype=np.float64) + 0.5) * (duration / n_tok)
    ch = np.stack([np.interp(t, t_tok, lat[:, c]) for c in range(lat.shape[1])])  # [C, n]

    semis = ch[4] * PITCH_UNIT
    s0 = np.floor(semis)
    frac = semis - s0
    wave = np.zeros(n)
    for k in range(4):
        level = 0.22 / (k + 1) / (1 + np.exp(-ch[k]))
        lo = np.sin(2 * math.pi * (k + 1) * 220.0 * 2 ** (s0 / 12) * t)
        hi = np.sin(2 * math.pi * (k + 1) * 220.0 * 2 ** ((s0 + 1) / 12) * t)
        wave += level * ((1 - frac) * lo + frac * hi)
    wave *= 1 + 0.3 * np.tanh(ch[5]) * np.sin(2 * math.pi * 5.0 * t)  # tremolo
    wave *= 1 + 0.25 * np.tanh(ch[7])
    fade = np.minimum(1.0, np.minimum(t, duration - t) / 0.01)  # 10 ms fades: no clicks
    wave *= np.clip(fade, 0.0, 1.0)
    angle = (np.tanh(ch[6]) + 1) * (math.pi / 4)  # equal-power pan
    stereo = np.stack([wave * np.cos(angle), wave * np.sin(angle)]) * math.sqrt(2)
    return np.clip(stereo, -1.0, 1.0).astype(np.float32)
