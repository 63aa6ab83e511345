"""One ref2av request end to end: load, encode, sample, decode, write the mp4, time it all. On one
machine the same config, seed, prompt and attention give bitwise-identical latents, frames and
waveform (TF32 off for the call); CPU results hold for a given torch thread count, left alone here."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from harness.envinfo import resolve_device
from harness.records import StepTiming, TimingRecord
from harness.safe_write import write_step_latents
from harness.tiny_ref2av.config import PipelineConfig
from harness.tiny_ref2av.model import (
    AUDIO_CH,
    VIDEO_CH,
    VOCAB,
    Attention,
    Conditioning,
    SiteHook,
    StepResult,
    TinyRef2AV,
    sample,
    synchronize,
)

# --- the inputs, deterministic and device independent: prompt tokens (byte trigrams hashed by FNV-1a,
# not Python's salted ``hash``), the reference photograph (shipped with scikit-image) and the latent
# targets, closed-form fields that the transformer then perturbs.

PITCH_UNIT = 3.0  # semitones per unit of the pitch channel
PENTATONIC = (0, 2, 4, 7, 9, 12, 14)
PAD_ID = 0
T = TypeVar("T")


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325  # the 64-bit FNV offset basis and prime
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & ((1 << 64) - 1)
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
    size = (height, width)
    return F.interpolate(image[None], size, mode="bilinear", antialias=True, align_corners=False)[0]


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
    from harness.media import write_av

    wall0 = time.perf_counter()
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
            if latents_dir is not None:  # step_NNN.npz: video [t, h, w, C], audio [n, C], the sigmas reached
                t0 = time.perf_counter()
                latents_dir.mkdir(parents=True, exist_ok=True)
                video, audio = (x.detach().float().cpu().numpy() for x in (res.video, res.audio))
                sigmas = {"sigma_video": res.sigma_video, "sigma_audio": res.sigma_audio}
                write_step_latents(latents_dir, res.index, {"video": video, "audio": audio} | sigmas)
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
        codec = {"crf": cfg.crf, "preset": cfg.x264_preset, "lossless_copy": lossless_path}
        copy_s = write_av(
            out_path, decoder.frames(lat_v), audio, fps=cfg.fps, sample_rate=cfg.audio_rate, **codec
        )
        write_s = time.perf_counter() - t0 - copy_s
        stages["vae_decode"] += decoder.seconds
        stages["save"] = write_s - decoder.seconds
        if lossless_path is not None:
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


# --- the 'VAE decode': latents warp and modulate the reference photograph into RGB frames (a viewer ---
# sees it moving, never noise) and drive a tuned oscillator bank into a stereo waveform (float64, CPU).

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
