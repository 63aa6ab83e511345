"""What the `harness` command says is legible: its version, help that shows a value only after
options that take one, runs named unambiguously, refusals before any table, shipped scenarios
that validate, and refusals that list the accepted names."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import typer
from cli_testutil import ROOT, harness, the_error_line, tree_digest
from typer.testing import CliRunner

from harness.cli.program import app
from harness.media import write_av
from harness.runners.diffusers.schema import SYNTHETIC_MODELS
from harness.store import sha256_file

sys.path.insert(0, str(Path(__file__).resolve().parent / "report"))
from campaign_factory import FPS, RATE, ArmSpec, base_content, make_campaign  # noqa: E402

from harness.compare.inputs import resolve_run  # noqa: E402


def test_version_is_one_line_and_loads_no_numerical_library():
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "harness.cli", "--version"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout == f"harness {importlib.metadata.version('harness')}\n"
    names = {ln.rsplit("|", 1)[1].strip() for ln in res.stderr.splitlines() if ln.startswith("import time:")}
    assert "harness.cli.program" in names  # the import list was read
    assert not {"torch", "numpy", "av"} & names


# --- help: no value shown after flags ---------------------------------------------------------


def command_paths(command, path=()):
    """Every command and subcommand of the CLI, as the words that call it."""
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from command_paths(sub, (*path, name))


COMMANDS = list(command_paths(typer.main.get_command(app)))


def test_the_tree_is_walked():
    assert {(), ("report",), ("scenarios", "validate"), ("diffusers", "tiny-checkpoint")} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "harness")
def test_help_shows_a_value_only_after_options_that_take_one(path):
    res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "250"}, prog_name="harness")
    assert res.exit_code == 0, res.output
    assert "<bool>" not in res.output
    command = typer.main.get_command(app)
    for word in path:
        command = command.commands[word]
    for param in command.params:
        if param.param_type_name != "option":
            continue
        long = max(param.opts, key=len)
        (row,) = [r for r in res.output.splitlines() if re.match(rf"^.\s+(\*\s+)?{re.escape(long)}\s", r)]
        # The columns after the option's names: its short and negative forms, then its type.
        typed = re.search(rf"{re.escape(long)}(\s+-\w+)?(\s+--[\w-]+)?(\s+-\w+)?\s+<[^>]+>", row)
        assert bool(typed) is not (param.is_flag or param.count), row


def test_report_help_shows_paths_but_no_type_after_its_flags():
    res = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "250"}, prog_name="harness")
    row = next(r for r in res.output.splitlines() if "--single-file" in r)
    assert "--with-assets" in row and "<" not in row
    assert re.search(r"--from-results\s+<path>", res.output)


# --- compare: CAMPAIGN:ARM of several runs ----------------------------------------------------


@pytest.fixture(scope="module")
def seeds_and_repeats(tmp_path_factory) -> Path:
    arms = [ArmSpec("torch_sdpa", role="reference"), ArmSpec("sage", noise=1.0)]
    return make_campaign(tmp_path_factory.mktemp("multi"), arms, seeds=(42, 43), repeats=2).path


def test_an_arm_of_several_runs_is_refused_with_the_ways_to_name_one(seeds_and_repeats):
    c = seeds_and_repeats
    res = harness("compare", f"{c}:torch_sdpa", f"{c}:sage@42")
    assert res.returncode == 2 and res.stdout == ""
    assert the_error_line(res) == (
        f"error: {c}:torch_sdpa: 4 runs (seeds 42, 43 x 2 repeats): name one as {c}:torch_sdpa@SEED "
        f"(repeat 1) or {c}:torch_sdpa@SEED~rN (repeat N >= 2), e.g. {c}:torch_sdpa@42 or {c}:torch_sdpa@43~r2"
    )


def test_a_seed_the_campaign_lacks_and_an_unknown_arm_are_named(seeds_and_repeats):
    c = seeds_and_repeats
    with pytest.raises(
        Exception, match=r"no run 'sage@44'; arm sage has 4 runs \(seeds 42, 43 x 2 repeats\)"
    ):
        resolve_run(f"{c}:sage@44")
    with pytest.raises(Exception, match=r"has no arm 'sdpa' \(its arms: sage, torch_sdpa\)"):
        resolve_run(f"{c}:sdpa")
    assert resolve_run(f"{c}:sage@43~r2").path == c / "runs" / "sage@43~r2"


def test_a_named_run_is_compared_and_its_other_repeats_are_noted(seeds_and_repeats):
    c = seeds_and_repeats
    res = harness("compare", f"{c}:torch_sdpa@43", f"{c}:sage@43~r2", "--format", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert (out["a"]["key"], out["b"]["key"]) == ("torch_sdpa@43", "sage@43~r2")
    assert out["notes"][:2] == [
        "A (torch_sdpa@43) is repeat 1 of 2 of its arm and seed; not compared here: torch_sdpa@43~r2",
        "B (sage@43~r2) is repeat 2 of 2 of its arm and seed; not compared here: sage@43",
    ]


# --- compare: refusals before anything is printed ---------------------------------------------


def write_clip(
    path: Path, frames: int = 9, width: int = 96, rate: int = RATE, audio_s: float | None = None
) -> Path:
    """The factory's scene (``frames`` frames, padded to ``width``) with a tone of ``audio_s`` seconds."""
    video, _ = base_content(42, frames=frames)
    video = [np.pad(f, ((0, 0), (0, width - f.shape[1]), (0, 0))) for f in video]
    seconds = audio_s if audio_s is not None else frames / FPS
    t = np.arange(int(rate * seconds)) / rate
    audio = np.stack([0.3 * np.sin(2 * np.pi * 220 * t)] * 2).astype(np.float32)
    write_av(path, video, audio, fps=FPS, sample_rate=rate, preset="ultrafast")
    return path


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("clips")
    (d / "junk.mp4").write_bytes(b"not a video" * 100)
    return {
        "a": write_clip(d / "a.mp4"),
        "long": write_clip(d / "long.mp4", frames=12),
        "wide": write_clip(d / "wide.mp4", width=128),
        "48k": write_clip(d / "48k.mp4", rate=48000),
        "short_audio": write_clip(d / "short_audio.mp4", audio_s=0.1),
        "junk": d / "junk.mp4",
    }


@pytest.mark.parametrize(
    "other, words",
    [
        ("long", "frame count differs: {a} has 9 frames, {b} has 12 (--truncate compares the first 9)"),
        ("wide", "frame size differs: {a} is 96x64, {b} is 128x64"),
        (
            "48k",
            "audio sample rate differs: {a} is 32000 Hz, {b} is 48000 Hz (--resample-audio resamples {b}",
        ),
        ("short_audio", "audio length differs: {a} has 0.3"),
        ("junk", "{b}: cannot open as media"),
    ],
)
def test_incomparable_files_are_refused_before_any_table(clips, other, words):
    a, b = clips["a"], clips[other]
    res = harness("compare", a, b)
    assert res.returncode == 2 and res.stdout == ""
    assert the_error_line(res).startswith("error: " + words.format(a=a, b=b))
    if other == "short_audio":
        assert the_error_line(res).endswith("(--truncate compares the shorter)")


def test_the_flags_named_compare_what_was_refused(clips):
    res = harness("compare", clips["a"], clips["long"], "--truncate", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["video"]["truncated_to"] == 9
    # Equal lengths at two rates: B's samples are counted at its own rate (refused before).
    res = harness("compare", clips["a"], clips["48k"], "--resample-audio", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["audio"]["resampled"] is True


def test_a_bad_gate_file_is_refused_before_any_table(clips, tmp_path):
    gate = tmp_path / "gate.yaml"
    gate.write_text("min_psnr: [1]\n")
    res = harness("compare", clips["a"], clips["a"], "--gate", gate)
    assert res.returncode == 2 and res.stdout == ""
    assert str(gate) in the_error_line(res)


def test_runs_that_cannot_be_compared_leave_nothing_in_the_campaign(tmp_path):
    camp = make_campaign(tmp_path, [ArmSpec("torch_sdpa", role="reference"), ArmSpec("cand")])
    ref = camp.run("torch_sdpa")
    write_clip(ref.output, frames=12)
    rec = ref.record()  # as the run recorded it: a run that made 12 frames
    rec.outputs["output.mp4"] = sha256_file(ref.output)
    ref.write(rec)
    before = tree_digest(camp.path)
    res = harness("compare", f"{camp.path}:torch_sdpa", f"{camp.path}:cand")
    assert res.returncode == 2 and res.stdout == ""
    line = the_error_line(res)
    assert (
        line.startswith(f"error: frame count differs: {ref.output} has 12 frames, ") and "--truncate" in line
    )
    assert tree_digest(camp.path) == before  # no comparison record, no cache entry


# --- scenarios validate: every shipped scenario -----------------------------------------------


def test_every_shipped_scenario_validates_on_a_machine_without_its_paths():
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "scenarios").glob("*.yaml"))
    env = {k: v for k, v in os.environ.items() if k not in ("LIGHTX2V_ROOT", "MINIMAX_H3_MODEL")}
    res = harness("scenarios", "validate", *files, env=env)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert [ln.split(":", 1)[0] for ln in lines] == files and all(": ok (" in ln for ln in lines)
    tiny = next(ln for ln in lines if ln.startswith("scenarios/minimax_h3_tiny.yaml"))
    assert tiny.endswith("; a run needs LIGHTX2V_ROOT set (unset here))")
    # What validate lets stand for itself, a run still requires, before writing anything.
    res = harness("run", "scenarios/minimax_h3_tiny.yaml", "--out", ROOT / "no_such_out", env=env)
    assert res.returncode == 2 and "LIGHTX2V_ROOT is not set" in the_error_line(res)
    assert not (ROOT / "no_such_out").exists()


# --- diffusers tiny-checkpoint: the accepted names --------------------------------------------


def test_an_unknown_synthetic_model_is_refused_with_the_accepted_names(tmp_path):
    res = harness("diffusers", "tiny-checkpoint", tmp_path / "out", "--model", "ltx-2")
    assert res.returncode == 2 and res.stdout == ""
    line = the_error_line(res)
    assert line == f"error: --model ltx-2: expected one of {', '.join(SYNTHETIC_MODELS)}"
    assert "ltx2" in SYNTHETIC_MODELS and "wan2.1_t2v" in SYNTHETIC_MODELS
    assert not (tmp_path / "out").exists()
    # ltx2 is one of them: refused here only for the folder, which is not empty.
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    res = harness("diffusers", "tiny-checkpoint", tmp_path / "full", "--model", "ltx2")
    assert res.returncode == 2 and "not an empty folder" in the_error_line(res)
