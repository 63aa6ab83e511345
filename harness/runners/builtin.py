"""The builtin runner: the embedded tiny ref2av pipeline in a child process per arm (``python -m
harness.runners.builtin RUN_DIR``), and what a builtin scenario adds to the core (``SCENARIO_PART``)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from harness import store
from harness.records import AttnCallsRecord, RunSpec, TimingRecord
from harness.registry import did_you_mean
from harness.runners.base import Launch, Runner
from harness.runners.common import LATENTS_DIR, SPEC_JSON, print_step, run_dir_main
from harness.safe_write import atomic_write_text
from harness.scenario.model import Strict
from harness.scenario.parts import FieldProblem, ScenarioPart


class BuiltinBlock(Strict):
    """The embedded tiny ref2av pipeline."""

    preset: Literal["tiny", "cpu", "gpu"] = "cpu"
    prompt: str = "a woman dances in the street, drums and a cheering crowd"
    params: dict[str, Any] = Field(default_factory=dict, description="Pipeline config overrides.")
    save_latents: bool = Field(True, description="Save the latent after every step (trajectory plots).")
    lossless: bool = Field(
        True,
        description="Also write output_lossless.mkv (FFV1 RGB + float PCM): pixel and audio metrics are then "
        "taken before compression, and the codec floor is the mp4's own error against it; false: they are "
        "taken on output.mp4 (H.264 + AAC), the codec's error in them.",
    )


def check_backends(scenario: Any) -> None:
    """Every arm, shadow and schedule's exact side names a harness backend; an arm, options it accepts."""
    from harness.attention.registry import BACKENDS, check_options

    known = BACKENDS.names()
    arms = set(scenario.arm_names)

    def check(name: str, loc: tuple) -> None:
        if name not in known:
            raise FieldProblem(
                loc,
                f"unknown attention backend {name!r}{did_you_mean(name, known)} "
                f"(the harness registry has: {', '.join(known)})",
            )

    for i, arm in enumerate(scenario.arms):
        check(arm.attn_type, ("arms", i, "attn_type"))
        if why := check_options(arm.attn_type, arm.attn_options):
            raise FieldProblem(("arms", i, "attn_options"), why)
        for name in arm.shadows:
            if name not in arms:
                check(name, ("arms", i, "shadows"))
        if arm.schedule is not None:
            check(arm.schedule.exact, ("arms", i, "schedule", "exact"))


SCENARIO_PART = ScenarioPart(block="builtin", model=BuiltinBlock, check=check_backends, insitu=True)


class BuiltinRunner(Runner):
    name: ClassVar[str] = "builtin"

    def resolve_params(self, scenario, arm, profile) -> dict[str, Any]:
        from harness.tiny_ref2av.config import PRESETS

        block = scenario.runner_block() or BuiltinBlock()
        profile_params = scenario.profiles.get(profile, {}) if profile else {}
        cfg = PRESETS[block.preset].with_overrides({**block.params, **profile_params, **arm.overrides})
        return {
            "preset": block.preset,
            "prompt": block.prompt,
            "save_latents": block.save_latents,
            # Absent when off, as before the default was on: a run planned then without it wrote only the
            # mp4 and resumes only under lossless: false; under the default it runs again, lossless.
            **({"lossless": True} if block.lossless else {}),
            "pipeline": cfg.model_dump(mode="json"),
        }

    def preflight(self, spec: RunSpec) -> str | None:
        from harness.attention.registry import BACKENDS, get_backend
        from harness.errors import BackendUnavailable

        # An unavailable shadow is left out with a note; a schedule's exact side is needed.
        exact = [("schedule's exact backend", spec.schedule.exact)] if spec.schedule is not None else []
        for what, name in [("backend", spec.attn_type), *exact]:
            ok, why = BACKENDS.get(name).availability()
            if not ok:
                return f"{what} {name} unavailable here: {why}"
        if spec.attn_options:  # options can pin what the machine lacks (an SDPA kernel, a variant)
            try:
                get_backend(spec.attn_type, **spec.attn_options)
            except BackendUnavailable as err:
                return f"backend {spec.attn_type} with {spec.attn_options} unavailable here: {err}"
        return None

    def prepare(self, spec: RunSpec, run_dir: Path, *, dry_run: bool = False) -> Launch:
        if not dry_run:
            atomic_write_text(run_dir / SPEC_JSON, spec.model_dump_json(indent=2))
        device = spec.params.get("pipeline", {}).get("device", "auto")
        return Launch(
            command=[sys.executable, "-m", "harness.runners.builtin", str(run_dir)],
            env={"PYTHONUNBUFFERED": "1"},
            gpus=1 if device == "cuda" else 0,  # "auto" takes a GPU where one is, but asks for none
        )


def run_in_process(run_dir: Path) -> TimingRecord:
    """The child process: one pipeline run through the counting chain, shadowed when the spec asks."""
    from harness.attention.insitu.recorder import CallSites
    from harness.attention.wrappers import make_attention, shadowed_attention
    from harness.insitu_records import INSITU_DIR
    from harness.scenario.plugins import load_recorded
    from harness.tiny_ref2av.config import PipelineConfig
    from harness.tiny_ref2av.run import run_pipeline

    spec = store.read_record(run_dir / SPEC_JSON, RunSpec)
    load_recorded(spec.plugins)  # before any backend is looked up: a plugin's are names too
    # An earlier run's in-situ record is no record of this one.
    shutil.rmtree(run_dir / INSITU_DIR, ignore_errors=True)
    sites = CallSites()
    counting = make_attention(spec, schedule=spec.schedule, sites=sites)
    shadowed = None
    if spec.shadows or spec.insitu is not None:
        shadowed = shadowed_attention(
            counting, spec.shadows, spec.insitu, run_dir / INSITU_DIR, primary_name=spec.arm, sites=sites
        )
    timing = run_pipeline(
        PipelineConfig.model_validate(spec.params["pipeline"]),
        seed=spec.seed,
        prompt=spec.params["prompt"],
        attention=counting if shadowed is None else shadowed,
        out_path=run_dir / store.OUTPUT_MP4,
        latents_dir=run_dir / LATENTS_DIR if spec.params.get("save_latents") else None,
        on_step=print_step,
        lossless_path=run_dir / store.OUTPUT_LOSSLESS if spec.params.get("lossless") else None,
        site=sites.site,
    )
    if shadowed is not None:
        shadowed.recorder.close()
    store.write_record(run_dir / store.TIMING_JSON, timing)
    calls = AttnCallsRecord(
        requested=spec.attn_type,
        kv_reversed=spec.kv_reversed,
        ranks={"0": counting.rank_calls()},
        backend=counting.backend_params(),
    )
    store.write_record(run_dir / store.ATTN_CALLS_JSON, calls)
    return timing


if __name__ == "__main__":
    sys.exit(run_dir_main(None, "harness.runners.builtin", run_in_process))
