"""The codec's own error on the reference run (H.264 and the YUV -> RGB conversion move every pixel
before attention is compared): ``lossless``, the decoded mp4 against the run's lossless twin (FFV1 RGB
+ PCM); or ``re-encode``, the reference encoded again with the run's settings (an estimate, usually a
little smaller), its video against an x264 CRF 0 twin of that encode (so the shared colour conversion's
bias is not counted as codec error) and its audio against the decoded reference.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import tempfile
from pathlib import Path

import av

from harness.collect.models import DEFAULT_PRESET, CodecSettings
from harness.errors import HarnessError
from harness.media import first_stream, iter_audio, iter_frames, open_media, probe, write_av
from harness.pixel_formats import describe, layout_of

_X264_INFO = re.compile(rb"x264 - core [^\x00]{0,4000}")
_CRF = re.compile(r"\bcrf=([0-9.]+)")


# FFmpeg's AVColorSpace and AVColorRange values, as the frame reports them.
_MATRIX = {
    2: "BT.601 (untagged; libswscale's default)",
    1: "BT.709 (tagged)",
    5: "BT.601 (tagged bt470bg)",
    6: "BT.601 (tagged smpte170m)",
    9: "BT.2020 non-constant (tagged)",
}
_RANGE = {0: "unspecified", 1: "limited (tagged)", 2: "full (tagged)"}


def x264_info(path: str | os.PathLike, max_packets: int = 8) -> str | None:
    """The option string libx264 writes into its first SEI ('x264 - core ... crf=18.0 ...')."""
    with contextlib.suppress(av.error.FFmpegError, HarnessError), open_media(path) as c:
        vs = first_stream(c.streams.video, path, "no video stream")  # suppressed: no info
        for pkt in itertools.islice(c.demux(vs), max_packets):
            if m := _X264_INFO.search(bytes(pkt)):
                return m.group(0).decode("ascii", "replace")
    return None


def encoder_settings(
    path: str | os.PathLike, *, crf: int | None = None, preset: str | None = None
) -> CodecSettings:
    """Codec settings of a file: the given ones, else the CRF in its x264 info, else MiniMax-H3's (assumed)."""
    with open_media(path) as c:
        cc = first_stream(c.streams.video, path, "no video stream").codec_context
        codec, pix_fmt = cc.name, cc.format.name if cc.format else "yuv420p"
    info = x264_info(path)
    s = CodecSettings(codec=codec, pix_fmt=pix_fmt, encoder_info=info)
    if crf is not None:
        s.crf, s.preset, s.source = int(crf), preset or DEFAULT_PRESET, "run spec"
        return s
    if found := _CRF.search(info or ""):
        s.crf, s.source = round(float(found.group(1))), "CRF from the file's x264 info, preset assumed"
    else:
        s.source = "assumed (MiniMax-H3 writer: CRF 18, ultrafast)"
    return s


def decode_convention(path: str | os.PathLike) -> str:
    """How the frames of ``path`` become uint8 RGB for the metrics (read off its first frame)."""
    with open_media(path) as c:
        vs = first_stream(c.streams.video, path, "no video stream")
        try:
            frame = next(c.decode(vs), None)
        except av.error.FFmpegError as err:
            raise HarnessError(f"{path}: decode error on the first frame: {err}") from None
        codec = vs.codec_context.name
    if frame is None:
        raise HarnessError(f"{path}: no frame decoded")
    fmt = frame.format.name
    layout = layout_of(frame.format)
    if layout == "RGB":
        return f"{codec} {fmt}: RGB stored, no colour conversion"
    if layout is None:
        return f"{codec} {fmt}: a pixel format the metrics do not read"
    space, rng = int(frame.colorspace), int(frame.color_range)
    matrix = _MATRIX.get(space, f"colorspace tag {space} (libswscale's table for it)")
    full = fmt.startswith("yuvj") or rng == 2
    depth = frame.format.components[0].bits
    rounded = f"{depth}-bit samples rounded to 8 bits, then " if depth > 8 else ""
    return (
        f"{codec} {describe(frame.format)} decoded by FFmpeg, {rounded}to RGB by libswscale's unscaled 8-bit "
        f"path: matrix {matrix}; range {'full 0-255' if full else 'limited 16-235'} (stream says "
        f"{_RANGE.get(rng, rng)}); chroma samples replicated over their block, no interpolation"
    )


def reencode(
    src: str | os.PathLike, dest: str | os.PathLike, settings: CodecSettings, *, crf: int | None = None
) -> None:
    """``src``'s decoded frames and audio encoded again into ``dest`` with ``settings`` (``crf``: another
    rate factor; 0 is x264's lossless coding of the same pixel format)."""
    info = probe(src)
    audio = iter_audio(src) if info.has_audio else None  # streamed: a long track is never held whole
    write_av(
        dest,
        iter_frames(src),
        audio,
        fps=info.fps,
        sample_rate=info.audio_rate or 32000,
        crf=settings.crf if crf is None else crf,
        preset=settings.preset,
    )


def measure_codec_floor(
    reference: str | os.PathLike,
    settings: CodecSettings,
    *,
    lossless: str | os.PathLike | None = None,
    device: str = "auto",
):
    """(PairResult, method): the codec's error on the reference run (see the module docstring)."""
    from harness.collect.suite import measure_pair

    if lossless is not None:
        return measure_pair(lossless, reference, device=device), "lossless"
    ref = Path(reference)
    try:
        tmp = tempfile.TemporaryDirectory(prefix=".codec_floor.", dir=ref.parent)
    except OSError:  # a read-only campaign: the system's temporary folder
        tmp = tempfile.TemporaryDirectory(prefix="harness-codec-floor.")
    with tmp as folder:
        lossy, twin = Path(folder) / "lossy.mp4", Path(folder) / "twin.mp4"
        reencode(ref, lossy, settings)
        reencode(ref, twin, settings, crf=0)
        result = measure_pair(twin, lossy, device=device)  # the video: codec error alone
        audio = measure_pair(ref, lossy, device=device)  # the audio (and statistics): against the reference
        result.audio, result.stats_a, result.stats_b = audio.audio, audio.stats_a, audio.stats_b
        return result, "re-encode"
