"""`harness report` never writes outside its folder, whatever the records say: an in-situ op name with
`../` segments, a results.json heatmap name that climbs out of --out (with and without
--single-file), a campaign whose assets/ or metrics/ is a symbolic link to a folder elsewhere.
Each is run as a user would (the real command), and the folder outside is compared byte for byte."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from campaign_factory import ArmSpec, make_campaign
from cli_testutil import harness, the_error_line
from records_testutil import CPU, ONE_SEED

HOSTILE = "../../../../escape"


def snapshot(folder: Path) -> list[tuple[str, bytes | None]]:
    return sorted(
        (p.relative_to(folder).as_posix(), p.read_bytes() if p.is_file() else None) for p in folder.rglob("*")
    )


def escaped(top: Path, inside: Path) -> list[str]:
    """Files and folders under ``top`` but not under ``inside`` whose name says they came from the record."""
    return [p.as_posix() for p in top.rglob("*escape*") if inside not in p.parents]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "keep.txt").write_text("keep")
    (folder / "figures.json").write_text("{}")
    return folder


# --- in-situ names (the real shadowed campaign of insitu_testutil, copied) ----------------------------


@pytest.mark.slow
def test_an_op_name_with_dot_dot_in_the_meta_writes_nothing_outside_the_campaign(shadowed_campaign, tmp_path):
    camp = tmp_path / "a" / "b" / "camp"
    shutil.copytree(shadowed_campaign, camp)
    (camp / "results.json").unlink()  # analysed again from the records
    insitu = camp / "runs" / "ref_insitu" / "insitu"
    run_json = camp / "runs" / "ref_insitu" / "run.json"
    record = json.loads(run_json.read_text())
    for name in ("rank0.meta.json", "rank0.jsonl"):
        path = insitu / name
        path.write_text(path.read_text().replace('"sage_emul_aiter"', json.dumps(HOSTILE)))
        # a hostile campaign hashes what it wrote, so the records are read, not refused as changed
        record["outputs"][f"insitu/{name}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    run_json.write_text(json.dumps(record))
    before = snapshot(tmp_path / "a" / "b")
    res = harness("report", camp)
    assert not escaped(tmp_path, camp), escaped(tmp_path, camp)
    assert [p for p in snapshot(tmp_path / "a" / "b") if not p[0].startswith("camp/")] == [
        p for p in before if not p[0].startswith("camp/")
    ]
    assert not list(camp.rglob("insitu_heatmap_..*")), "a folder made from the name"
    if res.returncode == 3:  # refused: one line naming the record
        assert "escape" in the_error_line(res)
    else:  # sanitised: drawn under assets/ as a plain name
        assert res.returncode == 0, res.stdout + res.stderr
        readings = json.loads((camp / "results.json").read_text())["insitu"]["readings"]
        heatmaps = [r["heatmap"] for r in readings]
        assert all("/" not in h for h in heatmaps), heatmaps
        assert all((camp / "assets" / f"{h}.png").is_file() for h in heatmaps), heatmaps
        assert "is not a plain name: read as" in (camp / "report.md").read_text()  # and said so


# --- heatmap names in a results.json (a committed one, copied and edited) --------------------------------


def _hostile_results(folder: Path, heatmap: str) -> Path:
    """A copy of the committed CPU example's results.json (two in-situ readings, each naming its
    heatmap), its first heatmap renamed."""
    folder.mkdir(parents=True)
    data = json.loads(CPU.read_text())
    assert data["insitu"]["readings"][0]["heatmap"] == "insitu_heatmap_sage_emul_thuml"
    data["insitu"]["readings"][0]["heatmap"] = heatmap
    (folder / "results.json").write_text(json.dumps(data))
    return folder / "results.json"


@pytest.mark.parametrize("single", [[], ["--single-file"]], ids=["with-assets", "single-file"])
@pytest.mark.parametrize("absolute", [False, True], ids=["climbing", "absolute"])
def test_a_hostile_heatmap_name_in_results_json_is_refused_before_any_write(
    tmp_path, outside, single, absolute
):
    heatmap = str(outside / "escape") if absolute else HOSTILE
    results = _hostile_results(tmp_path / "x" / "y" / "res", heatmap)
    out = tmp_path / "x" / "y" / "pages"
    before = snapshot(tmp_path)
    res = harness("report", "--from-results", results, "--out", out, *single)
    assert res.returncode == 3, res.stdout + res.stderr
    line = the_error_line(res)
    assert "insitu.readings[0].heatmap" in line and heatmap in line, line
    assert not escaped(tmp_path, results.parent), escaped(tmp_path, results.parent)
    assert [p for p in snapshot(tmp_path) if not p[0].startswith("x/y/pages")] == before
    assert (
        not [p for p in out.rglob("*") if p.is_file()] if out.exists() else True
    )  # nothing written in --out


# --- symbolic links inside a campaign (small real campaigns of campaign_factory) ------------------------


ARMS = [ArmSpec("torch_sdpa", role="reference"), ArmSpec("cand", noise=2.0)]


@pytest.mark.parametrize("linked", ["assets", "metrics", "assets/frames"])
def test_a_campaign_folder_that_is_a_symbolic_link_is_refused_and_not_written_through(
    tmp_path, outside, linked
):
    camp = make_campaign(tmp_path / "c", ARMS)
    (camp.path / linked).parent.mkdir(parents=True, exist_ok=True)
    (camp.path / linked).symlink_to(outside)
    before = snapshot(outside)
    res = harness("report", camp.path)
    assert res.returncode == 3, res.stdout + res.stderr
    line = the_error_line(res)
    assert f"{linked}: a symbolic link" in line, line
    assert snapshot(outside) == before
    assert not (camp.path / "report.md").exists()  # refused before anything was written


def test_an_assets_link_in_the_out_folder_of_from_results_is_refused(tmp_path, outside):
    """A committed results.json rendered into a folder whose assets/ is a link elsewhere."""
    out = tmp_path / "pages"
    out.mkdir()
    (out / "assets").symlink_to(outside)
    before = snapshot(outside)
    res = harness("report", "--from-results", ONE_SEED, "--out", out)
    assert res.returncode == 3, res.stdout + res.stderr
    assert "assets: a symbolic link" in the_error_line(res)
    assert snapshot(outside) == before


def test_compare_of_two_runs_of_a_campaign_with_a_linked_metrics_is_refused(tmp_path, outside):
    camp = make_campaign(tmp_path / "c", ARMS)
    (camp.path / "metrics").symlink_to(outside)
    before = snapshot(outside)
    res = harness("compare", f"{camp.path}:torch_sdpa", f"{camp.path}:cand")
    assert res.returncode == 3, res.stdout + res.stderr
    assert "metrics: a symbolic link" in the_error_line(res)
    assert snapshot(outside) == before
