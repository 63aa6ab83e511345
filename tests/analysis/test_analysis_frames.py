"""harness.analysis.frames: frame picking (evenly spaced, and each candidate's worst frames),
thumbnails and their images."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from campaign_factory import make_campaign, near_and_far_arms

from harness.analysis.analyze import analyze_campaign
from harness.analysis.frames import (
    encode_png,
    encode_thumbnail,
    frame_indices,
    pick_frames,
    slug,
    thumbnail,
    worst_frames,
)


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
    grey = small[..., 0]
    assert np.array_equal(cv2.imdecode(np.frombuffer(encode_png(grey), np.uint8), cv2.IMREAD_UNCHANGED), grey)


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


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    """Reference, a noise floor and two candidates (9 frames: rows 0/3/5/8 evenly spaced)."""
    camp = make_campaign(tmp_path_factory.mktemp("worst"), near_and_far_arms())
    return camp, analyze_campaign(camp)


def test_each_candidates_worst_frames_are_rows_of_its_grid(analysed):
    """The worst frame by PSNR and by SSIM of each candidate is a row, whatever the even spacing:
    the reference and that candidate have a thumbnail there, no other run does."""
    camp, res = analysed
    [grid] = res.frame_grids
    even = res.frame_indices
    assert even == frame_indices(9) == [0, 3, 5, 8]
    worst = worst_frames(res, 42)
    assert set(worst) == {"near", "far"}  # candidates only: the floor's worst frame is no row
    for key in ("near", "far"):
        v = res.comparison_for(key).video
        assert worst[key].get(v.psnr_min_frame, []).count("PSNR") == 1
        assert worst[key].get(v.ssim_min_frame, []).count("SSIM") == 1
        assert sorted(grid.cells[key]) == sorted({*even, v.psnr_min_frame, v.ssim_min_frame})
    marked = {i for frames in worst.values() for i in frames}
    assert grid.indices == sorted({*even, *marked}) and sorted(grid.cells["torch_sdpa"]) == grid.indices
    assert marked - set(even), "no worst frame off the even spacing: the test proves nothing"
    assert sorted(grid.cells["nf"]) == even
    for key in ("near", "far"):  # another candidate's worst frame is not repeated for this one
        others = {i for k, frames in worst.items() if k != key for i in frames} - set(even) - set(worst[key])
        assert not others & set(grid.cells[key])
    # thumbnails are WebP that decode to the frame's size
    for rel in grid.cells["far"].values():
        data = (camp.path / rel).read_bytes()
        assert rel.endswith(".webp") and data[:4] == b"RIFF" and data[8:12] == b"WEBP"
        assert cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR).shape == (64, 96, 3)


def test_identical_output_has_no_worst_frame(analysed):
    _, res = analysed
    same = res.model_copy(deep=True)
    c = same.comparison_for("near")
    c.video.psnr_min, c.video.ssim_min = float("inf"), 1.0
    assert "near" not in worst_frames(same, 42) and "far" in worst_frames(same, 42)


def test_thumbnails_are_lossy_webp_close_to_the_frame():
    frame = np.zeros((128, 224, 3), np.uint8)
    frame[:, :112] = (200, 40, 30)
    frame[40:80, 150:200] = (20, 180, 240)
    data = encode_thumbnail(frame)
    back = cv2.cvtColor(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    assert back.shape == frame.shape and np.abs(back.astype(int) - frame).mean() < 3
    assert len(data) < len(encode_png(frame))
