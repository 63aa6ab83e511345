"""The one RGB conversion, over a matrix of pixel formats: the same content stored losslessly as
yuv420p, yuv420p10le, yuv444p (libx264 at qp 0, FFV1) and RGB (libx264rgb, FFV1 gbrp10le) is
read by ``media.iter_frames`` as the RGB of an independent conversion written here (BT.601,
limited range, each chroma sample over its 2x2 block, in NumPy), and a pair stored in different
formats says so. On main a 10-bit copy of a file differed from it by tens of levels."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from av.video.reformatter import ColorRange

from harness.collect.suite import measure_pair
from harness.errors import HarnessError
from harness.media import iter_frames, probe
from harness.pixel_formats import to_rgb

H, W, N = 64, 96, 4
TABLE_ROUNDING = 3  # libswscale's 8-bit YUV -> RGB tables round differently from float math


def yuv420(t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """8-bit 4:2:0 planes with smooth luma and sharp chroma blocks (where chroma interpolation shows)."""
    rng = np.random.default_rng(t)
    yy, xx = np.mgrid[0:H, 0:W]
    y = (16 + (xx * 3 + yy * 2 + 9 * t) % 220).astype(np.uint8)
    u = np.where((np.arange(W // 2)[None, :] // 4 + np.arange(H // 2)[:, None] // 4 + t) % 2, 40, 216)
    v = rng.integers(30, 226, (H // 8, W // 8)).repeat(4, 0).repeat(4, 1)
    return y, u.astype(np.uint8), v.astype(np.uint8)


def expected_rgb(y: np.ndarray, u: np.ndarray, v: np.ndarray, full: bool = False) -> np.ndarray:
    """BT.601 YCbCr -> RGB (Rec. 601 coefficients), limited or full range, chroma replicated."""
    u = u.repeat(2, 0).repeat(2, 1).astype(np.float64)
    v = v.repeat(2, 0).repeat(2, 1).astype(np.float64)
    if full:
        yf, cb, cr = y.astype(np.float64), u - 128, v - 128
    else:
        yf, cb, cr = (y - 16.0) * 255 / 219, (u - 128) * 255 / 224, (v - 128) * 255 / 224
    kr, kb = 0.299, 0.114
    kg = 1 - kr - kb
    r = yf + 2 * (1 - kr) * cr
    b = yf + 2 * (1 - kb) * cb
    g = yf - (2 * kb * (1 - kb) * cb + 2 * kr * (1 - kr) * cr) / kg
    return np.clip(np.round(np.stack([r, g, b], -1)), 0, 255).astype(np.uint8)


def frame_of(planes, fmt: str) -> av.VideoFrame:
    """A frame of ``fmt`` holding ``planes`` (8-bit values; shifted up for a deeper format)."""
    f = av.VideoFrame(W, H, fmt)
    depth = f.format.components[0].bits
    for i, src in enumerate(planes):
        p = f.planes[i]
        dtype = np.uint16 if depth > 8 else np.uint8
        view = np.frombuffer(p, dtype).reshape(p.height, p.line_size // np.dtype(dtype).itemsize)[
            :, : p.width
        ]
        view[...] = src.astype(dtype) << (depth - 8)
    return f


def write(
    path: Path, codec: str, pix_fmt: str, frames: list[av.VideoFrame], options: dict | None = None
) -> Path:
    with av.open(str(path), "w", format="matroska" if path.suffix == ".mkv" else "mp4") as c:
        s = c.add_stream(codec, rate=24)
        s.width, s.height, s.pix_fmt = W, H, pix_fmt
        s.options = options or {}
        for i, f in enumerate(frames):
            f.pts = i
            c.mux(s.encode(f))
        c.mux(s.encode(None))
    assert probe(path).pix_fmt is not None
    return path


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pixfmt")
    planes = [yuv420(t) for t in range(N)]
    full444 = [(y, u.repeat(2, 0).repeat(2, 1), v.repeat(2, 0).repeat(2, 1)) for y, u, v in planes]
    rgb = [expected_rgb(*p) for p in planes]
    lossless = {"qp": "0", "preset": "ultrafast"}
    out = {
        "x264 yuv420p": write(d / "a.mp4", "libx264", "yuv420p", [frame_of(p, "yuv420p") for p in planes], lossless),
        "x264 yuv420p10le": write(d / "b.mp4", "libx264", "yuv420p10le",
                                  [frame_of(p, "yuv420p10le") for p in planes], lossless),
        "ffv1 yuv420p10le": write(d / "c.mkv", "ffv1", "yuv420p10le", [frame_of(p, "yuv420p10le") for p in planes]),
        "x264 yuv444p": write(d / "d.mp4", "libx264", "yuv444p", [frame_of(p, "yuv444p") for p in full444], lossless),
        "x264rgb rgb24": write(d / "e.mp4", "libx264rgb", "rgb24",
                               [av.VideoFrame.from_ndarray(f, format="rgb24") for f in rgb], lossless),
        "ffv1 gbrp10le": write(d / "f.mkv", "ffv1", "gbrp10le",
                               [frame_of((f[..., 1], f[..., 2], f[..., 0]), "gbrp10le") for f in rgb]),
    }  # fmt: skip
    return out


def test_every_format_reads_as_the_stated_conversion(matrix):
    want = [expected_rgb(*yuv420(t)) for t in range(N)]
    read = {name: list(iter_frames(path)) for name, path in matrix.items()}
    for name, frames in read.items():
        assert len(frames) == N, name
        worst = max(
            int(np.abs(a.astype(int) - b.astype(int)).max()) for a, b in zip(frames, want, strict=True)
        )
        exact = name.startswith(("x264rgb", "ffv1 gbrp"))
        assert worst <= (0 if exact else TABLE_ROUNDING), f"{name}: {worst} levels from the stated conversion"
    # the same 8-bit content in 10 bits: the same RGB, bit for bit (main: up to tens of levels apart)
    for deep in ("x264 yuv420p10le", "ffv1 yuv420p10le"):
        assert all(np.array_equal(a, b) for a, b in zip(read["x264 yuv420p"], read[deep], strict=True)), deep


def test_a_pair_in_different_formats_is_compared_on_one_footing_and_says_so(matrix):
    res = measure_pair(matrix["x264 yuv420p"], matrix["ffv1 yuv420p10le"])
    assert res.video.frames_bitwise_equal and res.video.psnr_pooled == float("inf")
    note = res.video.pixel_formats
    assert note is not None and note.startswith(
        "pixel formats differ: A yuv420p (YUV 4:2:0, 8-bit), B yuv420p10le"
    )
    assert measure_pair(matrix["x264 yuv420p"], matrix["x264 yuv420p"]).video.pixel_formats is None


def test_ten_bit_samples_are_rounded_to_eight():
    y, u, v = yuv420(0)

    def ten_bit(low_bits: int) -> av.VideoFrame:
        f = frame_of((y, u, v), "yuv420p10le")
        for p in f.planes:
            view = np.frombuffer(p, np.uint16).reshape(p.height, p.line_size // 2)[:, : p.width]
            view += low_bits
        return f

    eight = to_rgb(frame_of((y, u, v), "yuv420p"))
    up = to_rgb(frame_of(tuple(np.minimum(x.astype(int) + 1, 255) for x in (y, u, v)), "yuv420p"))
    assert np.array_equal(to_rgb(ten_bit(1)), eight)  # 4v + 1: a quarter step, rounds down
    assert np.array_equal(to_rgb(ten_bit(2)), up)  # 4v + 2: half a step, rounds up


def test_a_full_range_tag_is_honoured():
    y, u, v = yuv420(1)
    f = frame_of((y, u, v), "yuv420p")
    f.color_range = ColorRange.JPEG
    got = to_rgb(f).astype(int)
    assert np.abs(got - expected_rgb(y, u, v, full=True).astype(int)).max() <= TABLE_ROUNDING


def test_a_format_without_colour_is_refused_in_one_line(tmp_path):
    grey = [av.VideoFrame.from_ndarray(np.full((H, W), 100, np.uint8), format="gray") for _ in range(2)]
    path = write(tmp_path / "g.mkv", "ffv1", "gray", grey)
    with pytest.raises(HarnessError) as err:
        list(iter_frames(path))
    msg = str(err.value)
    assert msg.startswith(f"{path}: pixel format gray is not read by the metrics") and "\n" not in msg
