"""The LightX2V runner's parameters for one arm: the scenario's block after profile and arm overrides.

``resolve_params(scenario, arm, profile)`` gives a ``LightX2VParams``; the runner stores its
``model_dump(mode="json")`` in ``RunSpec.params`` (what run.json holds and the spec hash covers)
and reads it back with ``LightX2VParams.model_validate(spec.params)``.

* profile and arm parameters: a key that names a ``lightx2v:`` block field replaces it; any
  other key goes into ``config_overrides`` (``3step: {infer_steps: 4}``). Dicts merge key by key.
* ``refiner_attn_type`` (H3's text token refiner) is set to the arm's backend unless the
  scenario sets it: the whole DiT then runs on the backend under test, which is also
  LightX2V's own default when the key is absent.
* paths: ``config_json`` and inputs relative to ``root``; ``model_path`` relative to the
  working directory. All are made absolute here.

The dump is the dict earlier harness versions wrote key for key (fields that are None only in
some runs are left out as they were), so campaigns made before the typed model still resume.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, ValidationError, model_serializer

from harness.errors import HarnessError, ScenarioError
from harness.runners.lightx2v.schema import LightX2VBlock, SyntheticCheckpoint, h3_model_dirs

H3 = "minimax_h3"


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``; nested dicts merge key by key, anything else is replaced."""
    out = dict(base)
    for key, val in over.items():
        if isinstance(val, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], val)
        else:
            out[key] = val
    return out


def absolute_path(path: str, base: str | None = None) -> str:
    """``~`` expanded; a relative path taken from ``base`` (else the working directory)."""
    p = Path(os.path.expanduser(path))
    if not p.is_absolute() and base is not None:
        p = Path(base) / p
    return os.path.abspath(p)


def dit_steps_for(model_cls: str, infer_steps: int | None) -> int | None:
    """H3 counts sigma points including the terminal 0: infer_steps N gives N-1 DiT steps."""
    if infer_steps is None:
        return None
    return infer_steps - 1 if model_cls == H3 else infer_steps


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
        defaults = (
            ("bare", False),
            ("latent_steps", "auto"),
            ("shadow_sageattention", {}),
            ("time_blocks", False),
        )
        for key, default in defaults:
            if data.get(key) == default:
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
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise HarnessError(
            f"lightx2v: run spec params.{loc}: {first['msg']} (re-plan the campaign)"
        ) from None


def effective_block(scenario: Any, arm: Any, profile: str | None) -> LightX2VBlock:
    """The scenario's lightx2v block with the profile's, then the arm's parameters applied."""
    block: LightX2VBlock | None = getattr(scenario, "lightx2v", None)
    if block is None:
        raise ScenarioError(f"scenario {scenario.name}: runner 'lightx2v' needs a 'lightx2v' block")
    data = block.model_dump()
    layers = []
    if profile:
        layers.append((f"profiles.{profile}", (scenario.profiles or {}).get(profile, {})))
    layers.append((f"arms[{arm.name}].overrides", arm.overrides or {}))
    fields = set(LightX2VBlock.model_fields)
    for where, layer in layers:
        for key, val in layer.items():
            if key == "config_overrides":
                if not isinstance(val, dict):
                    raise ScenarioError(
                        f"scenario {scenario.name}: {where}.config_overrides must be a mapping"
                    )
                data["config_overrides"] = deep_merge(data["config_overrides"], val)
            elif key in fields:
                data[key] = val
            else:
                data["config_overrides"] = deep_merge(data["config_overrides"], {key: val})
    try:
        return LightX2VBlock.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ScenarioError(
            f"scenario {scenario.name}: arm {arm.name}: lightx2v.{loc}: {first['msg']} (after profile/arm overrides)"
        ) from None


def resolve_params(scenario: Any, arm: Any, profile: str | None) -> LightX2VParams:
    """One arm's parameters: the block after overrides, its paths absolute, its steps counted."""
    block = effective_block(scenario, arm, profile)
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
    default_dirs = h3_model_dirs(block.task) if on_h3 else ()
    arms = {a.name: a for a in scenario.arms}
    shadow_flavours = {
        name: arms[name].sageattention
        for name in getattr(arm, "shadows", [])
        if name in arms and arms[name].attn_type == "sage_attn2" and arms[name].sageattention != "package"
    }
    return LightX2VParams(
        root=root,
        model_path=absolute_path(block.model_path),
        model_cls=block.model_cls,
        task=block.task,
        config_json=config_json,
        base_config_sha256=base_sha,
        nproc_per_node=block.nproc_per_node,
        prompt=block.prompt,
        negative_prompt=block.negative_prompt,
        image_path=[absolute_path(p, root) for p in block.image_path],
        audio_path=[absolute_path(p, root) for p in block.audio_path],
        video_path=[absolute_path(p, root) for p in block.video_path],
        config_overrides=overrides,
        infer_steps=infer_steps,
        dit_steps=dit_steps_for(block.model_cls, infer_steps),
        attention=attention,
        sageattention=flavour if arm.attn_type == "sage_attn2" else None,
        torchrun=block.torchrun,
        python=block.python,
        visible_devices=block.visible_devices,
        alloc_conf=block.alloc_conf,
        platform=block.platform,
        save_name=block.save_name,
        warmup=block.warmup,
        extra_args=list(block.extra_args),
        model_dirs=list(block.model_dirs if block.model_dirs is not None else default_dirs),
        attn_scope=list(block.attn_scope),
        attn_wrappers=list(block.attn_wrappers),
        count_ops=dict(getattr(arm, "count_ops", None) or {}),
        synthetic_checkpoint=block.synthetic_checkpoint,
        reference_short_edge=block.reference_short_edge,
        requires=["adaln_cache"] if merged.get("use_adaln_cache") else [],
        latent_steps=block.latent_steps,
        shadow_sageattention=shadow_flavours,
        time_blocks=block.time_blocks,
    )
