"""harness.compare and harness.verdict: pairwise comparison, caching, gates, verdict wording."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "report"))
from campaign_factory import ArmSpec, base_content, latent_array, write_run  # noqa: E402

from harness.compare import Comparison, check_gate, compare_runs, latent_psnr, load_gate  # noqa: E402
from harness.errors import HarnessError  # noqa: E402
from harness.media import iter_frames, read_audio  # noqa: E402
from harness.report.comparison import format_comparison  # noqa: E402
from harness.verdict import Gate, judge  # noqa: E402


def _psnr_np(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


@pytest.fixture
def ref_run(tmp_path: Path):
    return write_run(
        tmp_path / "a" / "torch_sdpa", ArmSpec("torch_sdpa", role="reference", steps=[2.0, 1.0, 1.2])
    )


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
    (aa, _), (ab, _) = read_audio(ref_run.output), read_audio(other.output)
    n = min(aa.shape[1], ab.shape[1])
    snr = 10 * np.log10(
        np.sum(aa[:, :n].astype(np.float64) ** 2) / np.sum((aa[:, :n] - ab[:, :n]).astype(np.float64) ** 2)
    )
    assert cmp.audio.snr_db == pytest.approx(snr, rel=1e-4)
    assert cmp.bitwise.video is False and cmp.bitwise.files is False
    # speed: A s/step 1.1, B 0.5 -> ratio 0.4545, "2.20x faster"
    assert cmp.speed.s_per_step_ratio == pytest.approx(0.5 / 1.1)
    assert "2.20x faster" in cmp.speed.s_per_step_line
    back = Comparison.model_validate_json(format_comparison(cmp, "json"))
    assert back.video.psnr_mean == pytest.approx(cmp.video.psnr_mean)
    assert json.loads(format_comparison(cmp, "json"))["schema"] == "harness.compare/1"


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
    assert "K/V order reversed" in text


def test_latent_psnr_per_step_npy_and_pt(tmp_path: Path):
    a = write_run(tmp_path / "x" / "ref", ArmSpec("ref", role="reference", latents="npy"))
    b = write_run(tmp_path / "x" / "cand", ArmSpec("cand", noise=2.0, latents="pt"), salt=5)
    cmp = compare_runs(a, b)
    assert [p.step for p in cmp.latents] == [1, 2, 3]
    for p in cmp.latents:
        ref = latent_array(42, p.step, 0.0, 0).astype(np.float64)
        test = latent_array(42, p.step, 2.0, 5).astype(np.float64)
        rng = float(ref.max() - ref.min())
        mse = float(np.mean((ref - test) ** 2))
        assert p.psnr == pytest.approx(10 * math.log10(rng**2 / mse), rel=1e-9)
    # noise grows with the step in the factory, so PSNR falls step after step
    assert cmp.latents[0].psnr > cmp.latents[1].psnr > cmp.latents[2].psnr
    assert math.isinf(latent_psnr(np.ones(4), np.ones(4))[0])
    with pytest.raises(HarnessError, match="shapes differ"):
        latent_psnr(np.ones(4), np.ones(5))


def test_latent_npz_parts_and_sigmas_ignored(tmp_path: Path):
    a = write_run(tmp_path / "x" / "ref", ArmSpec("ref", role="reference", latents="npz"))
    b = write_run(tmp_path / "x" / "cand", ArmSpec("cand", noise=2.0, latents="npz"), salt=5)
    same = write_run(tmp_path / "x" / "same", ArmSpec("same", latents="npz"), copy_output_from=a)
    cmp = compare_runs(a, b)
    assert [p.step for p in cmp.latents] == [1, 2, 3]
    for p in cmp.latents:
        assert set(p.parts) == {"video", "audio"}  # the scalar sigmas are not latents
        ref = latent_array(42, p.step, 0.0, 0).astype(np.float64)
        test = latent_array(42, p.step, 2.0, 5).astype(np.float64)
        mse = float(np.mean((ref - test) ** 2))
        assert p.parts["video"] == pytest.approx(
            10 * math.log10(float(ref.max() - ref.min()) ** 2 / mse), rel=1e-9
        )
        both_r = np.concatenate([ref.ravel(), ref[0, 0].ravel() * 0.5])
        both_t = np.concatenate([test.ravel(), test[0, 0].ravel() * 0.5])
        mse_all = float(np.mean((both_r - both_t) ** 2))
        rng_all = float(both_r.max() - both_r.min())
        assert p.psnr == pytest.approx(10 * math.log10(rng_all**2 / mse_all), rel=1e-9)
    assert all(math.isinf(p.psnr) for p in compare_runs(a, same).latents)
    assert "PSNR video" in format_comparison(cmp, "table")


# ---------------------------------------------------------------------------- gates


def test_load_gate_yaml_json_and_errors(tmp_path: Path):
    y = tmp_path / "g.yaml"
    y.write_text("min_psnr: 30\nbitwise_video: true\nmax_step_ratio: 1.1\n")
    g = load_gate(y)
    assert g.min_psnr == 30 and g.bitwise_video and g.max_step_ratio == 1.1
    j = tmp_path / "g.json"
    j.write_text(json.dumps({"min_audio_cosine": 0.99}))
    assert load_gate(j).min_audio_cosine == 0.99
    bad = tmp_path / "bad.yaml"
    bad.write_text("min_psnr: 30\nmin_psnrr: 31\n")
    with pytest.raises(HarnessError, match=r"bad\.yaml.*unknown gate key 'min_psnrr'"):
        load_gate(bad)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("min_psnr: high\n")
    with pytest.raises(HarnessError, match=r"wrong\.yaml.*'min_psnr'"):
        load_gate(wrong)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(HarnessError, match="no thresholds"):
        load_gate(empty)
    with pytest.raises(HarnessError, match="not found"):
        load_gate(tmp_path / "missing.yaml")
    notmap = tmp_path / "list.yaml"
    notmap.write_text("- 1\n- 2\n")
    with pytest.raises(HarnessError, match="mapping"):
        load_gate(notmap)


def test_check_gate_violations(tmp_path: Path, ref_run):
    other = write_run(
        tmp_path / "a" / "sage", ArmSpec("sage", noise=3.0, steps=[1.0, 1.5, 1.5], fallbacks=2), salt=3
    )
    cmp = compare_runs(ref_run, other)
    psnr = cmp.video.psnr_mean
    assert check_gate(cmp, Gate(min_psnr=psnr - 1, min_ssim=0.5)) == []
    v = check_gate(
        cmp,
        Gate(
            min_psnr=psnr + 1,
            bitwise_video=True,
            max_step_ratio=1.1,
            require_valid_attention=True,
            max_fallbacks=0,
        ),
    )
    joined = "\n".join(v)
    assert len(v) == 5, v
    assert "min_psnr" in joined and f"{psnr:.2f} dB" in joined
    assert "bitwise: decoded video frames differ" in joined
    assert "max_step_ratio: s/step ratio B/A 1.364 > 1.100" in joined
    assert "attention in run B (sage) not valid" in joined and "fell back" in joined
    assert "max_fallbacks" in joined


def test_check_gate_on_failed_run_names_the_reason(tmp_path: Path, ref_run):
    bad = write_run(tmp_path / "a" / "broken", ArmSpec("broken", status="failed", reason="exit code 3"))
    v = check_gate(compare_runs(ref_run, bad), Gate(min_psnr=30))
    assert any("status is failed: exit code 3" in x for x in v)
    assert any(x.startswith("min_psnr: video PSNR mean unavailable") for x in v)


def test_identical_runs_pass_a_bitwise_gate(tmp_path: Path, ref_run):
    again = write_run(
        tmp_path / "b" / "torch_sdpa", ArmSpec("torch_sdpa", role="reference"), copy_output_from=ref_run
    )
    g = Gate(bitwise_video=True, bitwise_audio=True, require_valid_attention=True, min_psnr=100)
    assert check_gate(compare_runs(ref_run, again), g) == []


# ---------------------------------------------------------------------------- verdicts


def test_verdict_against_the_noise_floor(tmp_path: Path, ref_run):
    content = base_content(42)
    nf = write_run(tmp_path / "a" / "nf", ArmSpec("nf", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True,
                                                  noise=2.0), content=content, salt=1)  # fmt: skip
    close = write_run(tmp_path / "a" / "close", ArmSpec("close", noise=0.5), content=content, salt=2)
    far = write_run(tmp_path / "a" / "far", ArmSpec("far", noise=15.0, fallbacks=1), content=content, salt=3)
    floor = compare_runs(ref_run, nf)
    c_close, c_far = compare_runs(ref_run, close), compare_runs(ref_run, far)
    assert c_close.video.psnr_mean > floor.video.psnr_mean > c_far.video.psnr_mean

    good = judge("close", [c_close], {42: floor})
    assert good.within_noise_floor is True
    assert good.attention_ok is True
    psnr_check = next(d for d in good.distance if d.metric == "psnr_mean")
    delta = c_close.video.psnr_mean - floor.video.psnr_mean
    assert f"{delta:.2f} dB above" in psnr_check.text

    bad = judge("far", [c_far], {42: floor})
    assert bad.within_noise_floor is False
    psnr_check = next(d for d in bad.distance if d.metric == "psnr_mean")
    gap = floor.video.psnr_mean - c_far.video.psnr_mean
    assert f"{gap:.2f} dB below the floor" in psnr_check.text
    assert bad.attention_ok is False and "fell back" in bad.attention
    assert "outside the noise floor" in bad.summary and "attention INVALID" in bad.summary
    # 15 grey levels of noise raise the Laplacian variance far beyond two exact runs' spread
    sharp = next(s for s in bad.stats if s.stat == "sharpness")
    assert not sharp.ok and sharp.tol == pytest.approx(max(sharp.spread, 0.01 * abs(sharp.center)))
    assert bad.stats_inside is False
    assert "0.01 * |mean(exact)|" in bad.stats_tolerance

    no_floor = judge("close", [c_close], {})
    assert no_floor.within_noise_floor is None
    assert "no noise floor" in no_floor.summary


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
    bad = compare_runs(ref_run, corrupt)
    assert bad.video is None and any("corrupt" in n or "truncated" in n for n in bad.notes), bad.notes
    with pytest.raises(HarnessError, match="expected table, md or json"):
        format_comparison(bad, "xml")
