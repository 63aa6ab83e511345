"""The LightX2V runner: one real LightX2V inference per arm, through torchrun and the harness's launcher.

Each arm's run directory gets ONE resolved config (``config.json``: the base config, then
``config_overrides``, then the arm's ``attn_type``; LightX2V's files are never edited) and the
probe's facts (``lightx2v_env.json``, kept on this runner between the pre-flight and ``prepare``).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from harness.envinfo import git_info
from harness.errors import HarnessError
from harness.records import Record, RunSpec
from harness.runners.base import Launch, Runner, register_runner
from harness.runners.lightx2v.checkpoint import run_writer
from harness.runners.lightx2v.command import RESOLVED_CONFIG, build_command, build_env
from harness.runners.lightx2v.finalize import finalize_run
from harness.runners.lightx2v.latents import LATENTS_DIR
from harness.runners.lightx2v.params import params_of, read_base_config, resolve_params
from harness.runners.lightx2v.preflight import expect_probes, preflight_reason, synthetic_problem
from harness.runners.lightx2v.rank_env import CPU_PLATFORM, read_marker
from harness.runners.lightx2v.rank_env import harness_backends as served_backends
from harness.safe_write import atomic_write_json
from harness.store import LAYERS_JSON, write_record

INSITU_DIR = "insitu"  # harness.attention.insitu.INSITU_DIR (that package imports torch)

ENV_JSON = "lightx2v_env.json"


class LightX2VEnvironment(Record):
    """lightx2v_env.json: LightX2V's git state and what the ranks' interpreter reported."""

    lightx2v_root: str
    lightx2v_git: dict[str, Any] | None = None
    ranks_python: str
    probe: dict[str, Any] | None = None  # the probe's facts (torch, HIP, GPU arch, aiter); None: no probe ran


@register_runner("lightx2v")
class LightX2VRunner(Runner):
    def __init__(self) -> None:
        # The probe's facts by spec hash, from this runner's pre-flight, for its prepare.
        self.probe_facts: dict[str, dict[str, Any]] = {}

    def resolve_params(self, scenario: Any, arm: Any, profile: str | None) -> dict[str, Any]:
        return resolve_params(scenario, arm, profile).model_dump(mode="json")

    def harness_backends(self, spec: RunSpec) -> list[str]:
        """Only the harness backends the run calls (``rank_env.harness_backends``): LightX2V's own classes
        serve the rest (its torch_sdpa is not the harness's)."""
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
        env = build_env(params, spec, os.environ.get("PYTHONPATH"))
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
            problem = synthetic_problem(params)
            if problem:
                raise HarnessError(problem)
            wanted = params.synthetic_checkpoint
            run_writer(params.model_path, wanted.preset, wanted.seed, python=params.python, env=env)

        run_dir.mkdir(parents=True, exist_ok=True)
        for stale in (
            *run_dir.glob("rank*.log"),
            *run_dir.glob("attn_calls.rank*.json"),
            run_dir / LAYERS_JSON,
        ):
            stale.unlink(missing_ok=True)
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
        finalize_run(params_of(spec), spec, Path(run_dir))
