"""The `diffusers:` block of a scenario and the diffusers runner's arm rules (``check_arm``). No torch
or diffusers at import time: the dispatcher's names are read from diffusers' source, not imported."""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.envinfo import package_version
from harness.registry import did_you_mean
from harness.scenario.parts import FieldProblem, ScenarioPart

ENUM_CLASS = "AttentionBackendName"  # in diffusers/models/attention_dispatch.py
DIFFUSERS_ENV_JSON = "diffusers_env.json"  # what a run's interpreter had (launch.DiffusersEnv)


@dataclass(frozen=True)
class PipelineKind:
    """One diffusers pipeline the runner drives: its class and what it needs and makes."""

    cls: str
    family: str  # "ltx2" | "wan": which synthetic models serve it, how its outputs are read
    needs_image: bool
    audio: bool


PIPELINES: dict[str, PipelineKind] = {
    "ltx2_t2v": PipelineKind("LTX2Pipeline", "ltx2", needs_image=False, audio=True),
    "ltx2_i2v": PipelineKind("LTX2ImageToVideoPipeline", "ltx2", needs_image=True, audio=True),
    "wan_t2v": PipelineKind("WanPipeline", "wan", needs_image=False, audio=False),
    "wan_i2v": PipelineKind("WanImageToVideoPipeline", "wan", needs_image=True, audio=False),
}
# Synthetic models the harness writes, and the pipelines each one serves.
SYNTHETIC_MODELS: dict[str, tuple[str, ...]] = {
    "ltx2": ("ltx2_t2v", "ltx2_i2v"),
    "wan2.1_t2v": ("wan_t2v",),
    "wan2.2_t2v": ("wan_t2v",),  # two experts (transformer, transformer_2) split by boundary_ratio
    "wan2.1_i2v": ("wan_i2v",),  # with a CLIP image encoder
    "wan2.2_i2v": ("wan_i2v",),  # two experts, no image encoder
}
DEFAULT_SYNTHETIC = {"ltx2_t2v": "ltx2", "ltx2_i2v": "ltx2", "wan_t2v": "wan2.1_t2v", "wan_i2v": "wan2.1_i2v"}
# Arguments of every pipeline call, as the block (and the spec's ``pipeline`` parameters) name them.
CALL_KEYS = "prompt negative_prompt height width num_frames num_inference_steps guidance_scale".split()
# Arguments of the pipeline call the harness sets itself (or takes from a block field).
RESERVED_CALL_KWARGS = (
    *CALL_KEYS, "image", "frame_rate", "max_sequence_length", "generator", "latents", "output_type",
    "return_dict", "callback_on_step_end", "callback_on_step_end_tensor_inputs",
)  # fmt: skip


class SyntheticPipeline(BaseModel):
    """A pipeline folder the harness writes (random weights, tiny sizes) to check the chain end to end."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(
        None,
        description="Which synthetic model: ltx2, wan2.1_t2v, wan2.2_t2v, wan2.1_i2v or wan2.2_i2v "
        "(default: ltx2 for the LTX-2 pipelines, wan2.1_t2v / wan2.1_i2v for Wan).",
    )
    preset: Literal["tiny", "small"] = Field(
        "tiny", description="tiny: CPU-sized; small: GPU-sized (head dims 128/64, the released VAE ratios)."
    )
    seed: int = Field(0, ge=0, description="Weights, tokenizer and configs are a function of the seed.")

    @field_validator("model")
    @classmethod
    def _known(cls, v: str | None) -> str | None:
        if v is not None and v not in SYNTHETIC_MODELS:
            raise ValueError(f"unknown synthetic model {v!r} (one of: {', '.join(SYNTHETIC_MODELS)})")
        return v


class DiffusersBlock(BaseModel):
    """One diffusers pipeline call per arm, in a child process, through diffusers' attention dispatcher."""

    model_config = ConfigDict(extra="forbid")

    pipeline: Literal["ltx2_t2v", "ltx2_i2v", "wan_t2v", "wan_i2v"] = Field(
        description="LTX-2 (video and audio) or Wan 2.1/2.2, text-to-video or image-to-video."
    )
    model_path: str = Field(
        description="A diffusers pipeline folder (model_index.json), loaded by from_pretrained."
    )
    synthetic_checkpoint: SyntheticPipeline | None = Field(
        None, description="model_path is a synthetic pipeline the harness writes there when it is missing."
    )
    prompt: str = Field(description="The prompt.")
    negative_prompt: str = Field("", description="The negative prompt (used with guidance_scale > 1).")
    image_path: str | None = Field(None, description="The conditioning image of an image-to-video pipeline.")
    height: int = Field(ge=16, description="Output height in pixels.")
    width: int = Field(ge=16, description="Output width in pixels.")
    num_frames: int = Field(ge=1, description="Output frames (LTX-2: 8n+1, Wan: 4n+1 at the released VAEs).")
    num_inference_steps: int = Field(ge=1, description="Sampler steps, one DiT step each.")
    guidance_scale: float = Field(
        1.0, description="Classifier-free guidance (1: none, one DiT call per step)."
    )
    frame_rate: float = Field(24.0, gt=0, description="fps of the mp4 (LTX-2 also conditions on it).")
    max_sequence_length: int | None = Field(
        None, ge=1, description="Text tokens (unset: the pipeline's default)."
    )
    call_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="More arguments of the pipeline call, verbatim (e.g. stg_scale); profile and arm "
        "parameters that are not block fields land here too.",
    )
    device: str = Field("auto", description="auto, cpu or cuda[:N] (auto: a GPU where torch sees one).")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="Weights and activations: auto is bfloat16 on a GPU, float32 on a CPU."
    )
    save_latents: bool = Field(True, description="Save the latents after every step (the trajectory plots).")
    drop_trivial_masks: bool = Field(
        True,
        description="A backend that refuses attention masks (diffusers' _native_flash, flash, sage raise on any) "
        "gets a call whose mask masks nothing (LTX-2's text mask after its registers) without it; checked "
        "on the device per such call and counted. A mask that masks something is never dropped.",
    )
    python: str | None = Field(None, description="Interpreter of the run; unset: the harness's own.")
    crf: int = Field(18, ge=0, le=51, description="x264 quality of the mp4.")
    x264_preset: str = Field("ultrafast", description="x264 preset of the mp4.")
    lossless: bool = Field(
        True,
        description="Also write output_lossless.mkv (FFV1 RGB + float PCM): pixel and audio metrics are then "
        "taken before compression; false: on output.mp4 (H.264 + AAC), the codec's error in them.",
    )

    @field_validator("call_kwargs")
    @classmethod
    def _not_reserved(cls, v: dict[str, Any]) -> dict[str, Any]:
        if taken := sorted(set(v) & set(RESERVED_CALL_KWARGS)):
            raise ValueError(
                f"call_kwargs {', '.join(taken)}: set by the harness or by a diffusers block field, not here"
            )
        return v

    @model_validator(mode="after")
    def _consistent(self) -> DiffusersBlock:
        kind = PIPELINES[self.pipeline]
        if kind.needs_image and not self.image_path:
            raise ValueError(f"pipeline {self.pipeline} needs image_path (the conditioning image)")
        if not kind.needs_image and self.image_path:
            raise ValueError(f"pipeline {self.pipeline} takes no image_path (text-to-video)")
        model = self.synthetic_model
        if model is not None and self.pipeline not in SYNTHETIC_MODELS[model]:
            serves = ", ".join(SYNTHETIC_MODELS[model])
            raise ValueError(f"synthetic_checkpoint.model {model} serves {serves}, not {self.pipeline}")
        return self

    @property
    def synthetic_model(self) -> str | None:
        if self.synthetic_checkpoint is None:
            return None
        return self.synthetic_checkpoint.model or DEFAULT_SYNTHETIC[self.pipeline]


@functools.lru_cache(maxsize=4)
def _names_in(path: str) -> tuple[str, ...] | None:
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    body = next((n.body for n in tree.body if isinstance(n, ast.ClassDef) and n.name == ENUM_CLASS), [])
    values = (getattr(item.value, "value", None) for item in body if isinstance(item, ast.Assign))
    return tuple(v for v in values if isinstance(v, str)) or None


def dispatcher_names() -> list[str] | None:
    """The dispatcher's backend names (sorted), or None when diffusers is not installed or unreadable."""
    spec = importlib.util.find_spec("diffusers")  # a top-level lookup imports nothing
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "models" / "attention_dispatch.py"
        if path.is_file():
            names = _names_in(str(path))
            return sorted(names) if names else None
    return None


def check_arm(arm: Any) -> tuple[str, str] | None:
    """(arm field, one line) for an arm's first problem, or None: ``attn_type`` names a dispatcher or
    a harness backend; what the dispatcher's own backends cannot take is refused before anything runs."""
    from harness.attention.registry import BACKENDS

    name = arm.attn_type
    ours = BACKENDS.names()
    theirs = dispatcher_names()
    if theirs is not None and name in theirs and name in ours:
        return "attn_type", f"{name!r} names both a diffusers dispatcher backend and a harness backend"
    if name in ours:
        accepted = BACKENDS.get(name).default_options
        if unknown := sorted(set(arm.attn_options) - set(accepted)):
            return "attn_options", (
                f"harness backend {name!r} has no option(s) {', '.join(unknown)} "
                f"(accepted: {', '.join(sorted(accepted)) or 'none'})"
            )
        return None
    if theirs is None:  # no diffusers here: the pre-flight on the machine that runs it decides
        return None
    if name not in theirs:
        return "attn_type", (
            f"unknown attention backend {name!r}{did_you_mean(name, [*theirs, *ours])} (diffusers "
            f"{package_version('diffusers') or '?'}'s dispatcher has: {', '.join(theirs)}; harness backends: "
            f"{', '.join(ours)})"
        )
    return arm.harness_only(f"dispatcher backend {name!r}")


def check_arms(scenario: Any) -> None:
    """The scenario core's check: the first arm ``check_arm`` refuses, located for its line number."""
    for i, arm in enumerate(scenario.arms):
        if problem := check_arm(arm):
            raise FieldProblem(("arms", i, problem[0]), problem[1])


SCENARIO_PART = ScenarioPart(block="diffusers", model=DiffusersBlock, required=True, check=check_arms)
