"""Small runs of the metric benchmark (the real one is `harness bench metrics`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_testutil import harness

from harness.bench.result import MARK, BenchResult
from harness.bench.run import bench_metrics, ensure_pair, measure_side, synthetic_frames
from harness.errors import HarnessError
from harness.media import probe
from harness.metrics.metric import in_order


@pytest.mark.slow  # five subprocesses, each importing OpenCV/PyAV/numba (and scikit-image)
def test_bench_smoke(tmp_path: Path) -> None:
    res = bench_metrics(tmp_path, frames=6, height=64, width=96, naive_frames=2)
    names = [r.name for r in res.rows]
    assert names == ["suite", "naive skimage loop", "opencv loop", "suite x2 length"]
    suite, naive, ocv, double = res.rows
    assert suite.frames == 6 and not suite.extrapolated and suite.measured_frames == 6
    assert naive.extrapolated and naive.measured_frames == 2 and naive.frames == 6
    assert ocv.extrapolated is False and ocv.measured_frames == 6  # 6 frames < its 24-frame subset
    assert double.frames == 12
    assert all(r.seconds > 0 and r.peak_mb > 10 for r in res.rows)
    assert suite.setup_s is not None and suite.setup_s > 0
    assert res.naive_over_suite == pytest.approx(naive.seconds / suite.seconds)
    assert res.naive_over_suite_extrapolated
    # per frame, the suite's values equal scikit-image's on the frames the naive loop measured
    assert res.compared_frames == 2
    assert res.max_diff["ssim"] < 1e-6 and res.max_diff["psnr"] < 1e-4
    assert abs(res.compared_means["suite"]["ssim"] - res.compared_means["naive"]["ssim"]) < 1e-6
    # the suite's every metric, as the registry names it, over the whole pair
    assert set(res.suite_metrics) == {m.key for m in in_order()}
    assert (
        res.suite_metrics["psnr_min"] <= res.suite_metrics["psnr"] and 0 < res.suite_metrics["ssim_min"] < 1
    )
    # the time split covers every stage, on all frames
    p = res.profile
    assert p is not None and p.frames == 6
    assert min(p.decode, p.convert, p.ssim_kernel, p.stats, p.hash, p.audio) > 0
    assert p.total == pytest.approx(
        p.decode + p.convert + p.blurs + p.elementwise + p.stats + p.hash + p.audio
    )
    md = res.markdown()
    assert "| suite | 6 |" in md and "Time split" in md and "SSIM blurs" in md
    # an extrapolated figure carries its mark beside the number, and so does a ratio built on it
    naive_line = next(line for line in md.splitlines() if line.startswith("| naive skimage loop"))
    assert f"{naive.seconds:.2f}{MARK}" in naive_line
    suite_line = next(line for line in md.splitlines() if line.startswith("| suite |"))
    assert f"{MARK}x |" in suite_line and f"{suite.seconds:.2f} |" in suite_line
    assert "extrapolated, not measured" in md
    assert BenchResult.model_validate_json(res.model_dump_json()) == res

    files = sorted(p.name for p in tmp_path.glob("*.mp4"))
    assert files == [
        "bench_12x64x96_a.mp4",
        "bench_12x64x96_b.mp4",
        "bench_6x64x96_a.mp4",
        "bench_6x64x96_b.mp4",
    ]
    info = probe(tmp_path / "bench_6x64x96_b.mp4")
    assert (info.frames, info.width, info.height) == (6, 96, 64)
    assert (info.audio_rate, info.audio_channels) == (32000, 2)


@pytest.mark.slow
def test_naive_on_every_frame_is_measured_not_extrapolated(tmp_path: Path) -> None:
    res = bench_metrics(tmp_path, frames=4, height=48, width=64, naive_frames=4, double=False, profile=False)
    suite, naive, _ = res.rows
    assert not naive.extrapolated and not res.naive_over_suite_extrapolated and res.compared_frames == 4
    md = res.markdown()
    naive_line = next(line for line in md.splitlines() if line.startswith("| naive skimage loop"))
    suite_line = next(line for line in md.splitlines() if line.startswith("| suite |"))
    assert MARK not in naive_line and MARK not in suite_line and res.profile is None


def test_command_without_naive_side(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["--workdir", tmp_path, "--frames", "4", "--height", "32", "--width", "48"]
    res = harness("bench", "metrics", *args, "--no-naive", "--no-double", "--no-profile", "--json", out)
    assert res.returncode == 0, res.stderr
    assert "| suite | 4 |" in res.stdout and "naive" not in res.stdout and "Time split" not in res.stdout
    assert (
        "|---|---:|---:|---:|---:|---:|" in res.stdout
    )  # the project's markdown table, numbers right-aligned
    res = BenchResult.model_validate_json(out.read_text())
    assert [r.name for r in res.rows] == ["suite"] and res.naive_over_suite is None


def test_a_side_in_its_own_process_hands_back_its_record(tmp_path: Path) -> None:
    a, b, _ = ensure_pair(tmp_path, 3, 32, 48)
    side = measure_side("opencv", a, b, limit=2)
    assert (side.kind, side.frames, side.measured_frames) == ("opencv", 3, 2)
    assert side.seconds > 0 and side.peak_mb > 10 and side.setup_s > 0
    with pytest.raises(HarnessError, match=r"benchmark side 'opencv' failed \(exit 1\): .*nope\.mp4"):
        measure_side("opencv", tmp_path / "nope.mp4", b, limit=2)


def test_synthetic_pair_differs_but_not_much() -> None:
    a = list(synthetic_frames(3, 64, 96, perturbed=False))
    b = list(synthetic_frames(3, 64, 96, perturbed=True))
    assert a[0].shape == (64, 96, 3) and a[0].dtype.name == "uint8"
    diff = [abs(x.astype(int) - y.astype(int)).mean() for x, y in zip(a, b, strict=True)]
    assert all(0.5 < d < 20 for d in diff)
