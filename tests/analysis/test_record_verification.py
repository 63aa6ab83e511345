"""Records are verified where they are read: an output.mp4 that is not the file its run.json
hashed (two arms' outputs swapped, one replaced) is named, the run is not judged, and
`harness report` and `harness compare` exit 3; the check costs no second read of an unchanged
output (the hash memo keeps it)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from campaign_factory import ArmSpec, make_campaign
from cli_testutil import harness

from harness.analysis.model import read_results
from harness.compare import hashes
from harness.compare.hashes import HASHES_JSON, FileHashes
from harness.compare.summary import summarize_run
from harness.store import CampaignDir

ARMS = [
    ArmSpec("torch_sdpa", role="reference"),
    ArmSpec("floor", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=2.0),
    ArmSpec("close", noise=2.0),
    ArmSpec("far", noise=14.0),
]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> CampaignDir:
    return make_campaign(tmp_path_factory.mktemp("verify"), ARMS)


@pytest.fixture
def camp(pristine: CampaignDir, tmp_path: Path) -> CampaignDir:
    dest = tmp_path / "c1"
    shutil.copytree(pristine.path, dest)
    return CampaignDir(dest)


def swap(camp: CampaignDir, a: str, b: str) -> None:
    pa, pb = camp.run(a).output, camp.run(b).output
    tmp = pa.with_suffix(".swap")
    pa.rename(tmp)
    pb.rename(pa)
    tmp.rename(pb)


def error_lines(res) -> list[str]:
    assert "Traceback" not in res.stderr, res.stderr
    return [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]


def test_swapped_outputs_are_named_not_judged_and_exit_3(camp):
    swap(camp, "close", "far")
    res = harness("report", camp.path)
    assert res.returncode == 3, res.stderr  # main: 0, and "far" judged on "close"'s output
    errors = error_lines(res)
    for arm in ("close", "far"):
        out = camp.run(arm).output
        named = [e for e in errors if str(out) in e and "sha256" in e and "run.json" in e]
        assert len(named) == 1, errors  # one line per run, naming the run's file
    results = json.loads((camp.path / "results.json").read_text())
    status = {r["key"]: r["status"] for r in results["runs"]}
    assert status["close"] == status["far"] == "damaged" and status["floor"] == "ok"
    measured = {c.b.key for c in read_results(camp.path / "results.json").comparisons if c.video}
    assert measured == {"floor"}  # neither swapped run is compared, let alone judged
    words = {v["arm"]: v.get("word") for v in results["verdicts"]}
    assert words["close"] not in ("within", "outside", "inconclusive"), words
    assert words["far"] not in ("within", "outside", "inconclusive"), words
    assert "INCOMPLETE" in (camp.path / "pr.md").read_text()


def test_a_reference_output_replaced_by_a_candidate_is_named(camp):
    shutil.copyfile(camp.run("far").output, camp.run("torch_sdpa").output)
    res = harness("report", camp.path)
    assert res.returncode == 3, res.stderr
    ref = str(camp.run("torch_sdpa").output)
    assert any(ref in e and "sha256" in e for e in error_lines(res)), res.stderr


def test_compare_of_a_swapped_run_exits_3_naming_it(camp):
    swap(camp, "torch_sdpa", "far")
    res = harness("compare", f"{camp.path}:torch_sdpa", f"{camp.path}:close")
    assert res.returncode == 3, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert str(camp.run("torch_sdpa").output) in res.stderr and "sha256" in res.stderr


def test_an_unchanged_campaign_verifies_without_reading_outputs_again(camp, monkeypatch):
    """The digest check rides on the hash memo: the second look at an unchanged run hashes nothing."""
    hashed: list[Path] = []  # files read to learn their hash
    monkeypatch.setattr(hashes, "sha256_file", lambda p, read=hashes.sha256_file: hashed.append(p) or read(p))
    memo = camp.metrics_dir / HASHES_JSON
    first = FileHashes(memo)
    assert summarize_run(camp.run("close"), hashes=first).status == "ok"
    first.save()
    again = FileHashes(memo)
    hashed.clear()
    assert summarize_run(camp.run("close"), hashes=again).status == "ok"
    assert hashed == []
    swap(camp, "close", "far")  # a rename changes the files' identity: hashed again, and caught
    third = FileHashes(memo)
    s = summarize_run(camp.run("close"), hashes=third)
    assert s.status == "damaged" and str(camp.run("close").output) in (s.reason or "")
    assert len(hashed) == 1


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_timing_json_edited_after_the_run_is_named_and_gives_no_speed(camp):
    timing = camp.run("close").file("timing.json")
    _edit_json(timing, lambda d: [s.update(seconds=s["seconds"] / 3) for s in d["steps"]])  # "3x faster"
    s = summarize_run(camp.run("close"))
    assert s.status == "damaged" and str(timing) in s.reason and "sha256" in s.reason, s.reason
    res = harness("report", camp.path)
    assert res.returncode == 3 and any(str(timing) in e for e in error_lines(res)), res.stderr
    arm = next(a for a in json.loads((camp.path / "results.json").read_text())["arms"] if a["arm"] == "close")
    assert arm["runs_ok"] == 0 and not any(t.get("measured") for t in arm["speed"].values()), arm["speed"]


def test_an_attn_calls_json_edited_after_the_run_is_named(camp):
    calls = camp.run("far").file("attn_calls.json")
    _edit_json(calls, lambda d: d.update(requested="sage_attn2"))
    s = summarize_run(camp.run("far"))
    assert s.status == "damaged" and str(calls) in s.reason


def test_a_recorded_name_outside_the_run_folder_is_never_read(camp, tmp_path):
    run_json = camp.run("close").run_json
    _edit_json(run_json, lambda d: d["outputs"].update({"../../../../etc/hostname": "0" * 64}))
    s = summarize_run(camp.run("close"))
    assert s.status == "damaged" and "'../../../../etc/hostname', not a file of the run folder" in s.reason
