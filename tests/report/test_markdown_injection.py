"""Free text from records and inputs (a run's reason and invalid reasons, an attention type, an
environment value, results.json's words, a kernel shape's note, history's names) planted in a real
campaign (its records read through the analysis) and in copies of committed results.json and
kernels.json: report.md, pr.md, the job summary, the kernel report and history.csv carry it as text,
never as an image, a link, HTML, a heading or a formula. The markdown is read by a real
CommonMark parser (markdown-it, GFM tables on, every link destination accepted, javascript: too)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from campaign_factory import ArmSpec, make_campaign, standard_arms
from markdown_it import MarkdownIt
from records_testutil import ONE_SEED

from harness.history import build_history
from harness.kernels.report import kernels_report, write_kernels_report
from harness.kernels.results import KernelsResult
from harness.report import build_report, render_results
from harness.report.github_summary import publish_summary
from harness.store import RUN_JSON

EXAMPLES = Path(__file__).resolve().parents[2] / "reports" / "examples"
KERNELS_JSON = EXAMPLES / "h200" / "kernels_h3" / "kernels" / "kernels.json"


def markdown(result) -> str:
    return "\n".join(kernels_report(result).lines)


def hostile(tag: str) -> str:
    """Every construct that would make a markdown page fetch, link or run something, or start a block."""
    return (
        f"{tag} ![t](https://track.example/{tag}.png) [c](javascript:alert('{tag}')) "
        f"<https://auto.example/{tag}> <img src=x onerror=alert(1)> <script>alert(1)</script>"
        f"\n# Injected {tag}\n- item {tag}\n[{tag}]: https://ref.example/{tag}"
    )


def parser() -> MarkdownIt:
    md = MarkdownIt("commonmark").enable("table")
    md.validateLink = lambda url: True  # javascript: links too (GitHub's own sanitiser aside)
    return md


def tokens(text: str) -> list:
    out, todo = [], list(parser().parse(text))
    while todo:
        t = todo.pop()
        out.append(t)
        todo += t.children or []
    return out


def assert_inert(text: str, tags: list[str], where: str) -> None:
    """The planted text reached ``text`` (each tag appears) and made nothing there."""
    for tag in tags:
        assert f"track.example/{tag}" in text, f"{where}: {tag} never reached the page"
    toks = tokens(text)
    links = [t.attrGet("href") for t in toks if t.type == "link_open"]
    images = [t.attrGet("src") for t in toks if t.type == "image"]
    assert links == [], (where, links)
    assert not [s for s in images if "example" in str(s) or "//" in str(s) or ":" in str(s)], (where, images)
    html = [t.content for t in toks if t.type in ("html_inline", "html_block")]
    assert not [h for h in html if "script" in h or "img" in h or "onerror" in h], (where, html)
    heads = [t.content for t in toks if t.type == "inline" and "Injected" in t.content]
    assert all(not h.startswith("Injected") for h in heads), (where, heads)
    for t in toks:  # no heading or list item of the planted text's own
        if t.type == "inline" and t.content.startswith(("Injected", "item ")):
            pytest.fail(f"{where}: a block of the planted text: {t.content!r}")


def plant_in_run_json(camp, arm: str, **fields) -> None:
    for run in camp.path.glob(f"runs/{arm}*/{RUN_JSON}"):
        rec = json.loads(run.read_text())
        rec.update(fields)
        run.write_text(json.dumps(rec))


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A campaign whose free-text fields all carry ``hostile`` text, reported."""
    arms = standard_arms(hostile("reason"))
    arms.append(ArmSpec("odd_attn", attn_type=hostile("attn"), noise=1.0, steps=[1.8, 0.8, 0.8]))
    env = {"hostname": hostile("host"), "python": "3.11", "torch": {"version": "2.x"},
           "env": {"HARNESS_X": hostile("env")}}  # fmt: skip
    camp = make_campaign(tmp_path_factory.mktemp("planted"), arms, env=env)
    plant_in_run_json(camp, "sage_far", valid=False, invalid_reasons=[hostile("invalid")])
    return camp, build_report(camp)


def test_report_md_and_pr_md_carry_planted_text_as_text(planted):
    _, paths = planted
    report = paths.report_md.read_text()
    assert_inert(report, ["reason", "attn", "host", "env", "invalid"], "report.md")
    assert_inert(paths.pr_md.read_text(), ["reason"], "pr.md")


def test_github_summary_carries_planted_text_as_text(planted, tmp_path):
    _, paths = planted
    target = publish_summary(paths, tmp_path / "summary.md", append=False)
    assert_inert(target.read_text(), ["reason"], "github summary")


def test_tampered_results_json_renders_as_text(tmp_path):
    """results.json travels (``report --from-results``): its words and reasons are text too (a committed
    one, copied without its assets, and tampered with)."""
    folder = tmp_path / "copy"
    folder.mkdir()
    shutil.copy(ONE_SEED, folder / "results.json")
    res = json.loads((folder / "results.json").read_text())
    for run in res["runs"]:
        run["reason"] = hostile("rjreason")
        run["status"] = run["status"]
    for v in res["verdicts"]:
        v["text"] = hostile("rjverdict")
    res["errors"] = [hostile("rjerror")]
    # the sentences results.json stores are printed as they are: tampered too
    res["summary"]["incomplete"] = hostile("rjerror")
    res["summary"]["lines"].append(hostile("rjerror"))
    for r in res["review"]:
        r["line"], r["lines"] = hostile("rjverdict"), [hostile("rjverdict")]
    (folder / "results.json").write_text(json.dumps(res))
    out = render_results(folder / "results.json", folder)
    assert_inert(out.report_md.read_text(), ["rjerror"], "report.md from results.json")
    assert_inert(out.pr_md.read_text(), ["rjerror"], "pr.md from results.json")
    summary = publish_summary(out, tmp_path / "summary.md", append=False)
    assert_inert(summary.read_text(), ["rjerror"], "summary from results.json")


def test_kernel_report_carries_a_shapes_note_and_reasons_as_text(tmp_path):
    result = KernelsResult.model_validate_json(KERNELS_JSON.read_text())
    result.shapes[0].shape.note = hostile("note")
    result.device_name = hostile("device")
    result.notes.append(hostile("knote"))
    row = result.rows[0]
    row.status, row.reason = "failed", hostile("kreason") + " a|b"
    md = markdown(result)
    assert_inert(md, ["note", "device", "knote", "kreason"], "kernels report.md")
    # the page shows the same text, as text: the escapes are undone, then HTML-escaped
    sec = kernels_report(result).section
    assert any(hostile("note").replace("\n", " ") in p for p in sec.paragraphs)
    failed = next(t for t in sec.tables if t.title == "Skipped or failed")
    assert failed.rows[0][3] == (hostile("kreason") + " a|b").replace("\n", " ")
    page = write_kernels_report(result, tmp_path)["index.html"].read_text()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_history_csv_has_no_formula(tmp_path):
    """A committed results.json (one seed: a reference, a floor, two candidates), its names tampered with."""
    res = json.loads(ONE_SEED.read_text())
    for gpu in res["env"]["torch"]["gpus"]:
        gpu["name"] = '=HYPERLINK("https://track.example/x","click")'
    for run in res["runs"]:
        run["gpu"] = '=HYPERLINK("https://track.example/x","click")'
        run["status"] = "@SUM(1+1)*cmd|' /C calc'!A0" if run["arm"] == "sage_attn2" else run["status"]
    res["scenario_name"] = "+cmd"
    (tmp_path / "b1").mkdir()
    (tmp_path / "b1" / "results.json").write_text(json.dumps(res))
    h = build_history([tmp_path / "b1"], tmp_path / "hist")
    with open(h.csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    cells = [c for row in rows for c in row.values()]
    assert any("HYPERLINK" in c for c in cells)  # the text is kept, as text
    assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")], cells
    assert not [c for c in cells if c.startswith("-") and not c.lstrip("-").replace(".", "").isdigit()]
    assert all(float(r["s_per_step"]) > 0 for r in rows if r["s_per_step"])  # numbers stay numbers
