"""``harness lightx2v tiny-checkpoint|overhead``: tools for the real LightX2V."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from harness.cli.common import out
from harness.errors import HarnessError

HELP = "Tools for the real LightX2V (synthetic checkpoint, overhead)."


def tiny_checkpoint(
    out_dir: Path = typer.Argument(..., help="Empty or missing folder to write the checkpoint into."),
    root: Path = typer.Option(
        None, envvar="LIGHTX2V_ROOT", help="LightX2V checkout (its modules build the VAEs and vision tower)."
    ),
    preset: str = typer.Option(
        "tiny",
        help="tiny (CPU-sized DiT), small (GPU-sized DiT) or prod (the released width, 2 layers); "
        "head_dim 128 in all.",
    ),
    seed: int = typer.Option(0, help="The checkpoint is a function of the seed."),
    python: str = typer.Option(None, help="Interpreter with LightX2V's dependencies (default: this one)."),
):
    """Write a synthetic MiniMax-H3 checkpoint (every folder ref2av loads, random weights, tiny sizes)."""
    from harness.runners.lightx2v.checkpoint import create_checkpoint

    if root is None:
        raise HarnessError("--root: no LightX2V checkout given (or set LIGHTX2V_ROOT)", exit_code=2)
    marker = create_checkpoint(out_dir, root, preset=preset, seed=seed, python=python)
    dit = marker["dit"]
    out.print(
        f"{out_dir}: synthetic MiniMax-H3 checkpoint, preset {preset}, seed {seed}: DiT hidden "
        f"{dit['hidden_size']}, {dit['num_attention_heads']} heads x {dit['attention_head_dim']}, "
        f"{dit['num_layers']} layers; {len(marker['files'])} files",
        highlight=False,
    )


def overhead(
    scenario: str = typer.Argument(..., help="A lightx2v scenario."),
    arm: str = typer.Option(..., help="The arm to time (not a K/V-reversed one)."),
    profile: str = typer.Option(None, help="Scenario profile."),
    repeats: int = typer.Option(4, help="Pairs of runs (launcher, bare), in ABBA order."),
    out_dir: Path = typer.Option(Path("reports"), "--out", help="Root folder of results."),
):
    """DiT s/step with the harness's launcher against LightX2V uninstrumented, interleaved, with a t-test."""
    from harness.bench.overhead import measure_overhead

    result = measure_overhead(scenario, profile=profile, arm=arm, repeats=repeats, out_root=out_dir)
    sys.stdout.write(result.markdown())


COMMANDS = {
    "tiny-checkpoint": (
        tiny_checkpoint,
        "Example: harness lightx2v tiny-checkpoint /tmp/h3_tiny --root $LIGHTX2V_ROOT",
    ),
    "overhead": (
        overhead,
        "Example: harness lightx2v overhead scenarios/minimax_h3_tiny.yaml --profile gpu --arm torch_sdpa",
    ),
}
