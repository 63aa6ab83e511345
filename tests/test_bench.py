"""A tiny smoke run of the metric benchmark (the real one is `python -m harness.bench`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.bench import BenchResult, bench_metrics, main, synthetic_frames
from harness.media import probe


@pytest.mark.slow  # four subprocesses, each importing OpenCV/PyAV (and scikit-image)
def test_bench_smoke(tmp_path: Path) -> None:
    res = bench_metrics(tmp_path, frames=6, height=64, width=96, naive_frames=2)
    names = [r.name for r in res.rows]
    assert names == ["suite", "naive skimage loop", "opencv loop", "suite x2 length"]
    suite, naive, ocv, double = res.rows
    assert suite.frames == 6 and not suite.extrapolated and suite.measured_frames == 6
    assert naive.extrapolated and naive.measured_frames == 2 and naive.frames == 6
    assert ocv.extrapolated and ocv.measured_frames == 2
    assert double.frames == 12
    assert all(r.seconds > 0 and r.peak_mb > 10 for r in res.rows)
    assert res.naive_over_suite == pytest.approx(naive.seconds / suite.seconds)
    # the suite's SSIM equals scikit-image's on the frames the naive loop measured
    assert res.suite_ssim_mean_same_frames == pytest.approx(res.naive_ssim_mean, abs=1e-6)
    assert "| suite | 6 |" in res.markdown() and "first frames only" in res.markdown()
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


def test_cli_without_naive_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    args = ["--workdir", str(tmp_path), "--frames", "4", "--height", "32", "--width", "48"]
    assert main([*args, "--no-naive", "--no-double", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| suite | 4 |" in text and "naive" not in text
    res = BenchResult.model_validate_json(out.read_text())
    assert [r.name for r in res.rows] == ["suite"] and res.naive_over_suite is None


def test_synthetic_pair_differs_but_not_much() -> None:
    a = list(synthetic_frames(3, 64, 96, perturbed=False))
    b = list(synthetic_frames(3, 64, 96, perturbed=True))
    assert a[0].shape == (64, 96, 3) and a[0].dtype.name == "uint8"
    diff = [abs(x.astype(int) - y.astype(int)).mean() for x, y in zip(a, b, strict=True)]
    assert all(0.5 < d < 20 for d in diff)
