"""A results.json from elsewhere (`report --from-results`, history) is held to bounds before use:
step times of 1e308, a number that is not finite, 100k-deep nesting or a file over the stated
cap are one line naming it, exit 3 (main: exit 4, or 500 MB read and written), nothing written;
text that reaches a figure is drawn as written (matplotlib's mathtext does not read `$...$`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_testutil import harness
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure

from harness.analysis.model import (
    MAX_DEPTH,
    MAX_RESULTS_BYTES,
    ResultsFileError,
    load_results_json,
    read_results,
)
from harness.report.plots import png_bytes

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "reports" / "examples" / "h200" / "e2e_gpu" / "3step" / "results.json"  # the H200 example


def example() -> dict:
    return json.loads(EXAMPLE.read_text())


def tamper_steps(d: dict) -> str:
    d["runs"][1]["step_seconds"] = [1e308, 1e308, 1e308]
    return json.dumps(d)


def tamper_literal_nan(d: dict) -> str:
    d["runs"][0]["s_per_step"] = float("nan")
    return json.dumps(d)  # a literal NaN: the harness writes "NaN" as a string


def tamper_overflow(d: dict) -> str:
    return json.dumps(d).replace('"pipeline_total_s": ', '"pipeline_total_s": 1e400, "x": ', 1)


def tamper_negative(d: dict) -> str:
    d["runs"][2]["step_seconds"] = [0.5, -0.5, -0.5]
    return json.dumps(d)


def tamper_nesting(d: dict) -> str:
    return json.dumps(d)[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}"


TAMPERED = {
    "1e308 step times": (tamper_steps, "runs[1]"),
    "literal NaN": (tamper_literal_nan, "not a finite number"),
    "1e400": (tamper_overflow, "not a finite number"),
    "negative steps": (tamper_negative, "negative"),
    "100k-deep nesting": (tamper_nesting, f"nested deeper than {MAX_DEPTH}"),
}


def the_error(res) -> str:
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    return lines[0]


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_a_tampered_results_json_is_one_line_exit_3_nothing_written(tmp_path, case):
    tamper, said = TAMPERED[case]
    results = tmp_path / "in" / "results.json"
    results.parent.mkdir()
    results.write_text(tamper(example()))
    out = tmp_path / "pages"
    res = harness("report", "--from-results", results, "--out", out)
    assert res.returncode == 3, res.stderr  # main: 4 (a traceback) or 0
    line = the_error(res)
    assert line.startswith("error: ") and str(results) in line and said in line, line
    assert not out.exists() or not any(out.rglob("*")), sorted(out.rglob("*"))


def test_a_results_json_over_the_cap_is_not_read(tmp_path):
    results = tmp_path / "results.json"
    text = json.dumps(example())
    with open(results, "w") as fh:  # valid JSON of MAX_RESULTS_BYTES + 1 MiB: whitespace after the object
        fh.write(text)
        fh.truncate(MAX_RESULTS_BYTES + (1 << 20))
    with open(results, "r+b") as fh:
        fh.seek(len(text))
        fh.write(b" " * 16)
    out = tmp_path / "pages"
    res = harness("report", "--from-results", results, "--out", out)
    assert res.returncode == 3, res.stderr
    line = the_error(res)
    assert str(results) in line and f"over the {MAX_RESULTS_BYTES >> 20} MiB" in line, line
    assert not out.exists() or not any(out.rglob("*"))


def test_the_example_reads_and_the_loader_is_the_one_read_results_uses(tmp_path):
    assert load_results_json(EXAMPLE)["campaign_id"] == read_results(EXAMPLE).campaign_id
    bad = tmp_path / "results.json"
    bad.write_text(tamper_steps(example()))
    for read in (load_results_json, read_results):
        with pytest.raises(ResultsFileError, match=r"runs\[1\]"):
            read(bad)


def test_a_gpu_name_of_dollars_renders_as_written(tmp_path):
    d = example()
    d["env"]["torch"]["gpus"][0]["name"] = r"$x$ \$ $\frac$"
    d["env_summary"][2][1] = r"$x$ \$ $\frac$"
    folder = tmp_path / "copy"
    shutil.copytree(EXAMPLE.parent, folder)
    (folder / "results.json").write_text(json.dumps(d))
    out = tmp_path / "pages"
    res = harness("report", "--from-results", folder / "results.json", "--out", out)
    assert res.returncode in (0, 3), res.stderr  # 3: the example's assets are not beside it
    assert "Traceback" not in res.stderr and (out / "report.md").is_file()


BAD_MATHTEXT = [r"$\frac$", "$x$", "a $ b", r"$\undefined{x}$", "$$", r"\$x$"]


@pytest.mark.parametrize("text", BAD_MATHTEXT)
def test_every_text_of_a_figure_is_drawn_as_written(text):
    """Titles, axis labels, legend entries, annotations and text tick labels (main: a ValueError
    from the mathtext parser, exit 4, for the first and fourth)."""
    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.plot([1, 2], [1, 2], label=text)
    ax.set_title(text)
    ax.set_xlabel(text)
    ax.annotate(text, (1, 1))
    ax.set_xticks([1, 2], [text, "b"])
    ax.legend()
    png = png_bytes(fig)
    assert png.startswith(b"\x89PNG")
    assert ax.get_title() == text.replace("$", r"\$")


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet=st.sampled_from("$\\{}^_ax"), max_size=12))
def test_any_label_renders(text):
    fig = Figure(figsize=(2, 1))
    ax = fig.subplots()
    ax.set_title(text)
    assert png_bytes(fig).startswith(b"\x89PNG")
