"""``harness diffusers tiny-checkpoint|probe``: tools for the diffusers runner."""

from __future__ import annotations

from pathlib import Path

import typer

from harness.errors import Exit

HELP = "Tools for the diffusers runner (synthetic pipelines, the backend pre-flight)."


def tiny_checkpoint(
    out_dir: Path = typer.Argument(..., help="Empty or missing folder to write the pipeline into."),
    model: str = typer.Option(..., help="ltx2, wan2.1_t2v, wan2.2_t2v, wan2.1_i2v or wan2.2_i2v."),
    preset: str = typer.Option("tiny", help="tiny (CPU-sized) or small (GPU-sized: head dims 128/64)."),
    seed: int = typer.Option(0, help="The pipeline is a function of the seed."),
    python: str = typer.Option(None, help="Interpreter with diffusers and transformers (default: this one)."),
):
    """Write a synthetic diffusers pipeline folder (every component, random weights, offline)."""
    from harness.runners.diffusers.checkpoint import create_pipeline

    marker = create_pipeline(out_dir, model, preset=preset, seed=seed, python=python)
    print(
        f"{out_dir}: synthetic {model} pipeline, preset {preset}, seed {seed}; {len(marker['files'])} files"
    )


def probe(
    backend: list[str] = typer.Option(..., help="A dispatcher backend or harness backend (repeatable)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda[:N]."),
    dtype: str = typer.Option("auto", help="auto (bfloat16 on a GPU), float32, bfloat16 or float16."),
    head_dim: list[int] = typer.Option([128], help="Head dims of the test calls (repeatable)."),
):
    """The diffusers runner's pre-flight for some backends: usable here, and agreeing with exact attention?"""
    from harness.runners.diffusers.probe import probe_in_subprocess

    results = probe_in_subprocess([(b, {}) for b in backend], device=device, dtype=dtype, head_dims=head_dim)
    for r in results:
        cos = ", ".join(f"d{d} {c:.5f}" for d, c in (r.get("cosine") or {}).items())
        verdict = "ok" if r.get("ok") else f"unavailable: {r.get('reason')}"
        print(f"{r['attn_type']}: {verdict}{f' (cosine {cos})' if cos else ''}")
    if not all(r.get("ok") for r in results):
        raise typer.Exit(Exit.RUN_FAILED)


COMMANDS = {
    "tiny-checkpoint": (tiny_checkpoint, "Example: harness diffusers tiny-checkpoint ltx2_tiny --model ltx2"),
    "probe": (probe, "Example: harness diffusers probe --backend native --backend sage --device cuda"),
}
