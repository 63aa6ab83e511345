"""The LightX2V pre-flight: one line saying why this arm cannot run here, or None. Cheap checks
first, then the probe (``probe.py``) in the ranks' interpreter and environment.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.errors import HarnessError
from harness.records import RunSpec
from harness.runners import common
from harness.runners.common import ProbeBatch, not_found, probe_output
from harness.runners.lightx2v.command import build_env, probe_command, probe_process, probe_question
from harness.runners.lightx2v.params import H3, INPUTS, LightX2VParams, read_base_config
from harness.runners.lightx2v.rank_env import (
    SYNTHETIC_MARKER,
    lightx2v_types,
    options_problem,
    pinned_missing,
    read_marker,
)
from harness.runners.lightx2v.schema import h3_dit_dir

H3_FRAMES = (124, 362)  # 17n+5 frame counts for 5..15 s at 24 fps (LightX2V's packing.py)
PROBE_TIMEOUT_S = 300.0


class ProbeResult(BaseModel):
    """What the probe said: ``ok``, the one-line ``reason`` when not, and what it found (``facts``)."""

    model_config = ConfigDict(frozen=True)

    ok: bool = False
    reason: str | None = None
    facts: dict[str, Any] = Field(default_factory=dict)


def check_geometry(model_cls: str, config: dict[str, Any], nproc: int) -> str | None:
    """LightX2V's H3 rules and the parallel layout, from the resolved config (one line or None)."""
    parallel = config.get("parallel")
    if isinstance(parallel, dict) and parallel:
        size = math.prod(
            int(parallel.get(key, 1) or 1) for key in ("tensor_p_size", "seq_p_size", "cfg_p_size")
        )
        if size != nproc:
            return f"config parallel sizes multiply to {size} but nproc_per_node is {nproc}"
    elif nproc > 1:
        return f"nproc_per_node {nproc} needs a 'parallel' block in the config (e.g. tensor_p_size: {nproc})"
    if model_cls != H3:
        return None
    for key in ("target_video_length", "target_height", "target_width", "infer_steps"):
        if not isinstance(config.get(key), int) or isinstance(config.get(key), bool):
            return f"config {key}: expected an integer, got {config.get(key)!r}"
    frames = config["target_video_length"]
    if (frames - 5) % 17:
        lo = (frames - 5) // 17 * 17 + 5
        return f"target_video_length {frames}: MiniMax-H3 needs 17n+5 frames (nearest: {lo} or {lo + 17})"
    if not H3_FRAMES[0] <= frames <= H3_FRAMES[1]:
        return f"target_video_length {frames}: MiniMax-H3 takes {H3_FRAMES[0]}..{H3_FRAMES[1]} frames (5-15 s at 24 fps)"
    h, w = config["target_height"], config["target_width"]
    if h % 32 or w % 32:
        return f"target_height x target_width {h}x{w}: MiniMax-H3 needs multiples of 32"
    if config["infer_steps"] < 2:
        return f"infer_steps {config['infer_steps']}: MiniMax-H3 runs infer_steps-1 DiT steps, so at least 2"
    for key in ("lazy_load", "unload_modules"):
        if config.get(key):
            return f"config {key}: MiniMax-H3 does not implement it"
    return None


def synthetic_problem(params: LightX2VParams) -> str | None:
    """Why the model folder cannot be (or become) the scenario's synthetic checkpoint (which ``params``
    names: both callers check), or None."""
    wanted, model = params.synthetic_checkpoint, Path(params.model_path)
    marker = read_marker(model)
    have = None if marker is None else {"preset": marker.get("preset"), "seed": marker.get("seed")}
    asked = {"preset": wanted.preset, "seed": wanted.seed}
    nonempty = model.is_dir() and any(model.iterdir())
    return common.synthetic_problem(
        "lightx2v.model_path", model, "synthetic checkpoint", SYNTHETIC_MARKER, have, asked, nonempty
    )


def model_folder_problem(params: LightX2VParams) -> str | None:
    """Why the model folder is not what the task loads (a synthetic one prepare writes is fine)."""
    model = Path(params.model_path)
    if params.synthetic_checkpoint is not None:
        if problem := synthetic_problem(params):
            return problem
        if read_marker(model) is None:
            return None  # prepare writes it; its folders are LightX2V's by construction
    if not model.is_dir():
        return f"lightx2v.model_path {model}: not a folder"
    if lacking := [d for d in params.model_dirs if not (model / d).is_dir()]:
        return f"lightx2v.model_path {model}: missing folder(s) {', '.join(lacking)} (needs {', '.join(params.model_dirs)})"
    if params.on_h3:
        part = h3_dit_dir(params.task)
        if not (model / part / "config.json").is_file():
            return f"lightx2v.model_path {model}: {part}/config.json not found ({params.task} loads {part})"
    return None


def inputs_problem(params: LightX2VParams) -> str | None:
    for key in INPUTS:
        for path in getattr(params, key):
            if not Path(path).is_file():
                return f"lightx2v.{key} {path}: not found"
    if params.on_h3 and params.task == "ref2av" and not (params.image_path or params.video_path):
        return "lightx2v.image_path: ref2av needs at least one reference image or video"
    return None


def launchers_problem(params: LightX2VParams, env: dict[str, str]) -> str | None:
    level = env.get("PROFILING_DEBUG_LEVEL", "0")
    if not level.isdigit() or int(level) < 1:
        return f"PROFILING_DEBUG_LEVEL={level}: LightX2V logs no step times below 1 (the harness sets 2)"
    for name, exe in (("torchrun", params.torchrun), ("python", params.python)):
        if not_found(exe):
            return f"lightx2v.{name} {exe}: not found"
    return None


# The questions a plan will ask, by probe process (interpreter, sageattention, plugins, environment).
PROBES = ProbeBatch()


def _group_and_question(
    params: LightX2VParams, spec: RunSpec, env: dict[str, str]
) -> tuple[tuple, str, dict]:
    question = probe_question(params, spec)
    group = (tuple(probe_process(params, spec)), tuple(sorted(env.items())))
    return group, json.dumps(question, sort_keys=True), question


def expect_probes(items: list[tuple[LightX2VParams, RunSpec]]) -> None:
    """The runs a plan will pre-flight, asked together (``run_probe``); they replace an earlier plan's."""
    PROBES.pending.clear()
    for params, spec in items:
        PROBES.expect(*_group_and_question(params, spec, build_env(params, spec)))


def run_probe(params: LightX2VParams, spec: RunSpec, env: dict[str, str]) -> ProbeResult:
    """The probe's answer for one arm; planned arms sharing its process are answered by the same probe."""

    def ask(questions: list[dict]) -> list[ProbeResult]:
        return probe_answers(probe_command(params, spec, questions), env, len(questions))

    return PROBES.answer(*_group_and_question(params, spec, env), ask)


def probe_answers(command: list[str], env: dict[str, str], n: int) -> list[ProbeResult]:
    """Run one probe process for ``n`` questions: its answers in order, or the same failure for all."""
    found, why = probe_output(command, env, PROBE_TIMEOUT_S, "{")
    try:
        answers = [ProbeResult.model_validate(a) for a in found["answers"]]
    except (KeyError, TypeError, ValueError):  # no answer (None), or not the probe's
        answers = []
    return answers if len(answers) == n else [ProbeResult(ok=False, reason=why)] * n


def preflight_reason(params: LightX2VParams, spec: RunSpec) -> tuple[str | None, ProbeResult | None]:
    """Why the arm cannot run here (or None), and the probe's result; FrameworkUnavailable (exit 3)."""
    if not (Path(params.root) / "lightx2v" / "infer.py").is_file():
        return (
            f"lightx2v.root {params.root}: lightx2v/infer.py not found "
            "(point it, e.g. LIGHTX2V_ROOT, at a LightX2V checkout)"
        ), None
    try:
        config = params.resolved_config(read_base_config(params.config_json))
    except HarnessError as err:
        return str(err), None
    env = build_env(params, spec)
    problem = (
        (f"sage_attn2: {missing}" if (missing := pinned_missing(params.sageattention)) else None)
        # the checkout's own classes, now that its root is known: options reach harness backends only
        or options_problem(spec.attn_type, spec.attn_options, lightx2v_types(params.root))
        or model_folder_problem(params)
        or inputs_problem(params)
        or check_geometry(params.model_cls, config, params.nproc_per_node)
        or launchers_problem(params, env)
    )
    if problem:
        return problem, None
    result = run_probe(params, spec, env)
    common.check_framework("LightX2V", result.facts, result.reason, params.python)
    if not result.ok:
        return str(result.reason or "pre-flight probe failed"), result
    return None, result
