"""The LightX2V runner: one real LightX2V inference per arm, through torchrun and the harness's launcher.

For each arm it writes ONE resolved config into the run directory (``config.json``: the
scenario's base config from the LightX2V checkout, then ``config_overrides``, then the arm's
``attn_type``), and launches

    torchrun --standalone --nproc_per_node=N -m harness.runners.lightx2v.launch <launcher args>
        -- --model_cls .. --task .. --model_path .. --config_json <run_dir>/config.json ..

LightX2V's own files are never edited. Inside each rank the launcher counts attention calls,
reverses K/V for noise-floor arms, writes ``rank<N>.log`` and ``attn_calls.rank<N>.json``,
then runs ``lightx2v.infer``. ``finalize`` turns those into ``timing.json`` and
``attn_calls.json``.

Choices worth knowing:
* ``refiner_attn_type`` (H3's text token refiner) is set to the arm's backend unless the
  scenario sets it: the whole DiT then runs on the backend under test, which is also
  LightX2V's own default when the key is absent.
* profile and arm parameters: a key that names a ``lightx2v:`` block field replaces it; any
  other key goes into ``config_overrides`` (``3step: {infer_steps: 4}``). Dicts merge key by key.
* paths: ``config_json`` and inputs relative to ``root``; ``model_path`` relative to the
  working directory. All are made absolute in the command.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from harness.errors import HarnessError, ScenarioError
from harness.records import AttnCallsRecord, RankCalls, RunSpec
from harness.runners.base import Launch, Runner, register_runner
from harness.runners.lightx2v.checkpoint import run_writer
from harness.runners.lightx2v.rank_env import CPU_PLATFORM, SYNTHETIC_MARKER, read_marker
from harness.runners.lightx2v.schema import LightX2VBlock, h3_dit_dir, h3_model_dirs

LAUNCH_MODULE = "harness.runners.lightx2v.launch"
PROBE_MODULE = "harness.runners.lightx2v.probe"
RESOLVED_CONFIG = "config.json"
ENV_JSON = "lightx2v_env.json"
OUTPUT_MP4 = "output.mp4"
SHIM_DIR = Path(__file__).resolve().parent / "shims" / "aiter_sageattention"
HARNESS_IMPORT_ROOT = Path(__file__).resolve().parents[3]
H3 = "minimax_h3"
H3_FRAMES = (124, 362)  # 17n+5 frame counts for 5..15 s at 24 fps (LightX2V's packing.py)
PROBE_TIMEOUT_S = 300.0

# Probe results by spec hash: pre-flight learns the ranks' environment, prepare records it.
_PROBES: dict[str, dict[str, Any]] = {}
# Probe results by (command, environment): arms that share both share one probe (an import of
# LightX2V takes seconds to tens of seconds).
_PROBE_CACHE: dict[tuple, dict[str, Any]] = {}


# --- records written by finalize -----------------------------------------------------------------


class LightX2VRankCalls(RankCalls):
    """One rank's counts; ``calls``/``fallbacks`` cover the model under test (``scope``)."""

    outside_scope: dict[str, int] = Field(default_factory=dict)  # text encoder, VAE, ...
    sites: dict[str, int] = Field(default_factory=dict)  # "backend <- module that built it" -> calls
    instances: dict[str, int] = Field(default_factory=dict)
    kv_reversed_calls: int = 0
    op_calls: dict[str, int] = Field(default_factory=dict)
    modules: dict[str, Any] = Field(default_factory=dict)
    relaxed: dict[str, Any] = Field(
        default_factory=dict
    )  # LightX2V checks relaxed for a synthetic checkpoint
    finished: bool = False


class LightX2VAttnCalls(AttnCallsRecord):
    source: str = "lightx2v-launcher"
    scope: list[str] = Field(default_factory=list)
    ranks: dict[str, LightX2VRankCalls] = Field(default_factory=dict)  # type: ignore[assignment]


# --- pure helpers --------------------------------------------------------------------------------


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``; nested dicts merge key by key, anything else is replaced."""
    out = dict(base)
    for key, val in over.items():
        if isinstance(val, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], val)
        else:
            out[key] = val
    return out


def _abs(path: str, base: str | None = None) -> str:
    p = Path(os.path.expanduser(path))
    if not p.is_absolute() and base is not None:
        p = Path(base) / p
    return os.path.abspath(p)


def dit_steps_for(model_cls: str, infer_steps: int | None) -> int | None:
    """H3 counts sigma points including the terminal 0: infer_steps N gives N-1 DiT steps."""
    if infer_steps is None:
        return None
    return infer_steps - 1 if model_cls == H3 else infer_steps


def _read_json(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise HarnessError(f"lightx2v.config_json {path}: not found") from None
    except (OSError, ValueError) as err:
        raise HarnessError(f"lightx2v.config_json {path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise HarnessError(f"lightx2v.config_json {path}: expected a JSON object")
    return data


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


def resolved_config(params: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The config LightX2V gets: base, then overrides (which carry attn_type and refiner_attn_type)."""
    return deep_merge(base, params["config_overrides"])


def infer_args(params: dict[str, Any], spec: RunSpec, run_dir: Path) -> list[str]:
    """The arguments of ``python -m lightx2v.infer`` for one arm (what LightX2V's own parser reads)."""
    run_dir = Path(os.path.abspath(run_dir))
    infer = [
        "--model_cls", params["model_cls"],
        "--task", params["task"],
        "--model_path", params["model_path"],
        "--config_json", str(run_dir / RESOLVED_CONFIG),
        "--prompt", params["prompt"],
    ]  # fmt: skip
    if params.get("negative_prompt"):
        infer += ["--negative_prompt", params["negative_prompt"]]
    for key in ("image_path", "audio_path", "video_path"):
        if params.get(key):
            infer += [f"--{key}", ",".join(params[key])]
    infer += ["--save_result_path", str(run_dir / params["save_name"]), "--seed", str(spec.seed)]
    if params.get("warmup"):
        infer.append("--warmup")
    return infer + list(params.get("extra_args") or [])


def synthetic_args(params: dict[str, Any]) -> list[str]:
    """Launcher flags that let LightX2V load the scenario's synthetic checkpoint (none for real weights)."""
    if not params.get("synthetic_checkpoint"):
        return []
    args = ["--synthetic-checkpoint", params["model_path"]]
    if params.get("reference_short_edge"):
        args += ["--reference-short-edge", str(params["reference_short_edge"])]
    return args


def torchrun_prefix(params: dict[str, Any]) -> list[str]:
    if params.get("torchrun"):
        prefix = [params["torchrun"]]
    else:
        prefix = [params.get("python") or sys.executable, "-m", "torch.distributed.run"]
    return [*prefix, "--standalone", f"--nproc_per_node={params['nproc_per_node']}"]


def build_command(params: dict[str, Any], spec: RunSpec, run_dir: Path) -> list[str]:
    run_dir = Path(os.path.abspath(run_dir))
    launcher = ["--run-dir", str(run_dir), "--attn-type", spec.attn_type]
    if spec.kv_reversed:
        launcher.append("--kv-reversed")
    for prefix_mod in params["attn_scope"]:
        launcher += ["--scope", prefix_mod]
    for wrapper in params["attn_wrappers"]:
        launcher += ["--wrapper", wrapper]
    for label, ref in sorted(params["count_ops"].items()):
        launcher += ["--count-op", f"{label}={ref}"]
    launcher += synthetic_args(params)
    return [
        *torchrun_prefix(params),
        "-m",
        LAUNCH_MODULE,
        *launcher,
        "--",
        *infer_args(params, spec, run_dir),
    ]


def build_env(
    params: dict[str, Any], spec: RunSpec, inherited_pythonpath: str | None = None
) -> dict[str, str]:
    """Variables the launch adds; the scenario's and arm's env (spec.env) win over the defaults."""
    env: dict[str, str] = {
        "PROFILING_DEBUG_LEVEL": "2",  # both profiler levels: steps, stages, load and save times
        "PYTHONUNBUFFERED": "1",  # keeps stdout and stderr lines in order in the rank logs
        "TOKENIZERS_PARALLELISM": "false",
        "DTYPE": "BF16",
    }
    if params.get("alloc_conf"):
        # Read by torch when the allocator starts: set in the environment, i.e. before platform init.
        env["PYTORCH_CUDA_ALLOC_CONF"] = params["alloc_conf"]
        env["PYTORCH_ALLOC_CONF"] = params["alloc_conf"]
    if params.get("platform"):
        env["PLATFORM"] = params["platform"]
    if params.get("visible_devices"):
        env["CUDA_VISIBLE_DEVICES"] = params["visible_devices"]
        env["HIP_VISIBLE_DEVICES"] = params["visible_devices"]
    env.update({k: str(v) for k, v in spec.env.items()})
    path = [str(SHIM_DIR)] if params.get("sageattention") == "aiter_shim" else []
    path += [params["root"], str(HARNESS_IMPORT_ROOT)]
    rest = spec.env.get("PYTHONPATH", inherited_pythonpath)
    if rest:
        path += [p for p in rest.split(os.pathsep) if p and p not in path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
    return env


def _nearest_17n5(frames: int) -> str:
    lo = (frames - 5) // 17 * 17 + 5
    return f"{lo} or {lo + 17}"


def check_geometry(model_cls: str, config: dict[str, Any], nproc: int) -> str | None:
    """LightX2V's H3 rules and the parallel layout, from the resolved config (one line or None)."""
    parallel = config.get("parallel")
    if isinstance(parallel, dict) and parallel:
        size = 1
        for key in ("tensor_p_size", "seq_p_size", "cfg_p_size"):
            size *= int(parallel.get(key, 1) or 1)
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
        return (
            f"target_video_length {frames}: MiniMax-H3 needs 17n+5 frames (nearest: {_nearest_17n5(frames)})"
        )
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


def probe_command(params: dict[str, Any], spec: RunSpec) -> list[str]:
    """The pre-flight probe for one arm, run in the ranks' interpreter (see probe.py)."""
    cmd = [params.get("python") or sys.executable, "-m", PROBE_MODULE]
    attention = params.get("attention") or {}
    for name in dict.fromkeys([spec.attn_type, attention.get("refiner_attn_type") or spec.attn_type]):
        cmd += ["--attn-type", name]
    cmd += [
        "--sageattention",
        params.get("sageattention") or "package",
        "--nproc",
        str(params["nproc_per_node"]),
    ]
    for label, ref in sorted((params.get("count_ops") or {}).items()):
        cmd += ["--count-op", f"{label}={ref}"]
    for feature in params.get("requires") or []:
        cmd += ["--require", feature]
    return cmd


def _run_probe(params: dict[str, Any], spec: RunSpec, env: dict[str, str]) -> dict[str, Any]:
    """Run the probe in the ranks' interpreter and environment; arms with the same probe share one run."""
    cmd = probe_command(params, spec)
    key = (tuple(cmd), tuple(sorted(env.items())))
    if key in _PROBE_CACHE:
        return _PROBE_CACHE[key]
    try:
        out = subprocess.run(
            cmd,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as err:
        return {"ok": False, "reason": f"pre-flight probe could not run ({err})"}
    result = None
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except ValueError:
                pass
            break
    if result is None:
        last = next((ln for ln in reversed(out.stderr.splitlines()) if ln.strip()), "no output")
        result = {
            "ok": False,
            "reason": f"pre-flight probe failed (exit {out.returncode}): {last.strip()[:300]}",
        }
    _PROBE_CACHE[key] = result
    return result


def synthetic_problem(params: dict[str, Any]) -> str | None:
    """Why the model folder cannot be (or become) the scenario's synthetic checkpoint, or None."""
    wanted = params.get("synthetic_checkpoint")
    model = Path(params["model_path"])
    marker = read_marker(model)
    if marker is None:
        if model.is_dir() and any(model.iterdir()):
            return (
                f"lightx2v.model_path {model}: not empty and not a synthetic checkpoint (no {SYNTHETIC_MARKER}); "
                "the harness writes synthetic weights only into an empty or missing folder"
            )
        return None  # written by prepare
    have = {"preset": marker.get("preset"), "seed": marker.get("seed")}
    if have != {"preset": wanted["preset"], "seed": wanted["seed"]}:
        return (
            f"lightx2v.model_path {model}: holds the synthetic checkpoint {have}, the scenario asks for "
            f"{ {'preset': wanted['preset'], 'seed': wanted['seed']} } (use another folder)"
        )
    return None


def write_synthetic_checkpoint(params: dict[str, Any], env: dict[str, str]) -> None:
    """Write the scenario's synthetic checkpoint into model_path, in the ranks' interpreter."""
    wanted = params["synthetic_checkpoint"]
    run_writer(params["model_path"], wanted["preset"], wanted["seed"], python=params.get("python"), env=env)


# --- the runner ------------------------------------------------------------------------------------


@register_runner("lightx2v")
class LightX2VRunner(Runner):
    def resolve_params(self, scenario: Any, arm: Any, profile: str | None) -> dict[str, Any]:
        block = effective_block(scenario, arm, profile)
        where = f"scenario {scenario.name}: arm {arm.name}"
        overrides = dict(block.config_overrides)
        if "attn_type" in overrides:
            raise ScenarioError(f"{where}: set attn_type on the arm, not in lightx2v config_overrides")
        flavour = getattr(arm, "sageattention", "package")
        if flavour == "aiter_shim" and arm.attn_type != "sage_attn2":
            raise ScenarioError(f"{where}: sageattention: aiter_shim only applies to attn_type sage_attn2")
        overrides["attn_type"] = arm.attn_type
        refiner = block.refiner_attn_type or overrides.get("refiner_attn_type") or arm.attn_type
        if block.model_cls == H3:
            overrides["refiner_attn_type"] = refiner
        root = _abs(block.root)
        config_json = _abs(block.config_json, root)
        base: dict[str, Any] | None
        try:
            base = _read_json(config_json)
            base_sha = hashlib.sha256(Path(config_json).read_bytes()).hexdigest()
        except HarnessError:  # planning away from the target machine: pre-flight reports it
            base, base_sha = None, None
        merged = deep_merge(base or {}, overrides)
        infer_steps = merged.get("infer_steps")
        infer_steps = (
            infer_steps if isinstance(infer_steps, int) and not isinstance(infer_steps, bool) else None
        )
        other_attn = {}
        if block.model_cls == H3:  # LightX2V's defaults for H3's other attention sites
            other_attn = {
                "qwen3vl_attn_type": merged.get("qwen3vl_attn_type", "torch_sdpa"),
                "vae_attn_type": merged.get("vae_attn_type", "torch_sdpa"),
            }
        return {
            "root": root,
            "model_path": _abs(block.model_path),
            "model_cls": block.model_cls,
            "task": block.task,
            "config_json": config_json,
            "base_config_sha256": base_sha,
            "nproc_per_node": block.nproc_per_node,
            "prompt": block.prompt,
            "negative_prompt": block.negative_prompt,
            "image_path": [_abs(p, root) for p in block.image_path],
            "audio_path": [_abs(p, root) for p in block.audio_path],
            "video_path": [_abs(p, root) for p in block.video_path],
            "config_overrides": overrides,
            "infer_steps": infer_steps,
            "dit_steps": dit_steps_for(block.model_cls, infer_steps),
            "attention": {"attn_type": arm.attn_type, "refiner_attn_type": refiner, **other_attn},
            "sageattention": flavour if arm.attn_type == "sage_attn2" else None,
            "torchrun": block.torchrun,
            "python": block.python,
            "visible_devices": block.visible_devices,
            "alloc_conf": block.alloc_conf,
            "platform": block.platform,
            "save_name": block.save_name,
            "warmup": block.warmup,
            "extra_args": list(block.extra_args),
            "model_dirs": list(
                block.model_dirs
                if block.model_dirs is not None
                else _default_dirs(block.model_cls, block.task)
            ),
            "attn_scope": list(block.attn_scope),
            "attn_wrappers": list(block.attn_wrappers),
            "count_ops": dict(getattr(arm, "count_ops", None) or {}),
            "synthetic_checkpoint": (
                block.synthetic_checkpoint.model_dump() if block.synthetic_checkpoint is not None else None
            ),
            "reference_short_edge": block.reference_short_edge,
            # LightX2V features the resolved config relies on; the probe refuses a checkout without them.
            "requires": ["adaln_cache"] if merged.get("use_adaln_cache") else [],
        }

    def preflight(self, spec: RunSpec) -> str | None:
        p = spec.params
        if "root" not in p:
            return "lightx2v: the run spec carries no lightx2v parameters (re-plan the campaign)"
        root = Path(p["root"])
        if not (root / "lightx2v" / "infer.py").is_file():
            return f"lightx2v.root {root}: lightx2v/infer.py not found (point it, e.g. LIGHTX2V_ROOT, at a LightX2V checkout)"
        try:
            base = _read_json(p["config_json"])
        except HarnessError as err:
            return str(err)
        config = resolved_config(p, base)
        model = Path(p["model_path"])
        if p.get("synthetic_checkpoint"):
            problem = synthetic_problem(p)
            if problem:
                return problem
        if p.get("synthetic_checkpoint") and read_marker(model) is None:
            pass  # prepare writes it; its folders are LightX2V's by construction
        elif not model.is_dir():
            return f"lightx2v.model_path {model}: not a folder"
        else:
            lacking = [d for d in p["model_dirs"] if not (model / d).is_dir()]
            if lacking:
                return f"lightx2v.model_path {model}: missing folder(s) {', '.join(lacking)} (needs {', '.join(p['model_dirs'])})"
            if p["model_cls"] == H3:
                part = h3_dit_dir(p["task"])
                if not (model / part / "config.json").is_file():
                    return f"lightx2v.model_path {model}: {part}/config.json not found ({p['task']} loads {part})"
        for key in ("image_path", "audio_path", "video_path"):
            for path in p[key]:
                if not Path(path).is_file():
                    return f"lightx2v.{key} {path}: not found"
        if p["model_cls"] == H3 and p["task"] == "ref2av" and not (p["image_path"] or p["video_path"]):
            return "lightx2v.image_path: ref2av needs at least one reference image or video"
        problem = check_geometry(p["model_cls"], config, p["nproc_per_node"])
        if problem:
            return problem
        env = build_env(p, spec, os.environ.get("PYTHONPATH"))
        level = env.get("PROFILING_DEBUG_LEVEL", "0")
        if not level.isdigit() or int(level) < 1:
            return f"PROFILING_DEBUG_LEVEL={level}: LightX2V logs no step times below 1 (the harness sets 2)"
        if p.get("torchrun") and not (shutil.which(p["torchrun"]) or Path(p["torchrun"]).is_file()):
            return f"lightx2v.torchrun {p['torchrun']}: not found"
        if p.get("python") and not (shutil.which(p["python"]) or Path(p["python"]).is_file()):
            return f"lightx2v.python {p['python']}: not found"
        result = _run_probe(p, spec, env)
        _PROBES[spec.spec_hash()] = result.get("facts") or {}
        if not result.get("ok"):
            return str(result.get("reason") or "pre-flight probe failed")
        return None

    def prepare(self, spec: RunSpec, run_dir: Path, *, dry_run: bool = False) -> Launch:
        p = spec.params
        if "root" not in p:
            raise HarnessError("lightx2v: the run spec carries no lightx2v parameters (re-plan the campaign)")
        run_dir = Path(os.path.abspath(run_dir))
        env = build_env(p, spec, os.environ.get("PYTHONPATH"))
        on_cpu = (env.get("PLATFORM") or p.get("platform")) == CPU_PLATFORM
        launch = Launch(
            command=build_command(p, spec, run_dir),
            env=env,
            cwd=str(run_dir),
            gpus=0 if on_cpu else int(p["nproc_per_node"]),
        )
        if dry_run:
            return launch
        config = resolved_config(p, _read_json(p["config_json"]))
        from harness.store import atomic_write_json

        if p.get("synthetic_checkpoint") and read_marker(p["model_path"]) is None:
            problem = synthetic_problem(p)
            if problem:
                raise HarnessError(problem)
            write_synthetic_checkpoint(p, env)

        run_dir.mkdir(parents=True, exist_ok=True)
        for stale in (*run_dir.glob("rank*.log"), *run_dir.glob("attn_calls.rank*.json")):
            stale.unlink()
        atomic_write_json(run_dir / RESOLVED_CONFIG, config)
        atomic_write_json(run_dir / ENV_JSON, environment_facts(p, _PROBES.get(spec.spec_hash())))
        return launch

    def finalize(self, spec: RunSpec, run_dir: Path) -> None:
        from harness.store import ATTN_CALLS_JSON, TIMING_JSON, write_record

        run_dir = Path(run_dir)
        p = spec.params
        timing = timing_from_run_dir(run_dir, p.get("dit_steps"), p.get("infer_steps"))
        write_record(run_dir / TIMING_JSON, timing)
        calls = merge_rank_calls(
            run_dir,
            spec.attn_type,
            spec.kv_reversed,
            int(p.get("nproc_per_node") or 1),
            p.get("attn_scope") or [],
            p.get("sageattention"),
            sorted(p.get("count_ops") or {}),
        )
        write_record(run_dir / ATTN_CALLS_JSON, calls)
        save_name = p.get("save_name") or OUTPUT_MP4
        produced, expected = run_dir / save_name, run_dir / OUTPUT_MP4
        if save_name != OUTPUT_MP4 and produced.is_file() and not expected.exists():
            try:
                os.link(produced, expected)
            except OSError:
                shutil.copyfile(produced, expected)


def _default_dirs(model_cls: str, task: str) -> tuple[str, ...]:
    return h3_model_dirs(task) if model_cls == H3 else ()


def environment_facts(params: dict[str, Any], probe_facts: dict[str, Any] | None) -> dict[str, Any]:
    """LightX2V's git state and what the ranks' interpreter reported (torch, HIP, GPU arch, aiter)."""
    from harness.envinfo import git_info

    return {
        "lightx2v_root": params["root"],
        "lightx2v_git": git_info(Path(params["root"])),
        "ranks_python": params.get("python") or sys.executable,
        "probe": probe_facts,
    }


def timing_from_run_dir(run_dir: Path, dit_steps: int | None = None, infer_steps: int | None = None):
    """Parse rank<N>.log files (the launcher's), else the torchrun process's stderr/stdout."""
    from harness.collect.lightx2v_log import parse_lightx2v_logs

    run_dir = Path(run_dir)
    texts = {f.stem: f.read_text(errors="replace") for f in sorted(run_dir.glob("rank*.log"))}
    fallback = not texts
    if fallback:
        texts = {
            n: (run_dir / n).read_text(errors="replace")
            for n in ("stderr.log", "stdout.log")
            if (run_dir / n).is_file()
        }
    timing = parse_lightx2v_logs(texts)
    if fallback:
        timing.missing.append("no rank<N>.log from the launcher: parsed the torchrun process's own logs")
    if dit_steps is not None and timing.steps and len(timing.steps) != dit_steps:
        timing.missing.append(
            f"expected {dit_steps} DiT steps (infer_steps {infer_steps}), the logs time {len(timing.steps)}"
        )
    return timing


def _check_sageattention(rc: LightX2VRankCalls, flavour: str) -> None:
    served = rc.calls.get("sage_attn2", 0)
    if not served:
        return
    path = rc.modules.get("sageattention")
    if path is None:
        rc.errors.append("sage_attn2 served calls but no sageattention module was recorded")
        return
    is_shim = bool(rc.modules.get("sageattention_is_aiter_shim"))
    if flavour == "aiter_shim" and not is_shim:
        rc.fallbacks[f"sageattention package at {path} (not the aiter shim)"] = served
    elif flavour == "package" and is_shim:
        rc.fallbacks[f"the aiter shim at {path} (not the sageattention package)"] = served


def merge_rank_calls(
    run_dir: Path,
    requested: str,
    kv_reversed: bool,
    nproc: int,
    scope: list[str] | None = None,
    sageattention: str | None = None,
    required_ops: list[str] | None = None,
) -> LightX2VAttnCalls:
    """attn_calls.rank<N>.json of every rank -> one record; a rank without a file is listed as such.

    For sage_attn2 arms, calls served by the other ``sageattention`` (the package where the aiter
    shim was asked for, or the reverse) are recorded as fallbacks: they ran another kernel.
    ``required_ops`` are the arm's ``count_ops`` labels: a rank that called one of them zero
    times gets an error (the arm named the op, so its backend must have reached it).
    """
    run_dir = Path(run_dir)
    ranks: dict[str, LightX2VRankCalls] = {}
    for path in sorted(run_dir.glob("attn_calls.rank*.json")):
        rank = path.stem.removeprefix("attn_calls.rank")
        try:
            data = json.loads(path.read_text())
            ranks[rank] = LightX2VRankCalls.model_validate(data)
        except (OSError, ValueError) as err:
            ranks[rank] = LightX2VRankCalls(errors=[f"{path.name}: unreadable ({err})"])
    for rank in range(nproc):
        if str(rank) not in ranks:
            ranks[str(rank)] = LightX2VRankCalls(
                errors=[
                    f"no attn_calls.rank{rank}.json: rank {rank} did not report (crashed before the launcher?)"
                ]
            )
    if sageattention:
        for rc in ranks.values():
            _check_sageattention(rc, sageattention)
    for label in required_ops or []:
        for rc in ranks.values():
            if not rc.op_calls.get(label) and not any(label in e for e in rc.errors):
                rc.errors.append(f"count-op {label}: 0 calls (the arm names this op, so it must be hit)")
    ordered = dict(sorted(ranks.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else math.inf))
    return LightX2VAttnCalls(
        requested=requested, kv_reversed=kv_reversed, ranks=ordered, scope=list(scope or [])
    )


__all__ = [
    "LightX2VRunner",
    "LightX2VAttnCalls",
    "LightX2VRankCalls",
    "build_command",
    "build_env",
    "check_geometry",
    "deep_merge",
    "dit_steps_for",
    "effective_block",
    "merge_rank_calls",
    "resolved_config",
    "timing_from_run_dir",
]
