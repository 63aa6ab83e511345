"""One arm of the diffusers runner, in its own process (``python -m harness.runners.diffusers.launch
RUN_DIR``): output.mp4, timing.json, diffusers_env.json and attn_calls.json (also when it fails)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from harness.attention.wrappers import make_attention
from harness.envinfo import package_versions, resolve_device
from harness.records import AttnCallsRecord, RankCalls, Record, RunSpec
from harness.runners.common import LATENTS_DIR, SPEC_JSON, print_step, run_dir_main
from harness.runners.diffusers.dispatch import CallBook, Instrument
from harness.runners.diffusers.generate import dit_modules, generate, resolve_dtype
from harness.runners.diffusers.runner import DIFFUSERS_ENV_JSON
from harness.runners.diffusers.schema import PIPELINES
from harness.scenario.plugins import load_recorded
from harness.store import ATTN_CALLS_JSON, OUTPUT_MP4, TIMING_JSON, read_record, write_record
from harness.tiny_ref2av.run import exact_matmul

ENV_PACKAGES = ("diffusers", "transformers", "tokenizers", "torch", "sageattention", "flash-attn", "xformers")


class DiffusersRankCalls(RankCalls):
    """The run's counts. ``calls`` and ``fallbacks`` cover the DiT (the pipeline's transformers): a
    call there served by another backend than the requested one is a fallback. ``errors`` hold the
    other reasons the run is invalid (a bypass, a kernel never reached, a floor never perturbed)."""

    outside_scope: dict[str, int] = Field(default_factory=dict)  # text encoder, connectors, VAE
    bypassed: int = 0  # attention in the DiT that called torch SDPA without the dispatcher
    ops: dict[str, int] = Field(default_factory=dict)  # "backend -> kernel op" -> calls under it
    masks_dropped: dict[str, int] = Field(default_factory=dict)  # backend -> calls given without a no-op mask
    kv_reversed_calls: int = 0
    scope: list[str] = Field(default_factory=list)  # the pipeline components counted as the DiT
    finished: bool = False


class DiffusersAttnCalls(AttnCallsRecord):
    source: str = "diffusers-dispatcher"
    backend_kind: str = ""  # "dispatcher" (diffusers' own) | "harness" (registered by the harness)
    ranks: dict[str, DiffusersRankCalls] = Field(default_factory=dict)  # type: ignore[assignment]


class DiffusersEnv(Record):
    """diffusers_env.json: what the run's interpreter had (the fingerprint names the harness's)."""

    schema_version: str = Field("harness.diffusers_env/1", alias="schema")
    python: str
    packages: dict[str, str] = Field(default_factory=dict)  # diffusers, transformers, torch, ...
    pipeline_class: str
    model_path: str
    device: str
    dtype: str
    gpu: str | None = None
    dispatcher_backends: list[str] = Field(default_factory=list)  # the run's, harness ones included
    components: dict[str, str] = Field(default_factory=dict)  # component -> class
    notes: list[str] = Field(default_factory=list)


def load_pipeline(params: dict[str, Any], device: torch.device, dtype: torch.dtype) -> Any:
    """The scenario's pipeline class, from model_path, on ``device`` in ``dtype``."""
    import diffusers

    cls = getattr(diffusers, PIPELINES[params["pipeline"]["name"]].cls)
    pipe = cls.from_pretrained(params["model_path"], dtype=dtype)
    pipe.set_progress_bar_config(disable=True)
    return pipe.to(device)


def calls_record(spec: RunSpec, book: CallBook, chain: Any, finished: bool) -> DiffusersAttnCalls:
    errors = book.problems()
    check = None
    if chain is not None:  # the harness chain's own refusals and its bitwise check
        rc = chain.rank_calls()
        errors += [e for e in rc.errors if e not in errors]
        check = rc.direct_check
    if not finished:
        errors.append("the run did not finish (see stderr.log)")
    rank = DiffusersRankCalls(
        **{key: dict(getattr(book, key)) for key in ("calls", "fallbacks", "ops", "masks_dropped")},
        **{key: getattr(book, key) for key in ("bypassed", "kv_reversed_calls", "scope")},
        errors=errors,
        direct_check=check,
        outside_scope=dict(book.outside),
        finished=finished,
    )
    return DiffusersAttnCalls(
        requested=spec.attn_type, kv_reversed=spec.kv_reversed, backend_kind=book.kind, ranks={"0": rank}
    )


def run_generation(
    pipe: Any, spec: RunSpec, run_dir: Path, device: torch.device, book: CallBook
) -> tuple[Any, Any, list[str]]:
    """Instrument, select the arm's backend on the DiT, generate: (timing, harness chain, backend names)."""
    p = spec.params
    chain = make_attention(spec) if book.kind == "harness" else None  # perturbation, counts, check
    with Instrument(book, drop_trivial_masks=p["drop_trivial_masks"]) as inst:
        if chain is not None:
            inst.register_harness(spec.attn_type, chain)
        dit = dit_modules(pipe)
        for name, module in dit:
            inst.scope(name, module)
        if not inst.select(spec.attn_type, [m for _, m in dit]):
            book.error(f"no attention processor of the DiT took backend {spec.attn_type!r}")
        names = inst.backend_names()
        timing = generate(
            pipe,
            p["pipeline"],
            seed=spec.seed,
            device=device,
            out_path=run_dir / OUTPUT_MP4,
            latents_dir=run_dir / LATENTS_DIR if p["save_latents"] else None,
            on_step=print_step,
        )
    return timing, chain, names


def run_in_process(run_dir: Path) -> Any:
    wall0 = time.perf_counter()
    run_dir = Path(run_dir)
    spec = read_record(run_dir / SPEC_JSON, RunSpec)
    load_recorded(spec.plugins)  # a plugin's backends are harness backends like the harness's own
    p = spec.params
    device = torch.device(resolve_device(p["device"], context="diffusers.device"))
    dtype = resolve_dtype(p["dtype"], device)
    book = CallBook(spec.attn_type, p["backend_kind"], spec.kv_reversed)
    chain, finished, names = None, False, []
    with exact_matmul():
        t0 = time.perf_counter()
        pipe = load_pipeline(p, device, dtype)
        load_s = time.perf_counter() - t0
        try:
            timing, chain, names = run_generation(pipe, spec, run_dir, device, book)
            finished = True
        finally:
            write_record(run_dir / ATTN_CALLS_JSON, calls_record(spec, book, chain, finished))
            write_record(run_dir / DIFFUSERS_ENV_JSON, environment(pipe, p, device, dtype, names))
    timing.stages["load"] = round(load_s, 6)
    timing.wall_total_s = time.perf_counter() - wall0
    write_record(run_dir / TIMING_JSON, timing)
    return timing


def environment(
    pipe: Any, p: dict[str, Any], device: torch.device, dtype: torch.dtype, names: list[str]
) -> DiffusersEnv:
    return DiffusersEnv(
        python=sys.executable,
        packages=package_versions(ENV_PACKAGES),
        pipeline_class=type(pipe).__name__,
        model_path=p["model_path"],
        device=str(device),
        dtype=str(dtype).removeprefix("torch."),
        gpu=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        dispatcher_backends=names,
        components={name: type(part).__name__ for name, part in pipe.components.items() if part is not None},
    )


def main(argv: list[str] | None = None) -> int:
    return run_dir_main(argv, "harness.runners.diffusers.launch", run_in_process)


if __name__ == "__main__":
    sys.exit(main())
