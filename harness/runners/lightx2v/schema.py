"""What a `runner: lightx2v` scenario adds (``SCENARIO_PART``): the `lightx2v:` block, its arm fields and
what its launcher can apply. No heavy imports: the scenario loader imports it on every command.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.runners.lightx2v.latents import parse_steps
from harness.runners.lightx2v.rank_env import LIGHTX2V_CORE, SP_WRAPPERS, lightx2v_types, options_problem
from harness.scenario.model import Strict
from harness.scenario.parts import FieldProblem, ScenarioPart

# Model folders MiniMax-H3 loads besides its DiT (ref2av reads transformer_ref/, the other tasks transformer/).
H3_COMPONENT_DIRS = ("text_encoder", "tokenizer", "processor", "vae", "audio_vae")


def h3_dit_dir(task: str) -> str:
    return "transformer_ref" if task == "ref2av" else "transformer"


class SyntheticCheckpoint(BaseModel):
    """A checkpoint the harness writes (random weights, tiny sizes) to check the chain end to end."""

    model_config = ConfigDict(extra="forbid")

    preset: Literal["tiny", "small", "prod"] = Field(
        "tiny",
        description="tiny: CPU-sized DiT; small: GPU-sized DiT; prod: the released width (hidden 5376, "
        "56 heads x 128, FFN 14336), 2 DiT layers + 1 refiner layer.",
    )
    seed: int = Field(0, ge=0, description="Weights, tokenizer and configs are a function of the seed.")


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
        None,
        description="Folders the model path must hold; unset: what the MiniMax-H3 task loads "
        "(ref2av: transformer_ref, text_encoder, tokenizer, processor, vae, audio_vae).",
    )
    synthetic_checkpoint: SyntheticCheckpoint | None = Field(
        None,
        description="model_path is a synthetic checkpoint the harness writes there when missing; "
        "LightX2V's released-size checks are relaxed for it, never for other weights.",
    )
    reference_short_edge: int | None = Field(
        None,
        ge=32,
        description="ref2av reference-image short edge in pixels (LightX2V: 2048); only with a "
        "synthetic checkpoint, to keep a CPU run short.",
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
    count_ops: dict[str, str] | None = Field(
        None,
        description="Not here: count_ops is per arm (arms[].count_ops), for the arms that must hit the op.",
    )
    latent_steps: str = Field(
        "auto",
        description="DiT steps whose latents every rank saves (latents/step_XXX.npz, the per-step divergence "
        "table): all, none, a comma list (1,15,29) or auto: every step of a run of at most 10 DiT steps, "
        "else step 1, every 5th step and the last.",
    )

    time_blocks: bool = Field(
        False,
        description="Time every DiT block of the measured steps, the device synchronised around each "
        "(layers.json: a layer's seconds per step at the run's sequence length, a step of the released "
        "50 layers extrapolated from it); the syncs cost little but are not free.",
    )

    @field_validator("latent_steps")
    @classmethod
    def _steps(cls, v: str) -> str:
        parse_steps(v)  # its ValueError is the field's one line
        return v.strip()

    @field_validator("save_name")
    @classmethod
    def _mp4_name(cls, v: str) -> str:
        if "/" in v or "\\" in v or not v.endswith(".mp4") or v.startswith("."):
            raise ValueError("save_name must be a plain file name ending in .mp4")
        return v

    @field_validator("count_ops")
    @classmethod
    def _per_arm(cls, v: dict[str, str] | None) -> None:
        if v:
            raise ValueError(
                "count_ops is per arm: set it on the arms that must hit the op (arms[].count_ops); "
                "an op counted on every arm makes the reference and noise floor invalid"
            )
        return None

    @model_validator(mode="after")
    def _synthetic_only(self) -> LightX2VBlock:
        if self.reference_short_edge is not None and self.synthetic_checkpoint is None:
            raise ValueError("reference_short_edge is only allowed with synthetic_checkpoint")
        return self


class LightX2VArmFields(Strict):
    """Arm fields of the lightx2v runner."""

    sageattention: Literal["package", "aiter_shim", "emulator", "sageattention2", "sageattention1"] = Field(
        "package",
        description="lightx2v runner: which `sageattention` serves sage_attn2: thu-ml's package as the "
        "environment has it, one of the pinned installs of `make sageattention` (sageattention2: "
        "SageAttention2 d1a57a5, whose sageattn_qk_int8_pv_fp16_triton sage_attn2 then calls on every GPU; "
        "sageattention1: 1.0.6), the aiter op behind the package's API (aiter_shim), or the harness's "
        "sage_emul_thuml emulation (emulator: any device, the CPU included).",
    )
    count_ops: dict[str, str] = Field(
        default_factory=dict,
        description="lightx2v runner: label -> 'module:function' this arm must call (e.g. the aiter op "
        "behind its backend), counted on every rank; an absent op or zero calls makes the arm invalid.",
    )

    @field_validator("count_ops")
    @classmethod
    def _op_refs(cls, v: dict[str, str]) -> dict[str, str]:
        for label, ref in v.items():
            mod, _, attr = ref.partition(":")
            if not mod or not attr:
                raise ValueError(f"count_ops.{label}: expected 'module:function', got {ref!r}")
        return v


def check_perturbations(scenario: Any) -> None:
    """The LightX2V launcher reverses K/V; chunked K/V and a schedule's exact options are the harness's
    own attention chain's (a schedule's exact backend is LightX2V's class); backend options go to a
    harness backend LightX2V lacks (planted_error), which the launcher serves, never to LightX2V's."""
    block = scenario.runner_block()
    own = lightx2v_types(str(block.root)) if block is not None else LIGHTX2V_CORE
    for i, a in enumerate(scenario.arms):
        if a.kv_chunks > 1 and (refused := a.harness_only("the LightX2V launcher")):
            raise FieldProblem(("arms", i, refused[0]), f"arm {a.name}: {refused[1]}")
        if why := options_problem(a.attn_type, a.attn_options, own):
            raise FieldProblem(("arms", i, "attn_options"), f"arm {a.name}: {why}")
        if a.schedule is not None and a.schedule.exact_options:
            raise FieldProblem(
                ("arms", i, "schedule", "exact_options"),
                f"arm {a.name}: the LightX2V launcher serves a schedule's exact steps with LightX2V's own "
                f"{a.schedule.exact} class, which takes no options",
            )


def source_repos(block: Any) -> dict[str, str]:
    return {"lightx2v": block.root}


SCENARIO_PART = ScenarioPart(
    block="lightx2v",
    model=LightX2VBlock,
    required=True,
    arm_fields=LightX2VArmFields,
    check=check_perturbations,
    repos=source_repos,
    insitu=True,  # the launcher measures shadows and routes schedules (serve.CallPath)
)
