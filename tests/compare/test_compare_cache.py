"""harness.compare.cache: pair metrics and run statistics reused while the outputs are unchanged."""

from __future__ import annotations

from pathlib import Path

from campaign_factory import ArmSpec, write_run

from harness.compare.pairwise import compare_runs


def test_cache_is_reused_only_while_both_outputs_are_unchanged(tmp_path: Path, ref_run):
    metrics = tmp_path / "metrics"
    other = write_run(tmp_path / "a" / "sage", ArmSpec("sage", noise=3.0), salt=3)
    first = compare_runs(ref_run, other, metrics_dir=metrics)
    assert not first.metrics_cached
    assert (metrics / "torch_sdpa__vs__sage.json").exists()
    assert (metrics / "torch_sdpa__vs__sage.frames.csv").exists()
    assert (metrics / "sage.stats.json").exists() and (metrics / "torch_sdpa.stats.json").exists()
    second = compare_runs(ref_run, other, metrics_dir=metrics)
    assert second.metrics_cached
    assert second.video.psnr_mean == first.video.psnr_mean
    # Same key, new output: the cache entry no longer matches and is measured again.
    write_run(other.path, ArmSpec("sage", noise=8.0), salt=4)
    third = compare_runs(ref_run, other, metrics_dir=metrics)
    assert not third.metrics_cached
    assert third.video.psnr_mean < first.video.psnr_mean
    # Different options are a different measurement too.
    fourth = compare_runs(ref_run, other, metrics_dir=metrics, truncate=True)
    assert not fourth.metrics_cached
