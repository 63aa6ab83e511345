"""The LightX2V runner's parameters for one arm (``resolve_params``): the block after overrides, its
paths absolute, H3's refiner on the arm's backend unless set. ``RunSpec.params`` holds the dump,
key for key as earlier versions wrote it, so campaigns made before the typed model still resume."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, ValidationError, model_serializer

from harness.errors import HarnessError, ScenarioError
from harness.runners import common
from harness.runners.common import absolute_path
from harness.runners.lightx2v.schema import H3_COMPONENT_DIRS, SyntheticCheckpoint, h3_dit_dir
from harness.scenario.parts import deep_merge

H3 = "minimax_h3"
INPUTS = ("image_path", "audio_path", "video_path")  # input files, relative to root
# Block fields a run's parameters take as they are.
COPIED = (
    "model_cls task nproc_per_node prompt negative_prompt torchrun python visible_devices alloc_conf platform "
    "save_name warmup extra_args attn_scope attn_wrappers synthetic_checkpoint reference_short_edge "
    "latent_steps time_blocks"
).split()


def read_base_config(path: str) -> dict[str, Any]:
    """The base config JSON of the LightX2V checkout (a one-line HarnessError when unusable)."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise HarnessError(f"lightx2v.config_json {path}: not found") from None
    except (OSError, ValueError) as err:
        raise HarnessError(f"lightx2v.config_json {path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise HarnessError(f"lightx2v.config_json {path}: expected a JSON object")
    return data


class AttentionSites(BaseModel):
    """The backend of every attention site LightX2V builds (recorded for the reports)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attn_type: str
    refiner_attn_type: str
    # MiniMax-H3 only: its text encoder's and VAE's attention (LightX2V's defaults unless set).
    qwen3vl_attn_type: str | None = None
    vae_attn_type: str | None = None

    @model_serializer(mode="wrap")
    def _without_absent_sites(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Sites a model does not have are absent, not null: the dict earlier versions hashed.
        return {k: v for k, v in handler(self).items() if v is not None}


class LightX2VParams(BaseModel):
    """Everything the runner needs for one arm, resolved (absolute paths, merged overrides)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    root: str
    model_path: str
    model_cls: str
    task: str
    config_json: str
    base_config_sha256: str | None  # None when planned away from the target machine
    nproc_per_node: int
    prompt: str
    negative_prompt: str | None
    image_path: list[str]
    audio_path: list[str]
    video_path: list[str]
    config_overrides: dict[str, Any]  # carries attn_type (and H3's refiner_attn_type)
    infer_steps: int | None
    dit_steps: int | None
    attention: AttentionSites
    sageattention: str | None  # which `sageattention` serves sage_attn2; None for other backends
    torchrun: str | None
    python: str | None
    visible_devices: str | None
    alloc_conf: str | None
    platform: str | None
    save_name: str
    warmup: bool
    extra_args: list[str]
    model_dirs: list[str]
    attn_scope: list[str]
    attn_wrappers: list[str]
    count_ops: dict[str, str]
    synthetic_checkpoint: SyntheticCheckpoint | None
    reference_short_edge: int | None
    # LightX2V features the resolved config relies on; the probe refuses a checkout without them.
    requires: list[str]
    # The overhead tool's baseline: LightX2V run uninstrumented (no counts, no rank logs).
    bare: bool = False
    latent_steps: str = "auto"  # DiT steps whose latents the ranks save (latents.parse_steps)
    # Shadows that stand for a sage_attn2 arm served by another `sageattention`: name -> flavour.
    shadow_sageattention: dict[str, str] = {}
    time_blocks: bool = False  # time every DiT block (layers.json)

    @model_serializer(mode="wrap")
    def _defaults_left_out(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out at their defaults, so the spec hash of every earlier run is what it was.
        data = handler(self)
        for key in ("bare", "latent_steps", "shadow_sageattention", "time_blocks"):
            if data.get(key) == type(self).model_fields[key].default:
                data.pop(key, None)
        return data

    def resolved_config(self, base: dict[str, Any]) -> dict[str, Any]:
        """The config LightX2V gets: base, then the overrides (attn_type and refiner_attn_type too)."""
        return deep_merge(base, self.config_overrides)

    @property
    def on_h3(self) -> bool:
        return self.model_cls == H3


def params_of(spec: Any) -> LightX2VParams:
    """A run spec's parameters, typed; a one-line HarnessError when they are not the runner's."""
    if "root" not in spec.params:
        raise HarnessError("lightx2v: the run spec carries no lightx2v parameters (re-plan the campaign)")
    try:
        return LightX2VParams.model_validate(spec.params)
    except ValidationError as err:
        loc, msg = common.first_error(err)
        raise HarnessError(f"lightx2v: run spec params.{loc}: {msg} (re-plan the campaign)") from None


def resolve_params(scenario: Any, arm: Any, profile: str | None) -> LightX2VParams:
    """One arm's parameters: the block after overrides, its paths absolute, its steps counted."""
    block = common.effective_block(scenario, arm, profile, "lightx2v", "config_overrides", deep_merge)
    where = f"scenario {scenario.name}: arm {arm.name}"
    overrides = dict(block.config_overrides)
    if "attn_type" in overrides:
        raise ScenarioError(f"{where}: set attn_type on the arm, not in lightx2v config_overrides")
    flavour = getattr(arm, "sageattention", "package")
    if flavour != "package" and arm.attn_type != "sage_attn2":
        raise ScenarioError(f"{where}: sageattention: {flavour} only applies to attn_type sage_attn2")
    overrides["attn_type"] = arm.attn_type
    refiner = block.refiner_attn_type or overrides.get("refiner_attn_type") or arm.attn_type
    on_h3 = block.model_cls == H3
    if on_h3:
        overrides["refiner_attn_type"] = refiner
    root = absolute_path(block.root)
    config_json = absolute_path(block.config_json, root)
    base: dict[str, Any] | None
    try:
        base = read_base_config(config_json)
        base_sha = hashlib.sha256(Path(config_json).read_bytes()).hexdigest()
    except HarnessError:  # planning away from the target machine: pre-flight reports it
        base, base_sha = None, None
    merged = deep_merge(base or {}, overrides)
    infer_steps = merged.get("infer_steps")
    if not isinstance(infer_steps, int) or isinstance(infer_steps, bool):
        infer_steps = None
    attention = AttentionSites(
        attn_type=arm.attn_type,
        refiner_attn_type=refiner,
        # LightX2V's defaults for H3's other attention sites
        qwen3vl_attn_type=merged.get("qwen3vl_attn_type", "torch_sdpa") if on_h3 else None,
        vae_attn_type=merged.get("vae_attn_type", "torch_sdpa") if on_h3 else None,
    )
    default_dirs = (h3_dit_dir(block.task), *H3_COMPONENT_DIRS) if on_h3 else ()  # what the task loads
    arms = {a.name: a for a in scenario.arms}
    shadow_flavours = {
        name: arms[name].sageattention
        for name in getattr(arm, "shadows", [])
        if name in arms and arms[name].attn_type == "sage_attn2" and arms[name].sageattention != "package"
    }
    return LightX2VParams(
        **{key: getattr(block, key) for key in COPIED},
        root=root,
        model_path=absolute_path(block.model_path),
        config_json=config_json,
        base_config_sha256=base_sha,
        **{key: [absolute_path(p, root) for p in getattr(block, key)] for key in INPUTS},
        config_overrides=overrides,
        infer_steps=infer_steps,
        # H3 counts sigma points including the terminal 0: infer_steps N gives N-1 DiT steps.
        dit_steps=infer_steps - 1 if on_h3 and infer_steps is not None else infer_steps,
        attention=attention,
        sageattention=flavour if arm.attn_type == "sage_attn2" else None,
        model_dirs=list(block.model_dirs if block.model_dirs is not None else default_dirs),
        count_ops=dict(getattr(arm, "count_ops", None) or {}),
        requires=["adaln_cache"] if merged.get("use_adaln_cache") else [],
        shadow_sageattention=shadow_flavours,
    )
