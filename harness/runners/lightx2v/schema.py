"""The `lightx2v:` block of a scenario: how to run one arm through a LightX2V checkout.

Kept free of heavy imports (no torch, no LightX2V): the scenario loader imports it on every
command. Paths may be absolute or relative to ``root`` (the LightX2V checkout); ``${VAR}`` is
expanded by the loader before validation.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Model folders MiniMax-H3 loads (ref2av reads transformer_ref/ instead of transformer/, both ship).
H3_MODEL_DIRS = (
    "transformer",
    "transformer_ref",
    "text_encoder",
    "tokenizer",
    "processor",
    "vae",
    "audio_vae",
)
# LightX2V's sequence-parallel attention types: they wrap the real backend, so their calls are
# neither the backend under test nor a fallback.
SP_WRAPPERS = ("ulysses", "ulysses-4090", "ring")


class LightX2VBlock(BaseModel):
    """One LightX2V inference per arm, launched with torchrun through the harness's launcher."""

    model_config = ConfigDict(extra="forbid")

    root: str = Field(description="LightX2V checkout (holds lightx2v/infer.py); put first on PYTHONPATH.")
    model_path: str = Field(description="Model folder passed as --model_path.")
    model_cls: str = Field("minimax_h3", description="--model_cls.")
    task: str = Field("ref2av", description="--task.")
    config_json: str = Field(description="Base config JSON, relative to root or absolute; never edited.")
    nproc_per_node: int = Field(1, ge=1, description="torchrun --nproc_per_node (ranks, one GPU each).")
    prompt: str = Field(description="--prompt.")
    negative_prompt: str | None = Field(None, description="--negative_prompt (H3 ignores it).")
    image_path: list[str] = Field(
        default_factory=list, description="Input images (--image_path, comma-joined)."
    )
    audio_path: list[str] = Field(default_factory=list, description="Input audio files (--audio_path).")
    video_path: list[str] = Field(default_factory=list, description="Input videos (--video_path).")
    config_overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="Keys merged over the base config (nested dicts merge key by key); "
        "profile and arm parameters that are not block fields land here too.",
    )
    refiner_attn_type: str | None = Field(
        None,
        description="H3 text-refiner attention; unset: the arm's attn_type (the whole DiT on one backend).",
    )
    torchrun: str | None = Field(
        None, description="torchrun executable; unset: `<python> -m torch.distributed.run`."
    )
    python: str | None = Field(None, description="Interpreter of the ranks; unset: the harness's own.")
    visible_devices: str | None = Field(
        None, description="CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES, e.g. '0,1'; unset: inherited."
    )
    alloc_conf: str | None = Field(
        "expandable_segments:True",
        description="PYTORCH_CUDA_ALLOC_CONF (and PYTORCH_ALLOC_CONF), in the environment before torch starts.",
    )
    platform: str | None = Field(
        None, description="PLATFORM for LightX2V (e.g. amd_rocm); the env block may set it."
    )
    save_name: str = Field("output.mp4", description="File name of the output in the run directory (.mp4).")
    warmup: bool = Field(False, description="Pass --warmup (LightX2V's own warm-up before the measured run).")
    extra_args: list[str] = Field(default_factory=list, description="More LightX2V CLI arguments, verbatim.")
    model_dirs: list[str] | None = Field(
        None, description="Folders the model path must hold; unset: MiniMax-H3's seven for minimax_h3."
    )
    attn_scope: list[str] = Field(
        default_factory=lambda: ["lightx2v.models.networks"],
        description="Module prefixes whose attention instances are the model under test (DiT and refiner); "
        "instances built elsewhere (text encoder, VAE) are counted apart, never reversed, never fallbacks.",
    )
    attn_wrappers: list[str] = Field(
        default_factory=lambda: list(SP_WRAPPERS),
        description="Registered attention types that only wrap another one (sequence parallel).",
    )
    count_ops: dict[str, str] = Field(
        default_factory=dict,
        description="label -> 'module:function': also count calls of these functions in every rank "
        "(e.g. the aiter op behind a backend).",
    )

    @field_validator("save_name")
    @classmethod
    def _mp4_name(cls, v: str) -> str:
        if "/" in v or "\\" in v or not v.endswith(".mp4") or v.startswith("."):
            raise ValueError("save_name must be a plain file name ending in .mp4")
        return v

    @field_validator("count_ops")
    @classmethod
    def _op_refs(cls, v: dict[str, str]) -> dict[str, str]:
        for label, ref in v.items():
            mod, _, attr = ref.partition(":")
            if not mod or not attr:
                raise ValueError(f"count_ops.{label}: expected 'module:function', got {ref!r}")
        return v
