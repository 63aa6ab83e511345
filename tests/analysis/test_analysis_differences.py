"""analysis.assets and analysis.audio_view: the difference images beside the frame grids, the audio
clips and the spectrogram differences, measured on real mp4s of the campaign factory and cached."""

from __future__ import annotations

import av
import cv2
import numpy as np
import pytest
from campaign_factory import ArmSpec, make_campaign

from harness.analysis.analyze import analyze_campaign
from harness.analysis.assets import MAX_GAIN, campaign_gain, colour_stops, difference_map
from harness.analysis.audio_view import CLIP_SECONDS, aligned
from harness.analysis.model import SpectrogramDiff
from harness.media import iter_frames, read_audio
from harness.media_audio import OPUS_RATE


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    arms = [
        ArmSpec("torch_sdpa", role="reference"),
        ArmSpec("nf", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=1.0),
        ArmSpec("same_audio", noise=4.0, audio_noise=0.0),
        ArmSpec("far", noise=12.0, audio_noise=0.05),
        ArmSpec("gone", status="failed", reason="exit code 1", write_output=False),
    ]
    camp = make_campaign(tmp_path_factory.mktemp("diffs"), arms)
    msgs: list[str] = []
    return camp, analyze_campaign(camp, progress=msgs.append), msgs


def test_difference_map_is_the_mean_absolute_difference_over_the_channels():
    a = np.zeros((4, 6, 3), np.uint8)
    b = a.copy()
    b[..., 0], b[..., 1] = 30, 6  # (30 + 6 + 0) / 3 = 12 levels everywhere
    assert np.allclose(difference_map(a, b), 12.0)
    assert np.allclose(difference_map(b, a), 12.0)  # absolute
    wide = np.zeros((20, 640, 3), np.uint8)
    other = wide.copy()
    other[:, :320] = 255  # left half differs by 255: the 320-wide map keeps it left, averaged over the area
    d = difference_map(wide, other, width=320)
    assert d.shape == (10, 320) and np.allclose(d[:, :150], 255) and np.allclose(d[:, 170:], 0)


def test_one_gain_the_largest_power_of_two_that_keeps_the_percentile_under_full_scale():
    assert campaign_gain([12.3, 3.0]) == 16  # 16 x 12.3 = 197 <= 255 < 32 x 12.3
    assert campaign_gain([255.0]) == 1 and campaign_gain([900.0]) == 1
    assert campaign_gain([0.01]) == MAX_GAIN and campaign_gain([]) == MAX_GAIN
    stops = colour_stops()
    assert stops[0] == "#000003" or stops[0].startswith("#0000")  # inferno starts black
    assert len(stops) == 17 and all(len(s) == 7 and s.startswith("#") for s in stops)


def test_every_run_but_the_reference_gets_its_amplified_difference(analysed):
    camp, res, _ = analysed
    grid = res.frame_grids[0]
    assert grid.reference == "torch_sdpa"
    assert set(grid.diffs) == {"nf", "same_audio", "far"}  # the failed run has no output, the reference none
    assert all(sorted(cells) == grid.indices for cells in grid.diffs.values())  # every row, worst ones too
    fd = res.frame_diff
    assert (
        fd is not None
        and fd.gain == campaign_gain([fd.largest])
        and fd.full_scale == pytest.approx(255 / fd.gain)
    )
    assert f"x{fd.gain:g}" in fd.text and "decoded frames" in fd.text
    assert res.assets["diff_scale"] == fd.scale and (camp.path / fd.scale).is_file()
    # the image is |far - reference| x gain, recomputed here from the decoded mp4s
    i = res.frame_indices[1]
    ref = list(iter_frames(camp.run("torch_sdpa").output))[i]
    far = list(iter_frames(camp.run("far").output))[i]
    expect = np.clip(np.rint(np.abs(far.astype(int) - ref.astype(int)).mean(axis=2) * fd.gain), 0, 255)
    got = cv2.imread(str(camp.path / grid.diffs["far"][i]), cv2.IMREAD_UNCHANGED)
    assert got.shape == expect.shape[:2] and np.abs(got.astype(int) - expect).max() <= 1
    near = cv2.imread(str(camp.path / grid.diffs["nf"][i]), cv2.IMREAD_UNCHANGED)
    assert near.mean() < got.mean()  # the floor differs less than the far candidate, on the same scale


def test_clips_are_the_first_seconds_of_each_runs_mono_mix(analysed):
    """Opus in WebM at 48 kHz: the same sound as the track's mono mix (resampled, within the codec's
    error), as long, a twentieth of 16-bit PCM's bytes."""
    camp, res, _ = analysed
    keys = {k.split(":", 1)[1] for k in res.assets if k.startswith("clip:")}
    assert keys == {"torch_sdpa", "nf", "same_audio", "far"}
    data, rate = read_audio(camp.run("far").output)
    mono = np.clip(data.mean(axis=0), -1, 1)
    clip = camp.path / res.assets["clip:far"]
    assert clip.suffix == ".webm" and clip.read_bytes()[:4] == b"\x1a\x45\xdf\xa3"  # Matroska (WebM)
    with av.open(str(clip)) as c:
        stream = c.streams.audio[0]
        assert (stream.codec_context.name, stream.rate) == ("opus", OPUS_RATE) and c.duration is not None
        got = np.concatenate([f.to_ndarray().reshape(-1) for f in c.decode(stream)])
    n = min(mono.size, int(CLIP_SECONDS * rate))
    assert abs(got.size / OPUS_RATE - n / rate) < 0.03  # the whole clip (Opus's priming samples dropped)
    want = np.interp(np.arange(got.size) * rate / OPUS_RATE, np.arange(n), mono[:n])
    lag = int(np.argmax(np.correlate(got[:4800], want[:4800], "full"))) - 4799
    assert abs(lag) < 48  # in time (under a millisecond)
    assert np.corrcoef(got, want)[0, 1] > 0.95
    assert clip.stat().st_size < n * 2 / 4  # far under 16-bit PCM
    assert res.audio_clips is not None and res.audio_clips.seconds == pytest.approx(n / rate, abs=1e-3)
    assert "Opus" in res.audio_clips.text


def test_the_spectrogram_difference_is_near_zero_for_the_same_track_and_not_for_another(analysed):
    camp, res, _ = analysed
    assert "specdiff:torch_sdpa" not in res.assets  # the reference is not set against itself
    views = {k: SpectrogramDiff.model_validate_json((camp.path / res.assets[f"specdiff:{k}"]).read_bytes())
             for k in ("same_audio", "far")}  # fmt: skip
    assert views["same_audio"].reference == "torch_sdpa"
    assert views["same_audio"].mean_abs_db < 0.5 < views["far"].mean_abs_db
    assert all((camp.path / v.png).is_file() and v.db_range == 20.0 for v in views.values())


def test_aligned_moves_a_delayed_track_back():
    ref = np.arange(10.0)
    run = np.concatenate([[0.0, 0.0], ref])[:10]  # the run is 2 samples late
    a, b = aligned(run, ref, 2)
    assert np.array_equal(a, b)
    a, b = aligned(ref, run, -2)
    assert np.array_equal(a, ref[: a.size]) and np.array_equal(b, run[2:])


def test_a_second_analysis_decodes_nothing_for_the_differences(analysed):
    camp, res, msgs = analysed
    assert any(m.startswith("differences of far") for m in msgs)
    (camp.path / "results.json").unlink()  # the analysis runs again, its pieces from the cache
    again: list[str] = []
    res2 = analyze_campaign(camp, progress=again.append)
    assert not any(m.startswith(("differences of", "audio clip of")) for m in again), again
    assert res2.frame_grids[0].diffs == res.frame_grids[0].diffs and res2.frame_diff == res.frame_diff
