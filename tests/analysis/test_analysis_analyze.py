"""harness.analysis.analyze: a campaign analysed once; an unchanged one is never decoded again, a
changed output is measured again (and only what it touches).

Which files a `harness report` opens is seen from inside the real command: a child process runs
the CLI under an audit hook (``sys.addaudithook``) that records every file opened.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from campaign_factory import ArmSpec, make_campaign, write_run

from harness.analysis.analyze import analyze_campaign, flatten
from harness.analysis.model import ReportResults
from harness.report import build_report

ROOT = Path(__file__).resolve().parents[2]
MEDIA = (".mp4", ".mkv", ".wav", ".flac", ".npz", ".npy", ".pt")
TRACED = """
import atexit, json, os, runpy, sys
import av
opened = []

def hook(event, args):
    if event == "open" and isinstance(args[0], (str, os.PathLike)):
        opened.append(os.fspath(args[0]))

sys.addaudithook(hook)
av_open = av.open  # FFmpeg opens files itself, unseen by the audit hook: PyAV's entry traced too

def traced_open(file, *a, **k):
    if isinstance(file, (str, bytes, os.PathLike)):  # an in-memory buffer (an encoded clip) is no file
        opened.append(os.fspath(file))
    return av_open(file, *a, **k)

def dump():  # an exit handler: the program ends through them, not by returning here
    loaded = sorted(m for m in ("cv2", "torch", "scipy", "matplotlib") if m in sys.modules)
    with open(OUT, "w") as fh:
        json.dump({"opened": opened, "loaded": loaded}, fh)

atexit.register(dump)
av.open = traced_open
sys.argv = ["harness", *sys.argv[1:]]
runpy.run_module("harness.cli", run_name="__main__")
"""


def traced_report(tmp_path: Path, *args: str) -> dict:
    """Run `harness report ARGS` in a child process; the files it opened and the modules it loaded."""
    out = tmp_path / "trace.json"
    code = TRACED.replace("OUT", repr(str(out)))
    res = subprocess.run([sys.executable, "-c", code, "report", *args], capture_output=True,
                         text=True, cwd=ROOT, timeout=600)  # fmt: skip
    assert out.exists(), res.stderr[-3000:]
    trace = json.loads(out.read_text())
    trace["media"] = sorted({p for p in trace["opened"] if p.endswith(MEDIA)})
    trace["code"], trace["stderr"] = res.returncode, res.stderr
    return trace


@pytest.fixture
def analysed(tmp_path: Path):
    """Reference, noise floor (with latents), a candidate; analysed and rendered once."""
    arms = [
        ArmSpec("torch_sdpa", role="reference", latents="npz"),
        ArmSpec("nf", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=2.0, latents="npz"),
        ArmSpec("cand", noise=5.0, steps=[1.5, 0.5, 0.5], latents="npz"),
    ]
    camp = make_campaign(tmp_path / "c", arms)
    build_report(camp)
    return camp


def test_a_second_report_opens_no_media_file(analysed, tmp_path):
    before = (analysed.path / "report.md").read_text()
    trace = traced_report(tmp_path, str(analysed.path))
    assert trace["code"] == 0, trace["stderr"]
    assert trace["media"] == []  # no output.mp4, no lossless twin, no latent file
    assert trace["loaded"] == []  # no OpenCV, torch, scipy or matplotlib: nothing decoded, tested or drawn
    assert any(p.endswith("results.json") for p in trace["opened"])
    after = (analysed.path / "report.md").read_text()
    assert after.split("## 1. Speed")[1] == before.split("## 1. Speed")[1]  # the same report


def test_a_changed_output_is_measured_again_and_only_it(analysed, tmp_path):
    first = ReportResults.model_validate_json((analysed.path / "results.json").read_bytes())
    cand_before = next(c for c in first.comparisons if c.b.key == "cand")
    write_run(
        analysed.run("cand").path, ArmSpec("cand", noise=12.0, steps=[1.5, 0.5, 0.5], latents="npz"), salt=9
    )
    trace = traced_report(tmp_path, str(analysed.path))
    assert trace["code"] == 0, trace["stderr"]
    runs = analysed.runs_dir
    opened = {str(Path(p).relative_to(runs)) for p in trace["media"]}
    # the candidate's new output is measured against the reference and thumbnailed; the floor's
    # pair, its statistics, thumbnails and latents come from the cache
    assert "cand/output.mp4" in opened and "torch_sdpa/output.mp4" in opened
    assert not any(p.startswith("nf/") for p in opened), opened
    res = ReportResults.model_validate_json((analysed.path / "results.json").read_bytes())
    cands = {c.b.key: c for c in res.comparisons}
    assert not cands["cand"].metrics_cached and cands["nf"].metrics_cached
    assert cands["cand"].video.psnr_pooled < cand_before.video.psnr_pooled - 3
    assert cands["cand"].b.output_sha256 != cand_before.b.output_sha256
    # and the campaign, unchanged again, is not decoded again
    assert traced_report(tmp_path, str(analysed.path))["media"] == []


def test_other_verdict_rules_analyse_again_from_the_cache(analysed):
    """Rules given by the caller are part of what the analysis read: judged again, nothing measured."""
    from harness.scenario.verdict import VerdictRules

    seen: list[str] = []
    res = analyze_campaign(analysed, progress=seen.append, rules=VerdictRules(tolerance=50.0))
    assert any(m.startswith("compare cand") for m in seen)
    assert all(c.metrics_cached for c in res.comparisons if c.measured)
    assert res.rules.tolerance == 50.0 and "tolerance 50x" in res.verdicts[0].summary


def test_results_name_their_media_assets(analysed):
    res = ReportResults.model_validate_json((analysed.path / "results.json").read_bytes())
    for name in ("series:cand", "series:nf", "audio:torch_sdpa", "audio:cand", "spectrogram:cand"):
        assert (analysed.path / res.assets[name]).is_file(), name
    grid = res.frame_grids[0]
    assert grid.columns == ["torch_sdpa", "nf", "cand"] and grid.indices == res.frame_indices
    assert all((analysed.path / p).is_file() for cells in grid.cells.values() for p in cells.values())
    series = json.loads((analysed.path / res.assets["series:cand"]).read_text())
    assert series["schema"] == "harness.frame_series/1" and len(series["psnr"]) == 9


def test_flatten():
    rows = flatten({"torch": {"version": "2", "gpus": [{"name": "R9700", "arch": "gfx1201"}]}, "x": [1, 2]})
    assert ("torch.gpus[0].arch", "gfx1201") in rows and ("x", "1, 2") in rows


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpu_prod_sageattention2", {"sage_attn2": "inconclusive", "sage_attn2_1_0_6": "inconclusive"}),
        ("gpu_prod_sa2_insitu", {"sage_attn2": "not run", "torch_sdpa_insitu": "not run"}),
    ],
)
def test_a_committed_example_judged_again_reads_as_committed(tmp_path, name, expected):
    """judge_again on the production-shape examples (no media: their comparisons and records) gives
    the verdicts committed beside them, and judging twice changes nothing (the latent series are not
    doubled, the in-situ readings read the same)."""
    import shutil

    from harness.analysis.analyze import judge_again
    from harness.analysis.model import read_results
    from harness.store import CampaignDir

    example = Path(__file__).resolve().parents[2] / "reports/examples/h200/minimax_h3_tiny" / name
    folder = tmp_path / name
    shutil.copytree(example, folder, ignore=shutil.ignore_patterns("*.html", "*.png"))
    committed = read_results(example / "results.json")
    once = judge_again(CampaignDir(folder))
    twice = judge_again(CampaignDir(folder))
    words = {v.arm: (v.word, v.text) for v in committed.verdicts}
    assert {v.arm: (v.word, v.text) for v in once.verdicts} == words
    assert {v.arm: (v.word, v.text) for v in twice.verdicts} == words and len(twice.latents) == len(
        once.latents
    )
    assert {arm: words[arm][0] for arm in expected} == expected
    readings = [
        (r.candidate, r.word, r.ratio) for r in (committed.insitu.readings if committed.insitu else [])
    ]
    assert [
        (r.candidate, r.word, r.ratio) for r in (twice.insitu.readings if twice.insitu else [])
    ] == readings


JUDGED_AGAIN = sorted(
    p.parent
    for p in (Path(__file__).resolve().parents[2] / "reports/examples").rglob("campaign.json")
    if (p.parent / "results.json").is_file()
    and "harness.report/1" not in (p.parent / "results.json").read_text()[:60]
)


@pytest.mark.parametrize("example", JUDGED_AGAIN, ids=lambda p: p.parent.name + "/" + p.name)
def test_every_committed_example_is_its_campaign_judged_again(tmp_path, example):
    """Each committed example holding its campaign's records is what this harness judges from them:
    verdicts, in-situ readings, schedules and every stored sentence (a judgement that drifts from the
    committed examples fails here, and they are made again with judge_again)."""
    import shutil

    from harness.analysis.analyze import judge_again
    from harness.analysis.model import read_results
    from harness.store import CampaignDir

    folder = tmp_path / "c"
    shutil.copytree(example, folder, ignore=shutil.ignore_patterns("*.html", "*.png"))
    got = judge_again(CampaignDir(folder))
    committed = read_results(example / "results.json")
    keys = {"verdicts", "insitu", "schedules", "review", "summary", "floor_points", "errors"}
    assert got.model_dump(include=keys) == committed.model_dump(include=keys)
