"""harness history: results.json of several campaigns as one DataFrame, moves found with runs as the
samples and every test of the history corrected together (Holm), history.csv and a one-file
history.html that opens in a real chromium, and the CI gate."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "report"))
from browser import Browser, find_chromium  # noqa: E402
from campaign_factory import ArmSpec, keep_artifact, make_campaign  # noqa: E402

from harness.analysis.analyze import analyze_campaign  # noqa: E402
from harness.analysis.model import read_results  # noqa: E402
from harness.history import build_history, find_moves, gate_regressions, load_history, write_history  # noqa: E402
from harness.store import write_record  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def harness(*args, cwd=ROOT, timeout=900):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)  # fmt: skip


def _arms(cand_steps: list[float]) -> list[ArmSpec]:
    return [
        ArmSpec("torch_sdpa", role="reference", steps=[2.0, 1.0, 1.02]),
        ArmSpec("nf", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=2.0, steps=[2.0, 1.01, 1.0]),
        ArmSpec("cand", noise=1.0, steps=cand_steps),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> Path:
    """Three builds of one scenario, three runs of each arm; the third one's candidate takes twice as
    long per step. The history reads results.json alone, which the analysis writes (the report's
    pages and figures, drawn from it, are not read)."""
    root = tmp_path_factory.mktemp("builds")
    for name, steps in (("b1", [1.8, 0.80, 0.82]), ("b2", [1.8, 0.81, 0.80]), ("b3", [1.8, 1.60, 1.62])):
        analyze_campaign(make_campaign(root / name, _arms(steps), repeats=3))
    return root


def browser_or_skip() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip("chromium is not installed (run .ci/install-browser.sh, or set HARNESS_CHROMIUM)")
    return path


@pytest.fixture(scope="module")
def browser():
    """One headless chromium for the module's pages (a start costs seconds on a 2-core machine)."""
    with Browser(browser_or_skip()) as b:
        yield b


def test_dataframe_has_a_row_per_run(builds):
    df = load_history([builds])
    assert len(df) == 27 and df["campaign_path"].nunique() == 3
    for col in ("scenario", "campaign", "commit", "date", "gpu", "arm", "seed", "s_per_step", "total_s",
                "psnr_pooled", "ssim_mean", "audio_snr", "audio_cosine", "verdict"):  # fmt: skip
        assert col in df.columns, col
    cand = df[df["arm"] == "cand"].sort_values("campaign_index", kind="stable")
    assert cand["s_per_step"].tolist() == pytest.approx([0.81] * 3 + [0.805] * 3 + [1.61] * 3)
    assert cand["step_samples"].tolist()[::3] == [[0.80, 0.82], [0.81, 0.80], [1.60, 1.62]]
    words = {"within", "outside", "inconclusive", "incomplete", "invalid", "not run"}
    assert set(df["gpu"]) == {"cpu"} and set(df["verdict"][df["role"] == "candidate"]) <= words
    first = df["step_samples"].map(len) > 0  # every run; accuracy is the first repeat's
    assert df["psnr_pooled"][(df["arm"] == "cand")].notna().sum() == 3 and first.all()
    assert df["psnr_pooled"][df["arm"] == "torch_sdpa"].isna().all()  # the reference has no distance


def test_moves_and_gate(builds):
    df = load_history([builds])
    moves = find_moves(df, last=2)
    step = moves[(moves["metric"] == "s_per_step") & (moves["arm"] == "cand")].set_index("campaign_index")
    assert not step.loc[1, "moved"] and step.loc[2, "moved"] and step.loc[2, "worse"]
    assert step.loc[2, "window"] == 2 and step.loc[2, "p_adjusted"] < 0.05
    assert step.loc[2, "p_adjusted"] >= step.loc[2, "p"]  # corrected for every test of the history
    assert step.loc[2, "text"].startswith("up 0.8075 -> 1.6100 (n=6/3 runs, p=")
    lines = gate_regressions(df, moves)
    # the candidate's steps and (so) its pipeline total doubled: both are gated
    assert [ln.split(" up ")[0] for ln in lines] == [
        "tiny cand (cpu): DiT s/step",
        "tiny cand (cpu): pipeline total (s)",
    ]
    assert lines[0].startswith("tiny cand (cpu): DiT s/step up 0.8075 -> 1.6100 (n=6/3 runs, p=")
    # the same campaigns without the slow third build: nothing to gate
    two = df[df["campaign_index"] < 2]
    assert gate_regressions(two, find_moves(two, last=2)) == []


def test_build_history_says_what_it_found(builds, tmp_path):
    h = build_history([builds], tmp_path / "hist", last=2)
    assert (h.campaigns, h.runs, h.scenarios) == (3, 27, ["tiny"])
    assert len([m for m in h.moved if m.startswith("moved (worse): tiny cand DiT s/step in c1: up")]) == 1
    assert len(h.regressions) == 2 and h.regressions[0].startswith("tiny cand (cpu): DiT s/step up")
    assert h.csv_path.is_file() and h.html_path.is_file()


def test_history_page_escapes_what_results_json_says(builds, tmp_path):
    """The GPU's name is free text from results.json: on the page it is text, not markup."""
    res = json.loads(next(builds.rglob("results.json")).read_text())
    res["env"]["torch"] = {**(res["env"].get("torch") or {}), "gpus": [{"name": "<i>gpu</i>"}]}
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "results.json").write_text(json.dumps(res))
    page = build_history([tmp_path / "one"], tmp_path / "hist").html_path.read_text()
    assert "&lt;i&gt;gpu&lt;/i&gt;" in page and "<i>gpu</i>" not in page


def test_cli_writes_csv_and_one_file_page_and_gates(builds, tmp_path):
    out = tmp_path / "hist"
    res = harness("history", builds, "--out", out, "--last", "2")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("3 campaign(s), 27 run(s), scenario(s): tiny\n")
    assert "moved (worse): tiny cand DiT s/step in c1: up 0.8075 -> 1.6100" in res.stdout
    csv = pd.read_csv(out / "history.csv")
    assert len(csv) == 27 and "step_samples" in csv.columns
    html = (out / "history.html").read_text()
    assert html.count('src="data:image/png;base64,') >= 5 and 'src="http' not in html
    gated = harness("history", builds, "--out", out, "--last", "2", "--gate")
    assert gated.returncode == 1
    errors = gated.stderr.strip().splitlines()
    assert len(errors) == 2 and errors[0].startswith("regression: tiny cand (cpu): DiT s/step up")
    bad = harness("history", tmp_path / "nowhere")
    assert bad.returncode == 2 and bad.stderr.strip() == f"error: {tmp_path / 'nowhere'}: no such folder"


@pytest.mark.browser
@pytest.mark.slow
def test_history_page_in_chromium(builds, browser, tmp_path):
    df = load_history([builds])
    _, html = write_history(df, find_moves(df, last=2), tmp_path, last=2)
    page = browser.open(html.resolve().as_uri(), height=1400)
    assert page.errors == [] and page.failed == [], page.console
    assert page.requests == [html.resolve().as_uri()]  # one file: nothing else is fetched
    assert page.images_broken == 0
    assert "Significant moves" in page.body_text and "cand" in page.body_text


# The committed CPU campaign of scenarios/e2e_3step.yaml (two seeds x two repeats): what a
# `make e2e-3step` build leaves for the history to read.
E2E_3STEP = ROOT / "reports" / "examples" / "cpu" / "e2e_3step" / "results.json"
CI_ARMS = ("torch_sdpa", "torch_sdpa_kv_reversed", "sage_emul_aiter")  # `make e2e-3step`'s arms


def e2e_3step_builds(ci: Path, builds: tuple[str, ...]) -> int:
    """One results.json per build under ``ci``, each the committed e2e_3step campaign's with its
    campaign id, its date (a day apart, in build order) and CI's three arms' runs (``model_copy``);
    the runs written in all."""
    committed = read_results(E2E_3STEP)
    created = datetime.fromisoformat(committed.created_at)
    runs = [r for r in committed.runs if r.arm in CI_ARMS]
    assert {r.arm for r in runs} == set(CI_ARMS)
    for day, build in enumerate(builds):
        res = committed.model_copy(
            deep=True,
            update={
                "campaign_id": build,
                "created_at": (created + timedelta(days=day)).isoformat(),
                "runs": runs,
            },
        )
        (ci / "e2e_3step" / build).mkdir(parents=True)
        write_record(ci / "e2e_3step" / build / "results.json", res)
    return len(builds) * len(runs)


@pytest.mark.browser
@pytest.mark.slow
def test_three_e2e_3step_campaigns(browser, tmp_path):
    """What CI keeps across builds: three `make e2e-3step` campaigns' results.json (three arms each),
    then the page. The history reads results.json alone: the builds are the committed campaign's."""
    ci = tmp_path / "ci"
    runs = e2e_3step_builds(ci, ("b1", "b2", "b3"))
    res = harness("history", ci, "--out", tmp_path / "history", "--last", "2")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"3 campaign(s), {runs} run(s), scenario(s): e2e_3step\n")
    page = browser.open((tmp_path / "history" / "history.html").resolve().as_uri(), height=1600)
    shot = tmp_path / "history.png"
    shot.write_bytes(page.screenshot)
    keep_artifact(shot, "history_e2e_3step.png")
    assert page.errors == [] and page.failed == [] and page.images_broken == 0, page.console
    for text in ("Latest campaign per arm", "sage_emul_aiter", "e2e_3step: DiT s/step", "b3"):
        assert text in page.body_text or text in (tmp_path / "history" / "history.html").read_text()
