"""Configuration of the embedded ref2av pipeline: one pydantic model (its fields follow MiniMax-H3
Ref2AV where it has a counterpart) and the named presets, small enough for a CPU (``cpu``) or large
enough that attention dominates the DiT step on one GPU (``gpu``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.errors import HarnessError

MIN_DIM = 48  # the residual stream holds a 32-dimensional content subspace plus type embeddings


class PipelineConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: str = "custom"
    # Sampling: N sigma points including the terminal 0 -> N-1 DiT steps (as H3).
    infer_steps: int = Field(4, ge=2, le=1000)
    video_flow_shift: float = Field(12.0, gt=0)
    audio_flow_shift: float = Field(3.0, gt=0)
    # Output media.
    height: int = Field(128, ge=16)
    width: int = Field(224, ge=16)
    frames: int = Field(56, ge=2)
    fps: int = Field(24, ge=1)
    audio_rate: int = Field(32000, ge=8000)
    # H3's video_codec_options (ultrafast, crf 18); media.MediaWriter says why any preset is reproducible.
    crf: int = Field(18, ge=0, le=51)
    x264_preset: Literal[
        "ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow"
    ] = "ultrafast"
    # Transformer.
    heads: int = Field(4, ge=1)
    head_dim: int = Field(64, ge=8)
    depth: int = Field(4, ge=1)
    mlp_ratio: float = Field(4.0, gt=0)
    # Packed sequence [text | audio | video]: token counts per segment.
    text_tokens: int = Field(64, ge=1)
    audio_tokens: int = Field(94, ge=2)
    latent_t: int = Field(8, ge=2)
    latent_h: int = Field(8, ge=2)
    latent_w: int = Field(14, ge=2)
    # How strongly the MLP amplifies small differences (see SENSITIVITY_NOTE in model.py): higher
    # values make attention numerics matter more, too high makes every trajectory chaotic.
    sensitivity: float = Field(50.0, gt=0, le=500)
    # Conditioning and numerics.
    reference: Literal["astronaut", "chelsea"] = "astronaut"
    weight_seed: int = Field(20250807, ge=0)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    dtype: Literal["float32", "bfloat16"] = "float32"
    save_latents: bool = False

    @model_validator(mode="after")
    def _check(self) -> PipelineConfig:
        if self.height % 16 or self.width % 16:
            raise ValueError(f"height/width must be multiples of 16, got {self.height}x{self.width}")
        if self.dim < MIN_DIM:
            raise ValueError(f"heads*head_dim must be at least {MIN_DIM}, got {self.dim}")
        if self.head_dim % 8:
            raise ValueError(f"head_dim must be a multiple of 8 (3D rotary split), got {self.head_dim}")
        if self.latent_t > self.frames:
            raise ValueError(f"latent_t ({self.latent_t}) must not exceed frames ({self.frames})")
        if self.latent_h > self.height or self.latent_w > self.width:
            raise ValueError("latent_h/latent_w must not exceed height/width")
        return self

    @property
    def dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def video_tokens(self) -> int:
        return self.latent_t * self.latent_h * self.latent_w

    @property
    def seq_len(self) -> int:
        return self.text_tokens + self.audio_tokens + self.video_tokens

    @property
    def packed_layout(self) -> dict[str, int]:
        return dict(
            text=self.text_tokens, audio=self.audio_tokens, video=self.video_tokens, total=self.seq_len
        )

    @property
    def dit_steps(self) -> int:
        return self.infer_steps - 1

    @property
    def audio_samples(self) -> int:
        return round(self.frames * self.audio_rate / self.fps)

    def with_overrides(self, overrides: dict[str, Any]) -> PipelineConfig:
        """A copy with ``overrides`` applied and validated; HarnessError names the bad key."""
        known = set(type(self).model_fields)
        if unknown := sorted(str(k) for k in overrides if k not in known):
            raise HarnessError(
                f"pipeline config: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})"
            )
        return load_config({**self.model_dump(), **overrides})


def load_config(data: dict[str, Any]) -> PipelineConfig:
    """Validate a plain mapping (e.g. a run spec's ``pipeline`` params) with a one-line error."""
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc, msg = ".".join(str(p) for p in err.get("loc", ())), err.get("msg", "invalid value")
        if loc:
            raise HarnessError(
                f"pipeline config: bad value for {loc!r}: {msg} (got {err.get('input')!r})"
            ) from None
        raise HarnessError(f"pipeline config: {msg.removeprefix('Value error, ')}") from None


PRESETS: dict[str, PipelineConfig] = {
    # Tests and smoke runs: 16 text + 37 audio + 4x4x7 video tokens, 22 frames of 64x112.
    "tiny": PipelineConfig(preset="tiny", height=64, width=112, frames=22, heads=2, head_dim=32, depth=2,
                           text_tokens=16, audio_tokens=37, latent_t=4, latent_h=4, latent_w=7, device="cpu"),
    # ~1.05k tokens: 64 text + 94 audio (56 frames / 24 fps * 40 latents/s) + 8x8x14 video.
    "cpu": PipelineConfig(preset="cpu", device="cpu"),
    # ~48.7k tokens, 24 heads of 128: attention is most of each DiT step on one GPU. Sensitivity: 50
    # made bf16 trajectories on an H200 nearly chaotic (kv-reversed SDPA moved the latents by 22 %);
    # 30 put every arm at the codec floor. 40 keeps them apart and measurable.
    "gpu": PipelineConfig(preset="gpu", height=768, width=1344, frames=124, heads=24, head_dim=128, depth=6,
                          mlp_ratio=2.0, text_tokens=128, audio_tokens=207, latent_t=12, latent_h=48,
                          latent_w=84, device="cuda", dtype="bfloat16", sensitivity=40.0),
}  # fmt: skip
