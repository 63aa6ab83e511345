"""The LightX2V runner: one LightX2V inference per arm under torchrun; ONE resolved config per run
directory (LightX2V's files are never edited), then timing, attention calls and layers from the ranks.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

from pydantic import Field

from harness.collect.lightx2v_log import parse_lightx2v_logs
from harness.envinfo import git_info
from harness.errors import HarnessError
from harness.insitu_records import INSITU_DIR
from harness.records import (
    AttnCallsRecord,
    RankCalls,
    Record,
    RunSpec,
    StepSchedule,
    TimingRecord,
    steady_steps,
)
from harness.runners.base import Launch, Runner
from harness.runners.lightx2v.checkpoint import RELEASED_LAYERS, run_writer
from harness.runners.lightx2v.command import RESOLVED_CONFIG, build_command, build_env
from harness.runners.lightx2v.latents import LATENTS_DIR
from harness.runners.lightx2v.params import LightX2VParams, params_of, read_base_config, resolve_params
from harness.runners.lightx2v.preflight import expect_probes, preflight_reason, synthetic_problem
from harness.runners.lightx2v.rank_env import CPU_PLATFORM, flavour_text, read_marker
from harness.runners.lightx2v.rank_env import harness_backends as served_backends
from harness.safe_write import atomic_write_json, link_or_copy
from harness.store import (
    ATTN_CALLS_JSON,
    LAYERS_JSON,
    OUTPUT_MP4,
    STDERR_LOG,
    STDOUT_LOG,
    TIMING_JSON,
    LayerTiming,
    write_record,
)

ENV_JSON = "lightx2v_env.json"


class LightX2VEnvironment(Record):
    """lightx2v_env.json: LightX2V's git state and what the ranks' interpreter reported."""

    lightx2v_root: str
    lightx2v_git: dict[str, Any] | None = None
    ranks_python: str
    probe: dict[str, Any] | None = None  # the probe's facts (torch, HIP, GPU arch, aiter); None: no probe ran


class LightX2VRankCalls(RankCalls):
    """One rank's counts; ``calls``/``fallbacks`` cover the model under test (``scope``)."""

    outside_scope: dict[str, int] = Field(default_factory=dict)  # text encoder, VAE, ...
    sites: dict[str, int] = Field(default_factory=dict)  # "backend <- module that built it" -> calls
    instances: dict[str, int] = Field(default_factory=dict)
    kv_reversed_calls: int = 0
    op_calls: dict[str, int] = Field(default_factory=dict)
    modules: dict[str, Any] = Field(default_factory=dict)
    relaxed: dict[str, Any] = Field(default_factory=dict)  # checks relaxed for a synthetic checkpoint
    scheduled: dict[str, int] = Field(default_factory=dict)  # calls a step schedule routed, by backend
    # The launcher's hooks on LightX2V's loops: {"hooks": found, "missing": not found}.
    attribution: dict[str, Any] = Field(default_factory=dict)
    latents: dict[str, Any] = Field(default_factory=dict)  # {"folder", "steps" saved, "copy_s"}
    block_seconds: dict[str, list[float]] = Field(default_factory=dict)  # step -> per DiT block (timed runs)
    # Harness backends (a plugin's, planted_error) the launcher registered in LightX2V's registry.
    harness_served: list[str] = Field(default_factory=list)
    finished: bool = False


class LightX2VAttnCalls(AttnCallsRecord):
    source: str = "lightx2v-launcher"
    scope: list[str] = Field(default_factory=list)
    ranks: dict[str, LightX2VRankCalls] = Field(default_factory=dict)  # type: ignore[assignment]


def timing_from_run_dir(run_dir: Path, dit_steps: int | None, infer_steps: int | None) -> TimingRecord:
    """Parse the launcher's rank<N>.log files, else the torchrun process's stderr/stdout."""
    texts = {f.stem: f.read_text(errors="replace") for f in sorted(run_dir.glob("rank*.log"))}
    fallback = not texts
    if fallback:
        texts = {
            n: (run_dir / n).read_text(errors="replace")
            for n in (STDERR_LOG, STDOUT_LOG)
            if (run_dir / n).is_file()
        }
    timing = parse_lightx2v_logs(texts, strict=False)  # a run's own logs: implausible lines noted
    if fallback:
        timing.missing.append("no rank<N>.log from the launcher: parsed the torchrun process's own logs")
    if dit_steps is not None and timing.steps and len(timing.steps) != dit_steps:
        timing.missing.append(
            f"expected {dit_steps} DiT steps (infer_steps {infer_steps}), the logs time {len(timing.steps)}"
        )
    return timing


def check_sageattention(rc: LightX2VRankCalls, flavour: str) -> None:
    """Calls of sage_attn2 served by the other ``sageattention`` are fallbacks: another kernel ran."""
    served = rc.calls.get("sage_attn2", 0)
    if not served:
        return
    path = rc.modules.get("sageattention")
    if path is None:
        rc.errors.append("sage_attn2 served calls but no sageattention module was recorded")
        return
    found = rc.modules.get("sageattention_flavour")
    if found is None:  # ranks of earlier harness versions recorded the aiter shim's flag only
        found = "aiter_shim" if rc.modules.get("sageattention_is_aiter_shim") else "package"
    if found != flavour:
        rc.fallbacks[f"{flavour_text(found)} at {path} (not {flavour_text(flavour)})"] = served


def check_schedule(rc: LightX2VRankCalls, schedule: StepSchedule, requested: str, steps: int | None) -> None:
    """Every DiT step's calls went where the schedule sends them (the counts per step prove it)."""
    from harness.attention.wrappers import exact_on

    numbered = [int(s) for s in rc.per_step if s.isdigit()]
    total = steps or (max(numbered) if numbered else None)
    for step in sorted(numbered):
        counts = rc.per_step[str(step)]
        wanted, other = (
            (schedule.exact, requested) if exact_on(schedule, step, total) else (requested, schedule.exact)
        )
        if wanted != other and counts.get(other):
            rc.errors.append(
                f"schedule: step {step} has {counts[other]} call(s) served by {other} (the schedule sends it to {wanted})"
            )


def merge_rank_calls(run_dir: Path, spec: RunSpec, params: LightX2VParams) -> LightX2VAttnCalls:
    """attn_calls.rank<N>.json of every rank -> one record (a rank without one listed as such); an
    unused ``count_ops`` label and a ``schedule`` step served by the other backend are errors."""
    run_dir = Path(run_dir)
    ranks: dict[str, LightX2VRankCalls] = {}
    for path in sorted(run_dir.glob("attn_calls.rank*.json")):
        rank = path.stem.removeprefix("attn_calls.rank")
        try:
            ranks[rank] = LightX2VRankCalls.model_validate(json.loads(path.read_text()))
        except (OSError, ValueError) as err:
            ranks[rank] = LightX2VRankCalls(errors=[f"{path.name}: unreadable ({err})"])
    requested, sageattention = spec.attn_type, params.sageattention
    for rank in map(str, range(params.nproc_per_node)):
        missing = f"no attn_calls.rank{rank}.json: rank {rank} did not report (crashed before the launcher?)"
        ranks.setdefault(rank, LightX2VRankCalls(errors=[missing]))
    for rc in ranks.values():
        if sageattention:
            check_sageattention(rc, sageattention)
        if spec.schedule is not None:
            check_schedule(rc, spec.schedule, requested, params.dit_steps)
        for label in sorted(params.count_ops):
            if not rc.op_calls.get(label) and not any(label in e for e in rc.errors):
                rc.errors.append(f"count-op {label}: 0 calls (the arm names this op, so it must be hit)")
    ordered = dict(sorted(ranks.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else math.inf))
    # What sage_attn2 ran, as the first rank with a ``sageattention`` recorded it (empty for others).
    modules = next((rc.modules for rc in ordered.values() if rc.modules.get("sageattention")), {})
    flavour = modules.get("sageattention_flavour") or sageattention
    found = {"backend": requested, "lightx2v": True, "sageattention": flavour}
    for key in ("function", "package_version", "package_commit", "provenance"):
        found[key] = modules.get(f"sageattention_{key.removeprefix('package_')}")
    backend = {k: v for k, v in found.items() if v is not None} if requested == "sage_attn2" else {}
    return LightX2VAttnCalls(
        requested=requested,
        kv_reversed=spec.kv_reversed,
        ranks=ordered,
        scope=params.attn_scope,
        backend=backend,
    )


def layer_timing(rank_files: list[Path], timing: TimingRecord) -> LayerTiming | None:
    """A DiT layer's seconds per step (the ranks' ``block_seconds`` against the step times) and a step of
    the released 50 layers, extrapolated (printed ``12.3 s~``); None when no block was timed."""
    per_rank: list[dict[str, list[float]]] = []
    for path in rank_files:
        try:
            blocks = json.loads(Path(path).read_text()).get("block_seconds")
        except (OSError, ValueError):
            continue
        if blocks:
            per_rank.append(blocks)
    step_s = {s.index: s.seconds for s in timing.steps}
    timed = sorted(int(s) for s in per_rank[0] if s.isdigit() and int(s) in step_s) if per_rank else []
    if not timed:
        return None
    layers = len(per_rank[0][str(timed[0])])
    steps = steady_steps(timed)
    in_layers = [max(sum(r.get(str(s), [])) for r in per_rank) for s in steps]
    layer_s = statistics.fmean(x / layers for x in in_layers)
    outside = statistics.fmean(step_s[s] - x for s, x in zip(steps, in_layers, strict=True))
    record = LayerTiming(
        layers=layers,
        seq_len=timing.seq_len,
        steps=steps,
        step_s=statistics.fmean(step_s[s] for s in steps),
        layer_s=layer_s,
        outside_layers_s=outside,
        released_layers=RELEASED_LAYERS,
        released_step_s=outside + RELEASED_LAYERS * layer_s,
    )
    record.text = record.reading()
    return record


class LightX2VRunner(Runner):
    def __init__(self) -> None:
        # The probe's facts by spec hash, from this runner's pre-flight, for its prepare.
        self.probe_facts: dict[str, dict[str, Any]] = {}

    def resolve_params(self, scenario: Any, arm: Any, profile: str | None) -> dict[str, Any]:
        return resolve_params(scenario, arm, profile).model_dump(mode="json")

    def harness_backends(self, spec: RunSpec) -> list[str]:
        """Only the harness backends the run calls (LightX2V's own classes serve the rest)."""
        try:
            params = params_of(spec)
        except HarnessError:  # not planned by this runner: the pre-flight says why
            return []
        return served_backends(spec, params)

    def expect_preflights(self, specs: list[RunSpec]) -> None:
        """One probe process per interpreter and environment answers every planned arm's probe."""
        items = []
        for spec in specs:
            try:
                items.append((params_of(spec), spec))
            except HarnessError:  # not planned by this runner: its pre-flight says why
                continue
        expect_probes(items)

    def preflight(self, spec: RunSpec) -> str | None:
        try:
            params = params_of(spec)
        except HarnessError as err:
            return str(err)
        reason, probe = preflight_reason(params, spec)
        if probe is not None:
            self.probe_facts[spec.spec_hash()] = dict(probe.facts)
        return reason

    def prepare(self, spec: RunSpec, run_dir: Path, *, dry_run: bool = False) -> Launch:
        params = params_of(spec)
        run_dir = Path(os.path.abspath(run_dir))
        env = build_env(params, spec)
        on_cpu = (env.get("PLATFORM") or params.platform) == CPU_PLATFORM
        launch = Launch(
            command=build_command(params, spec, run_dir),
            env=env,
            cwd=str(run_dir),
            gpus=0 if on_cpu else params.nproc_per_node,
        )
        if dry_run:
            return launch
        config = params.resolved_config(read_base_config(params.config_json))
        if params.synthetic_checkpoint is not None and read_marker(params.model_path) is None:
            if problem := synthetic_problem(params):
                raise HarnessError(problem)
            wanted = params.synthetic_checkpoint
            run_writer(params.model_path, wanted.preset, wanted.seed, python=params.python, env=env)

        run_dir.mkdir(parents=True, exist_ok=True)
        stale = [*run_dir.glob("rank*.log"), *run_dir.glob("attn_calls.rank*.json"), run_dir / LAYERS_JSON]
        for path in stale:
            path.unlink(missing_ok=True)
        for folder in (LATENTS_DIR, INSITU_DIR):  # a rerun's files only: no step or rank of an older run
            shutil.rmtree(run_dir / folder, ignore_errors=True)
        atomic_write_json(run_dir / RESOLVED_CONFIG, config)
        facts = LightX2VEnvironment(
            lightx2v_root=params.root,
            lightx2v_git=git_info(Path(params.root)),
            ranks_python=params.python or sys.executable,
            probe=self.probe_facts.get(spec.spec_hash()),
        )
        write_record(run_dir / ENV_JSON, facts)
        return launch

    def finalize(self, spec: RunSpec, run_dir: Path) -> None:
        """timing.json, attn_calls.json (not for a bare run: nothing was counted) and output.mp4."""
        params, run_dir = params_of(spec), Path(run_dir)
        timing = timing_from_run_dir(run_dir, params.dit_steps, params.infer_steps)
        write_record(run_dir / TIMING_JSON, timing)
        if params.time_blocks:
            layers = layer_timing(sorted(run_dir.glob("attn_calls.rank*.json")), timing)
            if layers is not None:
                write_record(run_dir / LAYERS_JSON, layers)
        if not params.bare:
            calls = merge_rank_calls(run_dir, spec, params)
            write_record(run_dir / ATTN_CALLS_JSON, calls)
        produced, expected = run_dir / params.save_name, run_dir / OUTPUT_MP4  # the video as output.mp4 too
        if produced != expected and produced.is_file() and not expected.exists():
            link_or_copy(str(produced), str(expected))
