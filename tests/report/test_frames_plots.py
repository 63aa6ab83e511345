"""Frame picking and thumbnails, figure writers, markdown and table helpers."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from harness.report.frames import encode_png, frame_indices, pick_frames, slug, thumbnail
from harness.report.plots import audio_plot, latent_plot, per_frame_plot, read_frames_csv, seeds_plot
from harness.report.results import flatten, spread


def test_frame_indices():
    assert frame_indices(362) == [0, 120, 241, 361]  # the pull request's frames
    assert frame_indices(9) == [0, 3, 5, 8]
    assert frame_indices(3) == [0, 1, 2]
    assert frame_indices(1) == [0]
    assert frame_indices(0) == []


def test_thumbnail_and_png_roundtrip():
    frame = np.random.default_rng(0).integers(0, 256, (768, 1344, 3), dtype=np.uint8)
    t = thumbnail(frame)
    assert t.shape == (183, 320, 3)
    small = frame[:64, :96]
    assert thumbnail(small) is small  # never upscaled
    png = encode_png(small)
    back = cv2.cvtColor(cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    assert np.array_equal(back, small)


def test_pick_frames_stops_after_the_last_index():
    pulled = []

    def gen():
        for i in range(100):
            pulled.append(i)
            yield np.full((4, 6, 3), i, np.uint8)

    got = pick_frames(gen(), [0, 5, 7])
    assert sorted(got) == [0, 5, 7] and int(got[5][0, 0, 0]) == 5
    assert pulled[-1] == 7


def test_slug():
    assert slug("arm@43") == "arm_s43"
    assert slug("a/b c") == "a_b_c"


def test_read_frames_csv_and_per_frame_plot(tmp_path: Path):
    csv = tmp_path / "x.frames.csv"
    csv.write_text("frame,psnr,ssim\n0,inf,1.0\n1,40.5,0.99\n2,38.0,0.98\n")
    cols = read_frames_csv(csv)
    assert list(cols["frame"]) == [0, 1, 2] and np.isinf(cols["psnr"][0]) and cols["ssim"][2] == 0.98
    out = per_frame_plot([("cand", csv)], tmp_path / "pf.png")
    assert out is not None and out.read_bytes()[:4] == b"\x89PNG"
    assert per_frame_plot([("none", tmp_path / "absent.csv")], tmp_path / "none.png") is None


def test_audio_latent_seed_plots(tmp_path: Path):
    t = np.arange(16000) / 16000
    ref = np.stack([np.sin(2 * np.pi * 440 * t), np.sin(2 * np.pi * 660 * t)]).astype(np.float32) * 0.5
    out = audio_plot([("ref", ref, 16000), ("cand", ref * 0.9, 16000)], tmp_path / "a.png")
    assert out is not None and out.stat().st_size > 1000
    assert audio_plot([], tmp_path / "none.png") is None
    assert latent_plot([("c", [(1, 30.0), (2, float("inf"))])], tmp_path / "l.png") is not None
    assert seeds_plot([("c", [(42, 30.0), (43, 31.0)])], (35.0, 36.0), tmp_path / "s.png") is not None


def test_spread_and_flatten():
    s = spread([1.0, 3.0, None])
    assert (s.n, s.mean, s.min, s.max) == (2, 2.0, 1.0, 3.0)
    assert s.std == pytest.approx(np.std([1.0, 3.0], ddof=1))
    inf = spread([float("inf"), 40.0])
    assert inf.mean == float("inf") and inf.std is None and inf.min == 40.0
    assert spread([None]).n == 0
    rows = flatten({"torch": {"version": "2", "gpus": [{"name": "R9700", "arch": "gfx1201"}]}, "x": [1, 2]})
    assert ("torch.gpus[0].arch", "gfx1201") in rows and ("x", "1, 2") in rows
