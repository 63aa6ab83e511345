"""harness.analysis.frames: frame picking, thumbnails and their PNGs."""

from __future__ import annotations

import cv2
import numpy as np

from harness.analysis.frames import encode_png, frame_indices, pick_frames, slug, thumbnail


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
