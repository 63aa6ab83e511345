"""The exit-code contract of every command: usage errors are one line naming the flag, exit 2.

0 success; 1 a gate failed (compare --gate, history --gate, a verdict report --fail-on names); 2 bad
input or usage; 3 a run failed, was invalid or could not be measured (the table of docs/exit-codes.md
and `harness --help` say the same).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_testutil import ROOT, harness, the_error_line
from safety_scenarios import quick_scenario

from harness.cli.common import is_click_error
from harness.errors import EXIT_CODES_HELP, Exit


@pytest.mark.parametrize(
    "args, names",
    [
        ([], "a command is required"),
        (["frobnicate"], "frobnicate"),
        (["run"], "scenario"),
        (["run", "--bogus", "x.yaml"], "--bogus"),
        (["run", "--slurm-gpus", "abc", "x.yaml"], "--slurm-gpus"),
        (["run", "--slurm-time-min", "1.5", "x.yaml"], "--slurm-time-min"),
        (["compare", "a"], "run_b"),
        (["compare", "a", "b", "--format", "xml"], "--format"),
        (["report"], "campaign"),
        (["report", "--from-results", "results.json", "reports/x"], "--from-results: not with a campaign"),
        (["report", "--out", "pages", "reports/x"], "--out: only with --from-results"),
        (["scenarios"], "a command is required"),
        (["scenarios", "validate"], "files"),
        (["scenarios", "schema", "--gate", "extra"], "extra"),
        (["bench"], "a command is required"),
        (["bench", "metrics", "--frames", "many"], "--frames"),
        (["kernels"], "scenario"),
        (["env", "--jsn"], "--jsn"),
        (["lightx2v"], "a command is required"),
        (["backends", "x"], "x"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_usage_errors_are_one_line_exit_2(args, names):
    res = harness(*args)
    assert res.returncode == Exit.BAD_INPUT, res.stderr
    assert names.lower() in the_error_line(res).lower()  # click capitalises argument names, typer's copy not
    assert res.stdout == ""


@pytest.mark.parametrize(
    "extra, names",
    [
        (["--seeds", "abc"], "--seeds: 'abc' is not an integer"),
        (["--seeds", "-1"], "--seeds"),
        (["--seeds", str(2**32)], "--seeds"),
        (["--executor", "foo"], "--executor: unknown executor 'foo'"),
        (["--campaign", "/etc/x"], "--campaign: '/etc/x' is not a valid name"),
        (["--campaign", "../../x"], "--campaign"),
        (["--slurm-gpus", "-1"], "--slurm-gpus"),
        (["--resubmit-failed", "-2"], "--resubmit-failed"),
        (["--repeats", "0"], "'--repeats'"),
        (["--profile", "nope"], "unknown profile 'nope'"),
        (["--arms", "nope"], "no arm named 'nope'"),
    ],
)
def test_bad_run_flags_exit_2_before_anything_is_written(tmp_path, extra, names):
    path = quick_scenario(tmp_path)
    out = tmp_path / "out"
    dry = extra[0] not in ("--seeds", "--executor", "--campaign")  # these three: a real run
    res = harness("run", path, "--out", out, *extra, *(["--dry-run"] if dry else []))
    assert res.returncode == Exit.BAD_INPUT, res.stderr
    assert names in the_error_line(res)
    assert not out.exists(), "nothing is written for a bad flag (no campaign.json, no folder)"


def test_out_pointing_at_a_file_is_a_usage_error(tmp_path):
    path = quick_scenario(tmp_path)
    blocker = tmp_path / "a_file"
    blocker.write_text("keep me")
    for out in (blocker, blocker / "below"):
        res = harness("run", path, "--out", out)
        assert res.returncode == Exit.BAD_INPUT
        assert f"--out: {blocker} is not a folder" in the_error_line(res)
    assert blocker.read_text() == "keep me"


def test_missing_scenario_and_campaign_are_bad_input(tmp_path):
    res = harness("run", tmp_path / "nope.yaml")
    assert res.returncode == Exit.BAD_INPUT and "scenario file not found" in the_error_line(res)
    res = harness("report", tmp_path / "nothing")
    assert res.returncode == Exit.BAD_INPUT and "no such campaign directory" in the_error_line(res)
    res = harness("compare", tmp_path / "x", tmp_path / "y")
    assert res.returncode == Exit.BAD_INPUT and "no such run directory" in the_error_line(res)


def test_help_states_the_exit_codes():
    res = harness("--help")
    assert res.returncode == 0
    text = " ".join(res.stdout.split())
    assert (
        "Exit codes: 0 success; 1 a gate failed (compare --gate, history --gate, a verdict report --fail-on "
        "names); 2 bad input or usage" in text
    )
    assert "3 a run failed, was invalid or could not be measured" in text


def test_the_docs_exit_code_table_matches_the_code():
    page = (ROOT / "docs" / "exit-codes.md").read_text()
    section = page.split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| (\d+) \| ([^|]+) \|", section, flags=re.M))
    assert {int(k) for k in rows} == {int(c) for c in Exit}
    for code in (Exit.OK, Exit.GATE_FAILED, Exit.BAD_INPUT, Exit.RUN_FAILED):
        assert f"{int(code)} " in EXIT_CODES_HELP


def test_click_errors_are_recognised_from_click_and_from_typers_copy():
    """typer carries its own click; click's own errors (a library's) read alike. Both are usage errors."""
    import click
    from typer._click.exceptions import UsageError as TyperUsageError

    assert is_click_error(click.UsageError("x"))
    assert is_click_error(click.BadParameter("x"))
    assert is_click_error(TyperUsageError("x"))
    assert not is_click_error(ValueError("x"))


def test_scenario_validate_exit_codes(tmp_path: Path):
    good = quick_scenario(tmp_path)
    assert harness("scenarios", "validate", good).returncode == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("seed: 3", "seed: 3\nseed: 4"))
    res = harness("scenarios", "validate", bad)
    assert res.returncode == Exit.BAD_INPUT
    assert the_error_line(res, prefix="") == f"{bad}:4: duplicate key 'seed' (first given on line 3)"


def test_slurm_executor_without_slurm_is_refused_before_anything_is_written(tmp_path):
    path = quick_scenario(tmp_path)
    out = tmp_path / "out"
    res = harness("run", path, "--out", out, "--executor", "slurm", env={**os.environ, "PATH": str(tmp_path)})
    assert res.returncode == Exit.BAD_INPUT
    assert "--executor slurm: no sbatch on PATH" in the_error_line(res)
    assert not out.exists()


# A command whose record serializer is running when SIGTERM lands: the handler's KeyboardInterrupt
# is raised inside pydantic's JSON serializer (Rust calling back into Python), which wraps it in its
# own error. A scheduler's cancel there was "internal error (a bug)", exit 4.
SIGNAL_IN_SERIALIZER = """
import os, signal, sys
import typer
from pydantic import BaseModel, field_serializer
from harness.cli.common import run_app

class Record(BaseModel):
    x: int = 0

    @field_serializer("x")
    def _x(self, x):
        os.kill(os.getpid(), signal.SIG{name})
        for _ in range(1000):  # the Python handler runs at the next bytecode boundary, in here
            pass
        return x

app = typer.Typer()

@app.command()
def write():
    Record().model_dump_json()
    print("not interrupted")

run_app(app, [], "harness", handled=set())
"""


@pytest.mark.concurrency
@pytest.mark.parametrize("name", ["TERM", "INT"])
def test_a_signal_wrapped_by_a_c_extension_is_an_interruption_not_a_bug(name):
    res = subprocess.run([sys.executable, "-c", SIGNAL_IN_SERIALIZER.replace("{name}", name)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert res.returncode == Exit.INTERRUPTED, res.stderr
    assert res.stderr.strip().splitlines() == ["interrupted"] and not res.stdout
