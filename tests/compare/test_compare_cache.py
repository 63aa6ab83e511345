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


def test_entries_without_the_layout_are_measured_again(tmp_path: Path, ref_run):
    """Version 7 of the pair entry (statistics 4) adds each run's per-frame colour track: an entry of the
    version before, here one that also lacks the layout, is measured again, and the new one keeps them."""
    import json

    from harness.compare.cache import PAIR_METRICS_VERSION, STATS_VERSION

    metrics = tmp_path / "metrics"
    other = write_run(tmp_path / "a" / "sage", ArmSpec("sage", noise=3.0), salt=3)
    first = compare_runs(ref_run, other, metrics_dir=metrics)
    assert first.video.layout_mse and first.video.layout_var_a  # measured
    path = metrics / "torch_sdpa__vs__sage.json"
    entry = json.loads(path.read_text())
    assert (entry["version"], PAIR_METRICS_VERSION, STATS_VERSION) == (7, 7, 4)
    entry["version"] = 6
    del entry["value"]["stats_b"]["track"]
    for name in (
        "layout_mse",
        "layout_mirror_lr_mse",
        "layout_mirror_ud_mse",
        "layout_var_a",
        "layout_var_b",
    ):
        del entry["value"]["video"][name]
    path.write_text(json.dumps(entry))
    again = compare_runs(ref_run, other, metrics_dir=metrics)
    assert not again.metrics_cached and again.video.layout_mse == first.video.layout_mse
    cached = compare_runs(ref_run, other, metrics_dir=metrics)
    assert cached.metrics_cached and cached.video.layout_mse == first.video.layout_mse
    assert cached.b.stats is not None and cached.b.stats.frozen_first == first.b.stats.frozen_first
    assert cached.b.stats.track is not None and cached.b.stats.track == first.b.stats.track
