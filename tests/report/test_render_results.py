"""harness.report.render_results: a results.json rendered alone (a CI artifact, anywhere), with its
assets or without them; and one of an older schema refused in one line that says how to re-analyse."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from records_testutil import ONE_SEED

from harness.errors import HarnessError
from harness.report import render_results

ROOT = Path(__file__).resolve().parents[2]


def body(md: str) -> str:
    """report.md without its first lines (title, generation time) and its image links."""
    return re.sub(r"!\[[^]]*\]\([^)]*\)", "IMG", md.split("## 1. Speed", 1)[1])


def test_a_copy_with_its_assets_renders_the_same_report(single_report, tmp_path):
    src = single_report.campaign.path
    art = tmp_path / "artifact"
    art.mkdir()
    shutil.copy(src / "results.json", art / "results.json")
    shutil.copytree(src / "assets", art / "assets", ignore=shutil.ignore_patterns("*.png", "figures.json"))
    for png in (src / "assets" / "frames").glob("*.png"):
        shutil.copy(png, art / "assets" / "frames" / png.name)
    for folder in ("audio", "diff"):
        for png in (src / "assets" / folder).glob("*.png"):
            shutil.copy(png, art / "assets" / folder / png.name)
    paths = render_results(art / "results.json")
    assert (
        paths.report_md == art / "report.md"
        and paths.pr_md.read_text() == single_report.paths.pr_md.read_text()
    )
    assert body(paths.report_md.read_text()) == body(single_report.paths.report_md.read_text())
    assert set(paths.figures) == set(single_report.paths.figures)  # drawn here from the numbers and assets
    assert "asset missing" not in paths.report_md.read_text()


def test_without_the_pages_own_assets_report_md_is_whole(single_report, tmp_path):
    """The difference thumbnails, audio clips and spectrogram differences are the page's: a copy
    without them (a committed example keeps no media) renders report.md as with them, no note, and
    the page names a missing clip where it would play (a missing difference is not drawn)."""
    src = single_report.campaign.path
    kept = tmp_path / "kept"
    page_only = ("diff", "*.webm", "*.specdiff.*", "spectrogram_diff.png", "*.html", "*.md")
    shutil.copytree(src, kept, ignore=shutil.ignore_patterns(*page_only, "runs", "metrics"))
    assert not list(kept.rglob("*.webm")) and not (kept / "assets" / "diff").exists()
    paths = render_results(kept / "results.json")
    md = paths.report_md.read_text()
    assert "asset missing" not in md
    assert body(md) == body(single_report.paths.report_md.read_text())
    assert re.search(r"missing: assets/audio/[^<]*\.webm", paths.index_html.read_text())


def test_without_its_assets_the_page_names_them_missing(tmp_path):
    """The committed one-seed results.json copied alone (its assets left behind)."""
    alone = tmp_path / "alone" / "results.json"
    alone.parent.mkdir()
    shutil.copy(ONE_SEED, alone)
    out = tmp_path / "out"
    paths = render_results(alone, out, single_file=True)
    assert paths.index_html == out / "index.html" and not (alone.parent / "index.html").exists()
    md = paths.report_md.read_text()
    assert "asset missing: assets/series/sage_attn2.json" in md and "missing: assets/frames/" in md
    assert "per_frame" not in paths.figures and "step_times" in paths.figures  # drawn from results.json alone
    html = paths.index_html.read_text()
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)  # what exists is inlined
    assert "asset missing: assets/audio/torch_sdpa.json" in html


def test_a_results_json_of_an_older_schema_is_refused_in_one_line(tmp_path):
    """No older schema is migrated: the committed H200 example (/5) written as /4 is one line naming
    the file, both schemas and the command that analyses its campaign again (exit 2, nothing
    written); that command does, as a results.json of another schema is never reused."""
    from cli_testutil import harness

    from harness.analysis.analyze import reusable

    example = ROOT / "reports" / "examples" / "h200" / "e2e_gpu" / "3step"
    campaign = tmp_path / "my campaign"
    shutil.copytree(example, campaign)
    results = campaign / "results.json"
    raw = json.loads(results.read_text())
    digest = raw["inputs_digest"]
    assert raw["schema"] == "harness.report/7" and reusable(results, digest) is not None
    results.write_text(json.dumps({**raw, "schema": "harness.report/4"}))
    out = tmp_path / "pages"
    res = harness("report", "--from-results", results, "--out", out)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.splitlines() == [
        f"error: {results}: schema harness.report/4 is older than this harness reads (harness.report/7); "
        f"re-analyse its campaign with this harness: harness report {shlex.quote(str(campaign))}"
    ]
    assert shlex.quote(str(campaign)) == f"'{campaign}'"  # a folder with a space: quoted for the shell
    assert not out.exists()
    assert reusable(results, digest) is None  # `harness report CAMPAIGN` analyses it again


def test_not_a_results_json_is_one_line(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text('{"schema": "harness.report/1", "campaign_id": "c"}')
    with pytest.raises(
        HarnessError,
        match=r"results.json: schema harness.report/1 is older than this harness reads \(harness.report/7\); "
        f"re-analyse its campaign with this harness: harness report {re.escape(shlex.quote(str(tmp_path)))}$",
    ):
        render_results(bad)
    bad.write_text("{}")
    with pytest.raises(HarnessError, match="not a harness results.json"):
        render_results(bad)
    with pytest.raises(HarnessError, match="results.json not found"):
        render_results(tmp_path / "absent.json")


def test_a_comparison_names_its_runs_by_key_in_the_file_and_holds_them_when_read(tmp_path):
    """results.json keeps each run's summary once: a comparison names its runs by key and the
    conventions stand once; read back, every comparison holds both summaries and the conventions
    as analysed. A key that names no run is one line (exit 3 through the command, nothing written)."""
    from cli_testutil import harness

    from harness.analysis.model import read_results
    from harness.compare.pairwise import CONVENTIONS

    example = ROOT / "reports" / "examples" / "h200" / "e2e_gpu" / "3step" / "results.json"
    raw = json.loads(example.read_text())
    runs = {r["key"] for r in raw["runs"]}
    assert raw["comparisons"] and all(c["a"] in runs and c["b"] in runs for c in raw["comparisons"])
    # conventions other than this harness's (an example analysed before a wording changed) stay
    assert all(c["conventions"] != CONVENTIONS for c in raw["comparisons"] if "conventions" in c)
    cpu = json.loads((ROOT / "reports" / "examples" / "cpu" / "e2e_3step" / "results.json").read_text())
    assert cpu["comparisons"] and not any("conventions" in c for c in cpu["comparisons"])
    res = read_results(example)
    assert all(c.a == res.run(c.a.key) and c.b == res.run(c.b.key) for c in res.comparisons)
    cpu_res = read_results(ROOT / "reports" / "examples" / "cpu" / "e2e_3step" / "results.json")
    assert all(c.conventions == CONVENTIONS for c in cpu_res.comparisons)
    again = tmp_path / "again.json"
    again.write_text(res.model_dump_json(by_alias=True))
    assert again.read_text() == example.read_text()  # written as it was read
    # a comparison whose summary is not among the runs (edited in memory) is written whole
    odd = res.comparisons[0].model_copy(
        update={"b": res.comparisons[0].b.model_copy(update={"notes": ["x"]})}
    )
    written = json.loads(res.model_copy(update={"comparisons": [odd]}).model_dump_json(by_alias=True))
    assert written["comparisons"][0]["a"] == odd.a.key and written["comparisons"][0]["b"]["notes"] == ["x"]
    bad = tmp_path / "c" / "results.json"
    bad.parent.mkdir()
    raw["comparisons"][1]["b"] = "nobody"
    bad.write_text(json.dumps(raw))
    res = harness("report", "--from-results", bad, "--out", tmp_path / "pages")
    assert res.returncode == 3 and res.stderr.splitlines() == [
        f"error: {bad}: not a harness results.json ((top level): Value error, comparisons[1].b: no run "
        "'nobody' among runs)"
    ], res.stderr
    assert not (tmp_path / "pages").exists()


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=JSONISH, a=JSONISH, b=JSONISH)
def test_hostile_run_keys_and_comparison_names_are_one_line_or_read(tmp_path, key, a, b):
    """Whatever a results.json holds where a run's key and a comparison's runs stand, it is read or
    refused in one line (a HarnessError), never another exception."""
    from harness.analysis.model import read_results

    raw = json.loads(
        (ROOT / "reports" / "examples" / "h200" / "minimax_h3_tiny" / "gpu" / "results.json").read_text()
    )
    raw["runs"][0]["key"] = key
    raw["comparisons"][0]["a"], raw["comparisons"][0]["b"] = a, b
    path = tmp_path / "results.json"
    path.write_text(json.dumps(raw))
    try:
        read_results(path)
    except HarnessError as err:
        assert "\n" not in str(err) and str(err).startswith(str(path))
