"""How a decoded frame becomes the uint8 RGB every metric reads, one conversion for every pixel
format (``CONVENTION``): YUV over 8 bits is rounded to 8 first (``(v + 2^(d-9)) >> (d-8)``), so 8
and 10 bits of the same content give the same RGB (libswscale's high-depth path differs by tens of
levels on edges); semi-planar or packed YUV is made planar; palettes, grey, Bayer, XYZ are refused."""

from __future__ import annotations

import av
import numpy as np
from av.video.reformatter import ColorRange

from harness.errors import HarnessError

CONVENTION = (
    "rgb24 from every pixel format: YUV of more than 8 bits rounded to 8 bits per sample first; 8-bit "
    "YUV by libswscale's unscaled path (the frame's matrix tag, untagged = BT.601; limited range unless "
    "tagged full or yuvj*; chroma samples replicated over their block, no interpolation); RGB copied "
    "(more than 8 bits rounded to 8, alpha dropped)"
)
# Chroma subsampling (luma/chroma width, height ratio) -> the planar YUV format of that layout.
_PLANAR = {(2, 2): "yuv420p", (2, 1): "yuv422p", (1, 1): "yuv444p", (1, 2): "yuv440p", (4, 1): "yuv411p"}
_FULL_RANGE = int(ColorRange.JPEG)


def describe(fmt: av.VideoFormat) -> str:
    """``yuv420p10le (YUV 4:2:0, 10-bit)``: what a format holds, for notes and errors."""
    layout, depth = layout_of(fmt), fmt.components[0].bits if fmt.components else 0
    return fmt.name if layout is None else f"{fmt.name} ({layout}, {depth}-bit)"


def describe_name(name: str) -> str:
    """``describe`` for a format given by name (an unknown name is returned as is)."""
    try:
        return describe(av.VideoFormat(name))
    except (ValueError, av.error.FFmpegError):
        return name


def layout_of(fmt: av.VideoFormat) -> str | None:
    """ "RGB", "YUV 4:2:0", ... or None for a format that is not converted here."""
    comps = fmt.components
    if fmt.has_palette or fmt.is_bayer or len([c for c in comps if not c.is_alpha]) != 3:
        return None
    if fmt.is_rgb:
        return "RGB"
    planar = _planar_name(fmt)
    if planar is None or fmt.name.startswith("xyz"):
        return None
    return f"YUV {planar[3]}:{planar[4]}:{planar[5]}"  # yuv420p: YUV 4:2:0


def _planar_name(fmt: av.VideoFormat) -> str | None:
    sized = av.VideoFormat(fmt.name, 64, 64)  # a format's plane sizes are known only for a size
    if len(sized.components) < 3 or not sized.components[0].is_luma:
        return None
    luma, chroma = sized.components[0], sized.components[1]  # PyAV's is_chroma is 0 for 4:4:4 chroma
    if not chroma.width or not chroma.height:
        return None
    return _PLANAR.get((luma.width // chroma.width, luma.height // chroma.height))


def _plane(frame: av.VideoFrame, i: int, dtype: type) -> np.ndarray:
    """Plane ``i`` of ``frame`` as a (height, width) view (its row padding left out)."""
    p = frame.planes[i]
    return np.frombuffer(p, dtype).reshape(p.height, p.line_size // np.dtype(dtype).itemsize)[:, : p.width]


def _to_8bit_yuv(frame: av.VideoFrame, planar: str, depth: int) -> av.VideoFrame:
    """``frame`` (planar YUV of ``depth`` > 8 bits) with every sample rounded to 8 bits."""
    shift = depth - 8
    out = av.VideoFrame(frame.width, frame.height, planar)
    for i in range(3):
        src = _plane(frame, i, np.uint16)
        rounded = (src.astype(np.uint32) + (1 << (shift - 1))) >> shift
        _plane(out, i, np.uint8)[...] = np.minimum(rounded, 255).astype(np.uint8)
    out.colorspace, out.color_range = frame.colorspace, frame.color_range
    return out


def to_rgb(frame: av.VideoFrame, source: object = "<video>") -> np.ndarray:
    """``frame`` as uint8 HxWx3 RGB by the conversion of ``CONVENTION``."""
    fmt = frame.format
    layout = layout_of(fmt)
    if layout is None:
        raise HarnessError(  # exit 2
            f"{source}: pixel format {fmt.name} is not read by the metrics (YUV 4:2:0/4:2:2/4:4:4 of 8 to 16 "
            "bits, and RGB, are)"
        )
    depth = max(c.bits for c in fmt.components if not c.is_alpha)
    if layout == "RGB":
        if depth <= 8:
            return frame.to_ndarray(format="rgb24")
        if not (fmt.name.startswith("gbrp") and fmt.name.endswith("le")):
            frame, depth = frame.reformat(format="gbrp16le"), 16  # packed or big-endian: planar first
        g, b, r = (_plane(frame, i, np.uint16).astype(np.uint32) for i in range(3))
        half, shift = 1 << (depth - 9), depth - 8
        return np.stack([np.minimum((c + half) >> shift, 255) for c in (r, g, b)], -1).astype(np.uint8)
    planar = _planar_name(fmt)
    assert planar is not None
    wanted = planar if depth <= 8 else f"{planar}{depth}le"
    if fmt.name != wanted and not (depth <= 8 and fmt.name == planar.replace("yuv", "yuvj")):
        frame = frame.reformat(format=wanted)  # a rearrangement of the same values
    if depth > 8:
        frame = _to_8bit_yuv(frame, planar, depth)
    full = frame.format.name.startswith("yuvj") or int(frame.color_range) == _FULL_RANGE
    return frame.to_ndarray(format="rgb24", src_color_range=ColorRange.JPEG if full else ColorRange.MPEG)
