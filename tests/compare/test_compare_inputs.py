"""harness compare on mp4 files: the same metrics, formats and gates as on runs; speed says 'no timing'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from campaign_factory import FPS, RATE, ArmSpec, base_content, perturb, write_run
from cli_testutil import harness

from harness.compare.inputs import INGEST_HINT, compare_inputs, is_media_file
from harness.compare.pairwise import compare_runs
from harness.compare.summary import stat_fields
from harness.media import write_av
from harness.store import sha256_file


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("files")
    frames, audio = base_content(42)
    out = {"a": d / "a.mp4", "b": d / "b.mp4", "long": d / "long.mp4"}
    write_av(out["a"], frames, audio, fps=FPS, sample_rate=RATE, preset="ultrafast")
    f, a = perturb(frames, audio, 3.0, 1)
    write_av(out["b"], f, a, fps=FPS, sample_rate=RATE, preset="ultrafast")
    f, a = base_content(42, frames=12)
    write_av(out["long"], f, a, fps=FPS, sample_rate=RATE, preset="ultrafast")
    return out


def test_files_give_the_same_metrics_as_runs(tmp_path, files):
    ra = write_run(tmp_path / "a" / "ref", ArmSpec("ref", role="reference"))
    rb = write_run(tmp_path / "b" / "cand", ArmSpec("cand"))
    for src, run in ((files["a"], ra), (files["b"], rb)):
        run.output.write_bytes(src.read_bytes())
        rec = run.record()  # the run's own record of its output (a changed output is not judged)
        rec.outputs["output.mp4"] = sha256_file(run.output)
        run.write(rec)
    by_runs = compare_runs(ra, rb)
    by_files = compare_inputs(str(files["a"]), str(files["b"]))
    assert (
        by_files.video.psnr_mean == by_runs.video.psnr_mean
        and by_files.video.ssim_min == by_runs.video.ssim_min
    )
    assert by_files.audio.snr_db == by_runs.audio.snr_db
    assert stat_fields(by_files.a.stats) == stat_fields(by_runs.a.stats)
    assert by_files.speed.s_per_step_ratio is None and by_runs.speed.s_per_step_ratio is not None
    assert by_files.notes[0] == INGEST_HINT and not any(n.startswith("no timing") for n in by_files.notes)
    mixed = compare_inputs(str(ra.path), str(files["b"]))  # a run against a file
    assert mixed.video.psnr_mean == by_runs.video.psnr_mean
    assert mixed.notes[0] == "no timing for B (b): speed not compared" and INGEST_HINT not in mixed.notes


@pytest.mark.parametrize("fmt", ["table", "md", "json"])
def test_cli_formats_on_files(files, fmt):
    res = harness("compare", files["a"], files["b"], "--format", fmt)
    assert res.returncode == 0, res.stderr
    if fmt == "json":
        data = json.loads(res.stdout)
        assert data["video"]["frames"] == 9 and data["speed"]["s_per_step_ratio"] is None
        assert data["a"]["output"] == str(files["a"]) and data["b"]["role"] == "file"
    else:  # nothing timed nor recorded: no speed or attention table, one line, and where a verdict is
        lines = [line.removeprefix("- ") for line in res.stdout.splitlines()]
        assert (
            lines[0 if fmt == "table" else 2]
            == "no timing or attention records: A (a) and B (b) are bare files"
        )
        assert "video PSNR 36.92 dB pooled" in res.stdout
        for gone in ("Speed (B against A)", "Attention calls per rank", "not recorded", "n/a"):
            assert gone not in res.stdout, gone
        if fmt == "md":  # a terminal may wrap it
            assert INGEST_HINT in lines


def test_gates_on_files(files, tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text("min_psnr: 30\nmin_ssim_frame: 0.9\n")
    res = harness("compare", files["a"], files["b"], "--gate", ok)
    assert res.returncode == 0 and "gate" in res.stderr and "passed" in res.stderr
    strict = tmp_path / "strict.yaml"
    strict.write_text("min_psnr: 45\nmax_step_ratio: 1.1\n")
    res = harness("compare", files["a"], files["b"], "--gate", strict)
    assert res.returncode == 1
    gates = [ln for ln in res.stderr.splitlines() if ln.startswith("gate: ")]
    assert gates[0] == "gate: min_psnr: video PSNR (pooled) 36.92 dB < 45.00 dB"
    assert gates[1] == "gate: max_step_ratio: s/step ratio B/A unavailable (timing missing in a run)"


def test_files_of_different_lengths(files):
    res = harness("compare", files["a"], files["long"])
    assert res.returncode == 2  # incompatible media: bad input
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    a, long = files["a"], files["long"]
    assert errors == [
        f"error: frame count differs: {a} has 9 frames, {long} has 12 (--truncate compares the first 9)"
    ]
    res = harness("compare", files["a"], files["long"], "--truncate", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["video"]["truncated_to"] == 9


def test_bad_file_inputs(files, tmp_path):
    res = harness("compare", files["a"], tmp_path / "nope.mp4")
    assert res.returncode == 2 and res.stderr.strip() == f"error: {tmp_path / 'nope.mp4'}: file not found"
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video at all" * 100)
    res = harness("compare", files["a"], junk)
    assert res.returncode == 2 and str(junk) in res.stderr and "Traceback" not in res.stderr
    assert is_media_file("x/y.MP4") and not is_media_file("camp:arm")


def test_same_file_names_in_two_folders(tmp_path, files):
    for d in ("build1", "build2"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "out.mp4").write_bytes(files["a"].read_bytes())
    cmp = compare_inputs(str(tmp_path / "build1" / "out.mp4"), str(tmp_path / "build2" / "out.mp4"))
    assert (cmp.a.key, cmp.b.key) == ("build1/out", "build2/out")
    assert cmp.bitwise.files is True and cmp.bitwise.video is True


def test_the_ingest_command_the_hint_names_gives_a_verdict(files, tmp_path):
    """The hint's command, its placeholders filled in, once per file (B also as the floor run), then
    its report: a verdict of B against the noise floor."""
    import re
    import shlex

    ingest, report = re.findall(r"harness (ingest [^,]+|report CAMPAIGN)", INGEST_HINT)
    for arm, role, attn, mp4 in (
        ("ref", "reference", "torch_sdpa", files["a"]),
        ("floor", "noise_floor", "torch_sdpa", files["b"]),
        ("cand", "candidate", "mine", files["b"]),
    ):
        words = {"CAMPAIGN": "camp", "NAME": arm, "reference|noise_floor|candidate": role, "TYPE": attn}
        args = [words.get(w, w) for w in shlex.split(ingest.replace("FILE", str(mp4)))]
        res = harness(*args, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
    res = harness(*report.replace("CAMPAIGN", "camp").split(), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    verdicts = json.loads((tmp_path / "camp" / "results.json").read_text())["verdicts"]
    assert [v["arm"] for v in verdicts] == ["cand"]
