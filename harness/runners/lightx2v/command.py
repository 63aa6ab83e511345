"""The exact processes of one LightX2V arm, pure functions of the parameters, spec and run directory:

torchrun --standalone --nproc_per_node=N -m harness.runners.lightx2v.launch <launcher args>
    -- --model_cls .. --task .. --model_path .. --config_json <run_dir>/config.json ..
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.records import RunSpec
from harness.runners.common import HARNESS_IMPORT_ROOT, plugin_backends, plugins_arg, search_path
from harness.runners.lightx2v.params import INPUTS, LightX2VParams
from harness.runners.lightx2v.rank_env import arm_served, flavour_folder

LAUNCH_MODULE = "harness.runners.lightx2v.launch"
PROBE_MODULE = "harness.runners.lightx2v.probe"
RESOLVED_CONFIG = "config.json"


def infer_args(params: LightX2VParams, spec: RunSpec, run_dir: Path) -> list[str]:
    """The arguments of ``python -m lightx2v.infer`` for one arm (what LightX2V's own parser reads)."""
    run_dir = Path(os.path.abspath(run_dir))
    infer = [
        "--model_cls", params.model_cls,
        "--task", params.task,
        "--model_path", params.model_path,
        "--config_json", str(run_dir / RESOLVED_CONFIG),
        "--prompt", params.prompt,
    ]  # fmt: skip
    if params.negative_prompt:
        infer += ["--negative_prompt", params.negative_prompt]
    for key in INPUTS:  # LightX2V's flags of the same names
        if getattr(params, key):
            infer += [f"--{key}", ",".join(getattr(params, key))]
    infer += ["--save_result_path", str(run_dir / params.save_name), "--seed", str(spec.seed)]
    if params.warmup:
        infer.append("--warmup")
    return infer + list(params.extra_args)


def plugin_args(spec: RunSpec) -> list[str]:
    """``--plugins``: the spec's plugins as planned (path, sha256, what they register)."""
    return ["--plugins", plugins_arg(spec.plugins)] if spec.plugins else []


def harness_served(params: LightX2VParams, spec: RunSpec) -> list[str]:
    """The harness's own backends the arm names that LightX2V lacks (a plugin's come with ``--plugins``)."""
    plugins = set(plugin_backends(spec.plugins))
    return [n for n in arm_served(spec, params) if n not in plugins]


def repeated(flag: str, values: Iterable[str]) -> list[str]:  # ``flag`` before each of ``values``
    return [item for value in values for item in (flag, value)]


def launcher_args(params: LightX2VParams, spec: RunSpec, run_dir: Path) -> list[str]:
    """The launcher's own flags (``--bare``: only the relaxing and the plugins, which name a type):
    ``--serve`` each harness backend of ``harness_served``, ``--attn-options`` the arm's options, and
    ``--synthetic-checkpoint`` for the scenario's synthetic checkpoint (none for real weights)."""
    args = ["--run-dir", str(run_dir), "--attn-type", spec.attn_type, *plugin_args(spec)]
    args += repeated("--serve", harness_served(params, spec))
    if spec.attn_options:
        args += ["--attn-options", json.dumps(spec.attn_options, sort_keys=True)]
    if not params.bare:
        if spec.kv_reversed:
            args.append("--kv-reversed")
        args += repeated("--scope", params.attn_scope) + repeated("--wrapper", params.attn_wrappers)
        args += repeated("--count-op", [f"{label}={ref}" for label, ref in sorted(params.count_ops.items())])
        args += ["--latent-steps", params.latent_steps]
        if params.time_blocks:
            args.append("--time-blocks")
        if spec.schedule is not None:
            args += ["--schedule", json.dumps(spec.schedule.model_dump(mode="json"), sort_keys=True)]
        if spec.shadows or spec.insitu is not None:  # each shadow with its ``sageattention``
            sage = params.shadow_sageattention
            shadows = [
                {**s.model_dump(mode="json"), **({"sageattention": sage[s.name]} if s.name in sage else {})}
                for s in spec.shadows
            ]
            settings = spec.insitu.model_dump(mode="json") if spec.insitu is not None else {}
            insitu = {"primary": spec.arm, "shadows": shadows, "settings": settings}
            args += ["--insitu", json.dumps(insitu, sort_keys=True)]
    if params.synthetic_checkpoint is not None:
        args += ["--synthetic-checkpoint", params.model_path]
        if params.reference_short_edge:
            args += ["--reference-short-edge", str(params.reference_short_edge)]
    return ["--bare", *args] if params.bare else args


def build_command(params: LightX2VParams, spec: RunSpec, run_dir: Path) -> list[str]:
    run_dir = Path(os.path.abspath(run_dir))
    torchrun = (
        [params.torchrun]
        if params.torchrun
        else [params.python or sys.executable, "-m", "torch.distributed.run"]
    )
    launcher = [*torchrun, "--standalone", f"--nproc_per_node={params.nproc_per_node}", "-m", LAUNCH_MODULE]
    return [*launcher, *launcher_args(params, spec, run_dir), "--", *infer_args(params, spec, run_dir)]


def build_env(params: LightX2VParams, spec: RunSpec) -> dict[str, str]:
    """Variables the launch adds; spec.env wins over the defaults (its PYTHONPATH over this process's)."""
    env: dict[str, str] = {
        "PROFILING_DEBUG_LEVEL": "2",  # both profiler levels: steps, stages, load and save times
        "PYTHONUNBUFFERED": "1",  # keeps stdout and stderr lines in order in the rank logs
        "TOKENIZERS_PARALLELISM": "false",
        "DTYPE": "BF16",
    }
    # The allocator's conf is read by torch when the allocator starts: in the environment, before platform init.
    settings = (
        (params.alloc_conf, ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")),
        (params.platform, ("PLATFORM",)),
        (params.visible_devices, ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")),
    )
    env.update((name, value) for value, names in settings if value for name in names)
    env.update({k: str(v) for k, v in spec.env.items()})
    rest = spec.env.get("PYTHONPATH", os.environ.get("PYTHONPATH"))
    env["PYTHONPATH"] = search_path(
        flavour_folder(params.sageattention), params.root, HARNESS_IMPORT_ROOT, rest
    )
    return env


def probe_question(params: LightX2VParams, spec: RunSpec) -> dict[str, Any]:
    """What the pre-flight probe asks for one arm (probe.py's ``--questions`` item)."""
    names = [spec.attn_type, params.attention.refiner_attn_type or spec.attn_type]
    if spec.schedule is not None:  # its exact steps run LightX2V's class of that name
        names.append(spec.schedule.exact)
    question = {
        "attn_types": list(dict.fromkeys(names)),
        "nproc": params.nproc_per_node,
        "count_ops": dict(sorted(params.count_ops.items())),
        "require": list(params.requires),
        "shadow_types": list(dict.fromkeys(s.attn_type for s in spec.shadows)),
    }
    if served := harness_served(params, spec):  # registered by the probe as the ranks do (defaults)
        question["serve"] = served
    return question


def probe_process(params: LightX2VParams, spec: RunSpec) -> list[str]:
    """The probe's interpreter, ``sageattention`` and plugins: arms alike in these share a process."""
    cmd = [params.python or sys.executable, "-m", PROBE_MODULE]
    return cmd + ["--sageattention", params.sageattention or "package", *plugin_args(spec)]


def probe_command(params: LightX2VParams, spec: RunSpec, questions: list[dict[str, Any]]) -> list[str]:
    """The pre-flight probe in the ranks' interpreter, asked the ``questions`` of arms sharing its process."""
    return [*probe_process(params, spec), "--questions", json.dumps(questions, sort_keys=True)]
