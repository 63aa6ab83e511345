"""harness.compare.pairwise: a pair of runs compared (speed, accuracy, bitwise, notes), and its text."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from campaign_factory import ArmSpec, base_content, write_run

from harness.compare.pairwise import Comparison, compare_runs
from harness.errors import HarnessError
from harness.media import iter_frames, read_audio
from harness.report.comparison import format_comparison
from harness.store import sha256_file


def _psnr_np(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def test_two_runs_of_the_same_arm_are_bitwise_identical(tmp_path: Path, ref_run):
    again = write_run(
        tmp_path / "b" / "torch_sdpa",
        ArmSpec("torch_sdpa", role="reference", steps=[2.1, 1.1, 1.1]),
        copy_output_from=ref_run,
    )
    cmp = compare_runs(ref_run, again)
    assert cmp.kind == "identical-arm"
    assert cmp.bitwise.video is True and cmp.bitwise.audio is True
    assert math.isinf(cmp.video.psnr_mean) and cmp.video.ssim_min == 1.0
    assert cmp.audio is not None and math.isinf(cmp.audio.snr_db)
    text = format_comparison(cmp, "table")
    assert "bitwise identical" in text
    assert "bitwise identical" in format_comparison(cmp, "md")
    assert cmp.bitwise.files is True
    # Speed is still compared: s/step = mean of steps 2..N.
    assert cmp.a.s_per_step == pytest.approx(1.1) and cmp.b.s_per_step == pytest.approx(1.1)
    assert cmp.speed.total_ratio == pytest.approx((2.1 + 1.1 + 1.1 + 0.5) / (2.0 + 1.0 + 1.2 + 0.5))


def test_perturbed_run_psnr_matches_numpy_and_json_roundtrips(tmp_path: Path, ref_run):
    other = write_run(tmp_path / "a" / "sage", ArmSpec("sage", noise=3.0, steps=[1.0, 0.5, 0.5]), salt=3)
    cmp = compare_runs(ref_run, other)
    fa, fb = list(iter_frames(ref_run.output)), list(iter_frames(other.output))
    per_frame = [_psnr_np(x, y) for x, y in zip(fa, fb, strict=True)]
    assert math.isfinite(cmp.video.psnr_mean)
    assert cmp.video.psnr_mean == pytest.approx(np.mean(per_frame), abs=1e-6)
    assert cmp.video.psnr_min == pytest.approx(min(per_frame), abs=1e-6)
    assert cmp.video.psnr_min_frame == int(np.argmin(per_frame))
    mse = [float(np.mean((x.astype(np.float64) - y) ** 2)) for x, y in zip(fa, fb, strict=True)]
    assert cmp.video.psnr_pooled == pytest.approx(10 * np.log10(255**2 / np.mean(mse)), abs=1e-6)
    (aa, _), (ab, _) = read_audio(ref_run.output), read_audio(other.output)
    n = min(aa.shape[1], ab.shape[1])
    snr = 10 * np.log10(
        np.sum(aa[:, :n].astype(np.float64) ** 2) / np.sum((aa[:, :n] - ab[:, :n]).astype(np.float64) ** 2)
    )
    assert cmp.audio.snr_db == pytest.approx(snr, rel=1e-4) and cmp.audio.lag_samples == 0
    assert cmp.bitwise.video is False and cmp.bitwise.files is False
    # speed: A s/step 1.1, B 0.5 -> speed-up 2.2; the steps of one run are not samples: no speed word
    assert cmp.speed.s_per_step_speedup == pytest.approx(
        1.1 / 0.5
    ) and cmp.speed.s_per_step_ratio == pytest.approx(0.5 / 1.1)
    line = cmp.speed.s_per_step_line
    assert "speed-up 2.20x: one run a side: no speed word" in line
    assert "[steps 2..N: 1.100 ± 0.141 s (steps, n=2) -> 0.500 ± 0.000 s (steps, n=2)]" in line
    assert "faster" not in line and cmp.speed.s_per_step_test.word == "too few runs"
    assert "one run a side" in cmp.speed.total_line
    back = Comparison.model_validate_json(format_comparison(cmp, "json"))
    assert back.video.psnr_mean == pytest.approx(cmp.video.psnr_mean)
    assert json.loads(format_comparison(cmp, "json"))["schema"] == "harness.compare/1"


def test_failed_or_outputless_run_is_reported_not_raised(tmp_path: Path, ref_run):
    bad = write_run(
        tmp_path / "a" / "broken",
        ArmSpec("broken", status="failed", reason="exit code 3", log_tail="RuntimeError: HIP error"),
    )
    cmp = compare_runs(ref_run, bad)
    assert cmp.video is None and cmp.audio is None
    assert any("status failed" in n and "exit code 3" in n for n in cmp.notes)
    assert "RuntimeError: HIP error" in cmp.b.log_tail
    assert cmp.a.stats is not None  # the reference is still described
    text = format_comparison(cmp, "table")
    assert "failed" in text and "exit code 3" in text
    empty = write_run(tmp_path / "a" / "noout", ArmSpec("noout", write_output=False))
    cmp2 = compare_runs(ref_run, empty)
    assert cmp2.video is None and any("no output.mp4" in n for n in cmp2.notes)


def test_noise_floor_comparison_is_labelled(tmp_path: Path, ref_run):
    nf = write_run(
        tmp_path / "a" / "torch_sdpa_kv_reversed",
        ArmSpec(
            "torch_sdpa_kv_reversed", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=1.0
        ),
        salt=1,
    )
    cmp = compare_runs(ref_run, nf)
    assert cmp.kind == "noise_floor"
    text = format_comparison(cmp, "table")
    assert "noise floor: video PSNR" in text
    assert "exact backend torch_sdpa (K/V reversed)" in text


def test_incomparable_or_corrupt_outputs_become_notes(tmp_path: Path, ref_run):
    frames, audio = base_content(42, frames=5)
    short = write_run(
        tmp_path / "a" / "short", ArmSpec("short"), content=(frames, audio[:, : audio.shape[1] // 2])
    )
    cmp = compare_runs(ref_run, short)
    assert cmp.video is None
    assert any("not comparable" in n and "frame count differs" in n for n in cmp.notes)
    assert cmp.b.stats is not None and cmp.b.stats.frames == 5  # still described on its own
    cut = compare_runs(ref_run, short, truncate=True)
    assert cut.video is not None and cut.video.frames == 5
    assert any("truncated to 5 frames" in n for n in cut.notes)
    corrupt = write_run(tmp_path / "a" / "corrupt", ArmSpec("corrupt"))
    data = corrupt.output.read_bytes()
    corrupt.output.write_bytes(data[: len(data) // 3])
    rec = corrupt.record()  # a run whose process wrote a corrupt file (recorded so; not changed after)
    rec.outputs["output.mp4"] = sha256_file(corrupt.output)
    corrupt.write(rec)
    bad = compare_runs(ref_run, corrupt)
    assert bad.video is None and any("corrupt" in n or "truncated" in n for n in bad.notes), bad.notes
    with pytest.raises(HarnessError, match="expected table, md or json"):
        format_comparison(bad, "xml")


def test_lossless_copies_are_measured_before_compression(tmp_path: Path):
    content = base_content(42)
    ref = write_run(tmp_path / "a" / "ref", ArmSpec("ref", role="reference", lossless=True), content=content)
    other = write_run(tmp_path / "a" / "b", ArmSpec("b", noise=3.0, lossless=True), content=content, salt=3)
    mp4_only = write_run(tmp_path / "a" / "c", ArmSpec("c", noise=3.0), content=content, salt=3)
    cmp = compare_runs(ref, other)
    assert cmp.options["lossless"] is True
    fa = list(iter_frames(ref.file("output_lossless.mkv")))
    fb = list(iter_frames(other.file("output_lossless.mkv")))
    mse = [float(np.mean((x.astype(np.float64) - y) ** 2)) for x, y in zip(fa, fb, strict=True)]
    assert cmp.video.psnr_pooled == pytest.approx(10 * np.log10(255**2 / np.mean(mse)), abs=1e-6)
    assert cmp.audio.snr_db != compare_runs(ref, mp4_only).audio.snr_db  # PCM, not AAC
    assert compare_runs(ref, mp4_only).options["lossless"] is False  # one side has no twin: both mp4
