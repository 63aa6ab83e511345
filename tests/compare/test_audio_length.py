"""Audio of another length is refused as video of another length is, unless `--truncate`: a
candidate missing 98.6 % of its audio was compared on the overlap and passed an SNR gate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from campaign_factory import FPS, RATE, ArmSpec, base_content, make_campaign, perturb, write_run
from cli_testutil import harness

from harness.analysis.model import read_results
from harness.media import write_av


def errors_of(res) -> list[str]:
    assert "Traceback" not in res.stderr, res.stderr
    return [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """The same scene with its whole audio, with 1.4 % of it, and with one AAC frame less."""
    root = tmp_path_factory.mktemp("audio_length")
    frames, audio = base_content(42)
    n = audio.shape[1]
    out = {}
    for name, keep in (("a", n), ("short", int(n * 0.014)), ("one_frame_less", n - 1024)):
        out[name] = root / f"{name}.mp4"
        write_av(out[name], frames, np.ascontiguousarray(audio[:, :keep]), fps=FPS, sample_rate=RATE,
                 preset="ultrafast")  # fmt: skip
    return out


def test_short_audio_is_refused_naming_both_files(files):
    res = harness("compare", files["a"], files["short"])
    assert res.returncode == 2, res.stdout  # main: 0, an SNR on the 1.4 % that overlaps
    (line,) = errors_of(res)
    assert line.startswith("error: audio length differs: ") and "truncate" in line
    assert str(files["a"]) in line and str(files["short"]) in line


def test_short_audio_fails_an_snr_gate_it_passed(files, tmp_path):
    gate = tmp_path / "gate.yaml"
    gate.write_text("min_audio_snr: 0.5\n")  # the overlap gives 0.69 dB
    res = harness("compare", files["a"], files["short"], "--gate", gate)
    assert res.returncode == 2, res.stderr  # main: 0, "gate passed" on the overlap
    assert "passed" not in res.stderr


def test_truncate_compares_the_overlap_and_says_so(files):
    res = harness("compare", files["a"], files["short"], "--truncate", "--format", "json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["audio"]["samples_b"] < out["audio"]["samples_a"] / 10
    assert any("samples per channel dropped" in n for n in out["notes"])


def test_a_length_within_one_video_frame_is_the_same_length(files):
    res = harness("compare", files["a"], files["one_frame_less"], "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["audio"]["samples_dropped"] > 0


def test_report_refuses_a_candidate_with_short_audio(tmp_path):
    arms = [ArmSpec("torch_sdpa", role="reference"), ArmSpec("cand", noise=1.0)]
    camp = make_campaign(tmp_path, arms)
    frames, audio = base_content(42)
    frames, audio = perturb(frames, audio, 1.0, 1)
    cut = np.ascontiguousarray(audio[:, : int(audio.shape[1] * 0.014)])
    write_run(camp.run("cand").path, arms[1], content=(frames, cut))  # run.json hashes the new file
    res = harness("report", camp.path)
    assert res.returncode == 3, res.stderr
    cand = str(camp.run("cand").output)
    assert any("audio length differs" in e and cand in e for e in errors_of(res)), res.stderr
    results = read_results(camp.path / "results.json")
    assert not any(c.audio for c in results.comparisons if c.b.key == "cand")
