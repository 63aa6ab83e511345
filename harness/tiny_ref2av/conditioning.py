"""Inputs of a ref2av request, deterministic and device independent: prompt tokens (byte trigrams
hashed by FNV-1a, not Python's salted ``hash``), the reference photograph (shipped with
scikit-image) and the latent targets, closed-form fields that the transformer then perturbs.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

VIDEO_CH = 8  # video latent channels: 0-2 colour, 3-4 flow, 5 brightness, 6 saturation, 7 spare
AUDIO_CH = 8  # audio latent channels: 0-3 partial levels, 4 pitch, 5 tremolo, 6 pan, 7 gain
PITCH_UNIT = 3.0  # semitones per unit of the pitch channel
VOCAB = 4096
PAD_ID = 0

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1


def fnv1a64(data: bytes) -> int:
    h = _FNV_OFFSET
    for b in data:
        h = ((h ^ b) * _FNV_PRIME) & _MASK64
    return h


def tokenize(prompt: str, n_tokens: int, vocab: int = VOCAB) -> torch.Tensor:
    """Byte-trigram hash tokens, padded with PAD_ID or truncated to ``n_tokens`` (int64 [n])."""
    data = prompt.encode("utf-8")
    ids = [1 + fnv1a64(data[i : i + 3]) % (vocab - 1) for i in range(max(len(data) - 2, 0))]
    ids = (ids + [PAD_ID] * n_tokens)[:n_tokens]
    return torch.tensor(ids, dtype=torch.int64)


def prompt_seed(prompt: str) -> int:
    """A 63-bit seed for the prompt-dependent parts of the targets (motion, melody)."""
    return fnv1a64(prompt.encode("utf-8")) >> 1


def load_reference(name: str) -> np.ndarray:
    """The reference photograph as uint8 HxWx3 (bundled with scikit-image, no download)."""
    from skimage import data

    img = {"astronaut": data.astronaut, "chelsea": data.chelsea}[name]()
    return np.ascontiguousarray(img[..., :3])


def fit_reference(image: np.ndarray, height: int, width: int) -> torch.Tensor:
    """Centre-crop to the output aspect, then antialiased resize: float32 [3, H, W] in [0, 1]."""
    h, w = image.shape[:2]
    aspect = width / height
    cw, ch = (round(h * aspect), h) if w / h > aspect else (w, round(w / aspect))
    y0, x0 = (h - ch) // 2, (w - cw) // 2
    crop = torch.from_numpy(image[y0 : y0 + ch, x0 : x0 + cw]).permute(2, 0, 1).float() / 255.0
    return downsample(crop, height, width).clamp(0.0, 1.0).contiguous()


def downsample(image: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Antialiased bilinear resize of a [C, H, W] image (area-like when it shrinks)."""
    out = F.interpolate(
        image[None], size=(height, width), mode="bilinear", antialias=True, align_corners=False
    )
    return out[0]


def encode_colour(rgb: torch.Tensor) -> torch.Tensor:
    """The 'VAE encode' of colour: [0, 1] -> [-1, 1] (the decoder inverts it)."""
    return rgb * 2.0 - 1.0


def video_target(ref_lowres: torch.Tensor, latent_t: int, prompt: str) -> torch.Tensor:
    """What the reference and prompt ask of the video latent, float32 [t, h, w, VIDEO_CH]: the reference's
    colour, a travelling wave of flow (its direction and wavelength from the prompt), a light sweep."""
    _, h, w = ref_lowres.shape
    g = torch.Generator().manual_seed(prompt_seed(prompt))
    angle = float(torch.rand((), generator=g)) * 2 * math.pi
    cycles = 0.6 + float(torch.rand((), generator=g)) * 0.8  # spatial cycles across the frame
    speed = 0.5 + float(torch.rand((), generator=g))  # temporal cycles over the clip
    tau = torch.linspace(0.0, 1.0, latent_t).view(-1, 1, 1)
    y = torch.linspace(0.0, 1.0, h).view(1, -1, 1)
    x = torch.linspace(0.0, 1.0, w).view(1, 1, -1)
    along = math.cos(angle) * x + math.sin(angle) * y
    phase = 2 * math.pi * (cycles * along - speed * tau)
    target = torch.zeros(latent_t, h, w, VIDEO_CH)
    target[..., 0:3] = encode_colour(ref_lowres).permute(1, 2, 0)[None]
    target[..., 3] = math.cos(angle) * torch.sin(phase)
    target[..., 4] = math.sin(angle) * torch.sin(phase)
    target[..., 5] = 0.4 * torch.sin(2 * math.pi * (x - 0.7 * tau))
    return target


PENTATONIC = (0, 2, 4, 7, 9, 12, 14)


def audio_target(n_tokens: int, duration_s: float, prompt: str) -> torch.Tensor:
    """What the prompt asks of the audio latent, float32 [n, AUDIO_CH]: a plucked pentatonic melody (pitch
    in PITCH_UNIT semitones from 220 Hz) with a slow pan."""
    g = torch.Generator().manual_seed(prompt_seed(prompt) ^ 0x5A5A)
    note_s = 0.35 + 0.25 * float(torch.rand((), generator=g))
    n_notes = max(1, math.ceil(duration_s / note_s))
    steps = torch.randint(0, len(PENTATONIC), (n_notes,), generator=g)
    semis = torch.tensor(PENTATONIC, dtype=torch.float32)[steps] - 5.0
    t = (torch.arange(n_tokens, dtype=torch.float32) + 0.5) * (duration_s / n_tokens)
    idx = (t / note_s).long().clamp(max=n_notes - 1)
    since = t - idx.float() * note_s
    env = torch.exp(-4.0 * since / note_s)  # pluck: attack at the note start, decay after
    target = torch.zeros(n_tokens, AUDIO_CH)
    for k in range(4):
        target[:, k] = 4.0 * env - 2.0 - 0.7 * k
    target[:, 4] = semis[idx] / PITCH_UNIT
    target[:, 6] = 0.6 * torch.sin(2 * math.pi * t / max(duration_s, 1e-6))
    return target
