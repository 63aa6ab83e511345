"""harness.kernels.report: the pull-request tables and the page built from them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.kernels.report import ReportText, kernels_report, kernels_summary
from harness.kernels.results import KernelsResult
from harness.store import read_record

H3 = Path(__file__).resolve().parents[2] / "reports/examples/h200/kernels_h3/kernels/kernels.json"


def markdown(result) -> str:
    return "\n".join(kernels_report(result).lines)


@pytest.mark.slow
def test_smoke_markdown_has_every_row(smoke):
    md = markdown(smoke)
    for header in ("### Accuracy", "### Speed", "### Bitwise checks", "Matmul peak bfloat16"):
        assert header in md
    for r in smoke.rows:
        assert f"| {r.shape} | {r.label} |" in md
    assert "sage_emul_thuml (emulator)" in md
    assert "| self_1k | torch_sdpa | identical | identical | identical |" in md
    assert "Of peak: n/a, no matmul peak is known on a CPU." in md and "%" not in md.split("### Speed")[1]


def test_the_page_section_is_the_markdown_as_it_reads(tmp_path):
    page = ReportText("Title")
    page.para("intro &lt;b&gt;line&lt;/b&gt;")
    page.table("Table", ["a", "b"], [["1", "<script>x</script>"]])
    page.table("Empty", ["a"], [])
    page.bullet("note")
    assert page.lines == [
        "## Title", "", "intro &lt;b&gt;line&lt;/b&gt;", "", "### Table", "", "| a | b |", "|---|---|",
        "| 1 | &lt;script&gt;x&lt;/script&gt; |", "- note",
    ]  # fmt: skip
    sec = page.section
    assert sec.title == "Title" and sec.paragraphs == ["intro <b>line</b>"] and sec.bullets == ["note"]
    (table,) = sec.tables
    assert (
        table.title == "Table" and table.headers == ["a", "b"] and table.rows == [["1", "<script>x</script>"]]
    )


def _percents(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)%", text)]


def test_of_peak_is_never_over_100_percent_and_says_why_it_is_na():
    """On the GPU a share over 100 % (the matmul measured was no peak) reads n/a with why; on a CPU
    (no known peak) every share is n/a, said once under the table and in the terminal's summary."""
    result = read_record(H3, KernelsResult)
    timed = [r for r in result.rows if r.speed is not None and r.speed.frac_of_peak is not None]
    assert timed and all(r.speed.frac_of_peak <= 1 for r in timed)
    over = timed[0].model_copy(deep=True)
    over.speed.frac_of_peak = 11.718
    result.rows[result.rows.index(timed[0])] = over
    md = markdown(result)
    speed = md.split("### Speed", 1)[1].split("###", 1)[0]
    assert f"| {over.shape} | {over.label} | " in speed and "n/a (over the measured matmul peak)" in speed
    assert max(_percents(speed)) <= 100 and "no matmul peak is known" not in md
    summary = kernels_summary(result)
    assert summary.headers[-1] == "of peak" and "no matmul peak" not in " ".join(summary.notes)
    row = next(r for r in summary.rows if r[:2] == [over.shape, over.label])
    assert row[-1] == "n/a (over the measured matmul peak)"
    on_cpu = result.model_copy(update={"device": "cpu"})
    speed = markdown(on_cpu).split("### Speed", 1)[1].split("###", 1)[0]
    cells = [line.split(" | ")[4] for line in speed.splitlines() if line.startswith(f"| {over.shape} |")]
    assert cells and set(cells) == {"n/a"} and "Of peak: n/a, no matmul peak is known on a CPU." in speed
    summary = kernels_summary(on_cpu)
    assert (
        "of peak" not in summary.headers and "Of peak: n/a, no matmul peak is known on a CPU" in summary.notes
    )


def test_the_summary_leads_with_what_report_md_leads_with():
    """Per shape and backend: report.md's first accuracy figures (cosine, rel L1) and speed (median
    ms); a skipped row says so."""
    result = read_record(H3, KernelsResult)
    md, summary = markdown(result), kernels_summary(result)
    assert len(summary.rows) == len(result.rows)
    for r, row in zip(result.rows, summary.rows, strict=True):
        assert row[:2] == [r.shape, r.label]
        if r.accuracy is not None:
            assert f"| {r.shape} | {r.label} | {row[2]} | {row[3]} |" in md
        else:
            assert row[2] == r.status
        if r.speed is not None:
            assert f"| {row[4]} | " in md and float(row[4]) == pytest.approx(r.speed.median_ms, abs=1e-3)
