"""The diffusers runner: one pipeline call per arm in a child process (``launch``); its pre-flight
probes every backend the plan named once per environment, before any pipeline is loaded."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.records import RunSpec
from harness.runners import common
from harness.runners.base import Launch, Runner
from harness.runners.common import LATENTS_DIR, SPEC_JSON, ProbeBatch, absolute_path, not_found, search_path
from harness.runners.diffusers.probe import probe_in_subprocess
from harness.runners.diffusers.schema import CALL_KEYS, DIFFUSERS_ENV_JSON, PIPELINES

LAUNCH_MODULE = "harness.runners.diffusers.launch"
# Block fields that make the pipeline call and its mp4 (spec params "pipeline").
CALL_FIELDS = {
    *CALL_KEYS,
    *"pipeline image_path frame_rate max_sequence_length call_kwargs crf x264_preset".split(),
}
NOT_PLANNED = "diffusers: the run spec carries no diffusers parameters (re-plan the campaign)"
HEAD_DIM_KEYS = ("attention_head_dim", "audio_attention_head_dim")  # of the transformer's config.json
# Every backend the plan named, by probe environment: the first pre-flight there probes them together.
PROBES = ProbeBatch()


def head_dims(params: dict[str, Any]) -> list[int]:
    """The DiT's attention head dims: from the model's transformer config, else the synthetic preset's."""
    config = Path(params["model_path"]) / "transformer" / "config.json"
    found: list[int] = []
    try:
        data = json.loads(config.read_text())
        found = [data[k] for k in HEAD_DIM_KEYS if isinstance(data.get(k), int)]
    except (OSError, ValueError):
        synthetic = params.get("synthetic_checkpoint")
        if synthetic:
            from harness.runners.diffusers.checkpoint import SIZES

            sizes = SIZES[synthetic["preset"]]
            audio = [sizes["audio_head_dim"]] if PIPELINES[params["pipeline"]["name"]].audio else []
            found = [sizes["head_dim"], *audio]
    return list(dict.fromkeys(found)) or [128]


def probe_question(spec: RunSpec) -> tuple[tuple, tuple[str, str]]:
    """The probe process a spec's pre-flight asks, and its question there (backend and options)."""
    p = spec.params
    group = (
        tuple(f"{x.path}:{x.sha256}" for x in spec.plugins),  # a probe imports the run's plugins
        p.get("python") or sys.executable,
        p["device"],
        p["dtype"],
        tuple(head_dims(p)),
        tuple(sorted(spec.env.items())),
    )
    return group, (spec.attn_type, json.dumps(spec.attn_options, sort_keys=True))


def run_env(env: dict[str, str]) -> dict[str, str]:
    """This harness first on PYTHONPATH (after ``env``'s): any interpreter imports the planning harness."""
    rest = env.get("PYTHONPATH") or os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": search_path(common.HARNESS_IMPORT_ROOT, rest), "PYTHONUNBUFFERED": "1"}


def model_problem(p: dict[str, Any]) -> str | None:
    """Why the model folder cannot serve the pipeline (None when it can, or when prepare writes it)."""
    from harness.runners.diffusers.checkpoint import MARKER, read_marker

    model = Path(p["model_path"])
    wanted = p.get("synthetic_checkpoint")
    if wanted:
        marker = read_marker(model)
        keys = ("model", "preset", "seed")
        have = None if marker is None else {k: marker.get(k) for k in keys}
        nonempty = model.exists() and (not model.is_dir() or any(model.iterdir()))
        asked = {k: wanted[k] for k in keys}
        return common.synthetic_problem(
            "diffusers.model_path", model, "synthetic pipeline", MARKER, have, asked, nonempty
        )
    index = model / "model_index.json"
    try:
        cls = json.loads(index.read_text()).get("_class_name", "")
    except (OSError, ValueError):
        return f"diffusers.model_path {model}: no readable model_index.json (not a diffusers pipeline folder)"
    name = p["pipeline"]["name"]
    family = PIPELINES[name].family
    if not str(cls).lower().startswith(family):
        return f"diffusers.model_path {model}: holds a {cls}, not an {family} pipeline ({name})"
    return None


class DiffusersRunner(Runner):
    def resolve_params(self, scenario: Any, arm: Any, profile: str | None) -> dict[str, Any]:
        from harness.attention.registry import BACKENDS

        block = common.effective_block(
            scenario, arm, profile, "diffusers", "call_kwargs", lambda base, over: {**base, **over}, tidy=True
        )
        synthetic = None
        if block.synthetic_checkpoint is not None:
            synthetic = {**block.synthetic_checkpoint.model_dump(), "model": block.synthetic_model}
        call = block.model_dump(include=CALL_FIELDS)
        call["name"] = call.pop("pipeline")
        call["image_path"] = absolute_path(block.image_path) if block.image_path else None
        return {
            # What is generated and how it is encoded (the report reads crf and x264_preset here).
            "pipeline": call,
            "model_path": absolute_path(block.model_path),
            "synthetic_checkpoint": synthetic,
            **block.model_dump(include={"device", "dtype", "save_latents", "drop_trivial_masks", "python"}),
            **({"lossless": True} if block.lossless else {}),  # absent when off: the runs before it were so
            "backend_kind": "harness" if arm.attn_type in BACKENDS.names() else "dispatcher",
        }

    def expect_preflights(self, specs: list[RunSpec]) -> None:
        """Every planned backend of an environment is probed by one process (``preflight``)."""
        for spec in specs:
            if "pipeline" in spec.params:
                group, backend = probe_question(spec)
                PROBES.expect(group, backend, backend)

    def preflight(self, spec: RunSpec) -> str | None:
        p = spec.params
        if "pipeline" not in p:
            return NOT_PLANNED
        if problem := model_problem(p):
            return problem
        image = p["pipeline"].get("image_path")
        if image and not Path(image).is_file():
            return f"diffusers.image_path {image}: not found"
        if not_found(p.get("python")):
            return f"diffusers.python {p['python']}: not found"

        # Probed together with every backend the plan named for the same environment.
        def ask(backends: list[tuple[str, str]]) -> list[dict[str, Any]]:
            return probe_in_subprocess(
                [(name, json.loads(options)) for name, options in backends],
                device=p["device"],
                dtype=p["dtype"],
                head_dims=head_dims(p),
                python=p.get("python"),
                env={**spec.env, **run_env(spec.env)},
                plugins=spec.plugins,
            )

        group, mine = probe_question(spec)
        result = PROBES.answer(group, mine, mine, ask)
        if not result.get("ok"):
            return f"backend {spec.attn_type}: {result.get('reason') or 'the pre-flight probe failed'}"
        return None

    def prepare(self, spec: RunSpec, run_dir: Path, *, dry_run: bool = False) -> Launch:
        from harness.runners.diffusers.checkpoint import create_pipeline, read_marker
        from harness.safe_write import atomic_write_text

        p = spec.params
        if "pipeline" not in p:
            raise HarnessError(NOT_PLANNED)
        run_dir = Path(os.path.abspath(run_dir))
        launch = Launch(
            command=[p.get("python") or sys.executable, "-m", LAUNCH_MODULE, str(run_dir)],
            env=run_env(spec.env),
            gpus=1 if str(p["device"]).startswith("cuda") else 0,
        )
        if dry_run:
            return launch
        wanted = p.get("synthetic_checkpoint")
        if wanted and read_marker(p["model_path"]) is None:
            if problem := model_problem(p):
                raise HarnessError(problem)
            env = {**spec.env, **run_env(spec.env)}
            create_pipeline(
                p["model_path"], wanted["model"], wanted["preset"], wanted["seed"], p.get("python"), env
            )
        shutil.rmtree(run_dir / LATENTS_DIR, ignore_errors=True)
        (run_dir / DIFFUSERS_ENV_JSON).unlink(missing_ok=True)
        atomic_write_text(run_dir / SPEC_JSON, spec.model_dump_json(indent=2))
        return launch
