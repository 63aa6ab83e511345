"""Read and write the H.264 + AAC mp4 files that runs produce (PyAV only). Writing mirrors the MiniMax-H3
LightX2V writer (libx264 yuv420p, AAC at the model's rate, one mp4), with an optional lossless twin (FFV1
RGB, float PCM) for metrics before compression. Reading streams frames one at a time, refusing a frame
size or a duration over the limits (far above any generated video, low enough that a hostile file is
refused in one line, not by exhausting memory). Every failure is a ``HarnessError`` naming the file."""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from harness.errors import HarnessError
from harness.input_files import check_input
from harness.media_audio import AudioFeed
from harness.media_audio import check_audio as _check_audio
from harness.pixel_formats import to_rgb
from harness.safe_write import create_temp_beside

AUDIO_CHUNK = 1024  # samples per AAC frame
SOUND_FILES = (".wav", ".flac", ".ogg")  # read by soundfile, not PyAV
MAX_FRAME_PIXELS_ENV = "HARNESS_MAX_FRAME_PIXELS"
MAX_DURATION_ENV = "HARNESS_MAX_MEDIA_SECONDS"
MAX_FRAME_PIXELS = 4096 * 4096
MAX_DURATION_S = 30 * 60.0


@dataclass(frozen=True)
class MediaInfo:
    frames: int
    width: int
    height: int
    fps: float
    duration_s: float
    has_audio: bool
    audio_rate: int | None
    audio_channels: int | None
    size_bytes: int
    audio_samples: int | None = None  # the track's length in samples, as its header states it
    pix_fmt: str | None = None  # as the decoder gives it (yuv420p, yuv420p10le, ...)


def _limit(env: str, default: float) -> float:
    raw = os.environ.get(env)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise HarnessError(f"{env}={raw!r}: expected a positive number")
    return value


def max_duration_s() -> float:
    return _limit(MAX_DURATION_ENV, MAX_DURATION_S)


def check_frame_size(p: Path, width: int, height: int) -> None:
    limit = int(_limit(MAX_FRAME_PIXELS_ENV, MAX_FRAME_PIXELS))
    if width * height > limit:
        raise HarnessError(
            f"{p}: frames are {width}x{height} ({width * height / 1e6:.1f} Mpixel), over the limit of "
            f"{limit / 1e6:.1f} Mpixel a frame (set {MAX_FRAME_PIXELS_ENV} to raise it)"
        )


def check_duration(p: Path, seconds: float, what: str = "media") -> None:
    limit = max_duration_s()
    if seconds > limit:
        raise HarnessError(
            f"{p}: {what} lasts {seconds:.0f} s or more, over the limit of {limit:g} s "
            f"(set {MAX_DURATION_ENV} to raise it)"
        )


def check_samples(p: Path, samples: int, rate: int) -> None:
    """``check_duration`` for ``samples`` decoded so far at ``rate`` (a header can lie)."""
    if rate > 0 and samples > max_duration_s() * rate:
        check_duration(p, samples / rate, "audio")


check_file = check_input  # a readable, non-empty regular file, else one line naming it (exit 2)


def open_media(path: str | os.PathLike) -> av.container.InputContainer:
    """A media file opened by PyAV; missing, empty or not media: one HarnessError line."""
    p = check_file(path)
    try:
        return av.open(str(p), mode="r")
    except (av.error.FFmpegError, UnicodeDecodeError) as exc:
        raise HarnessError(f"{p}: cannot open as media (corrupt or truncated?): {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def first_stream(streams: list, p: str | os.PathLike, missing: str):
    if not streams:
        raise HarnessError(f"{p}: {missing}")
    return streams[0]


def _layout(channels: int) -> str:
    return "stereo" if channels == 2 else "mono"


def _header_samples(aud: av.audio.stream.AudioStream | None) -> int | None:
    """The audio stream's duration in samples (an MP4's edit list leaves the encoder's priming out)."""
    if aud is None or aud.duration is None or aud.time_base is None:
        return None
    return round(float(aud.duration * aud.time_base) * aud.codec_context.sample_rate)


def probe(path: str | os.PathLike) -> MediaInfo:
    """Stream facts from the container header (no decoding)."""
    p = check_file(path)
    with open_media(p) as c:
        vs = first_stream(c.streams.video, p, "no video stream")
        cc = vs.codec_context
        rate = vs.average_rate or vs.guessed_rate or vs.base_rate
        fps = float(rate) if rate else 0.0
        frames = int(vs.frames or 0)
        if vs.duration is not None and vs.time_base is not None:
            duration = float(vs.duration * vs.time_base)
        elif c.duration is not None:
            duration = c.duration / av.time_base
        else:
            duration = frames / fps if fps else 0.0
        aud = c.streams.audio[0] if c.streams.audio else None
        info = dict(
            width=int(cc.width),
            height=int(cc.height),
            fps=fps,
            duration_s=duration,
            has_audio=aud is not None,
            audio_rate=int(aud.codec_context.sample_rate) if aud is not None else None,
            audio_channels=int(aud.codec_context.channels) if aud is not None else None,
            audio_samples=_header_samples(aud),
            size_bytes=p.stat().st_size,
            pix_fmt=cc.format.name if cc.format is not None else None,
        )
        if frames <= 0:  # not stored: counted by demuxing (no decoding)
            frames = sum(1 for pkt in c.demux(vs) if pkt.size)
    if info["width"] <= 0 or info["height"] <= 0:
        raise HarnessError(f"{p}: video stream has no frame size (corrupt?)")
    check_frame_size(p, info["width"], info["height"])
    check_duration(p, max(info["duration_s"], frames / fps if fps else 0.0))
    return MediaInfo(frames=frames, **info)


def iter_frames(
    path: str | os.PathLike, *, threads: bool | int = True, strict: bool = True
) -> Iterator[np.ndarray]:
    """Decoded frames as uint8 RGB HxWx3 arrays, one at a time (``threads``: True lets FFmpeg pick;
    ``strict``: fewer frames than declared is a HarnessError, not a silent early end)."""
    return (to_rgb(frame, path) for frame in iter_video_frames(path, threads=threads, strict=strict))


def iter_video_frames(
    path: str | os.PathLike, *, threads: bool | int = True, strict: bool = True
) -> Iterator[av.VideoFrame]:
    """``iter_frames`` before the colour conversion: PyAV frames as decoded (YUV)."""
    p = check_file(path)
    container = open_media(p)
    try:
        vs = first_stream(container.streams.video, p, "no video stream")
        count = 0 if threads is True else 1 if threads is False else int(threads)
        if count != 1:
            vs.thread_type = "AUTO"  # frame + slice threads; decoding releases the GIL
            vs.codec_context.thread_count = count  # 0: FFmpeg's choice
        declared = int(vs.frames or 0)
        if vs.codec_context.width and vs.codec_context.height:
            check_frame_size(p, vs.codec_context.width, vs.codec_context.height)
        rate = vs.average_rate or vs.guessed_rate or vs.base_rate
        most = int(max_duration_s() * float(rate)) if rate else None  # a header can lie: count
        n = 0
        try:
            for frame in container.decode(vs):
                check_frame_size(p, frame.width, frame.height)  # the stream may change size midway
                if most is not None and n + 1 > most:
                    check_duration(p, (n + 1) / float(rate), "video")
                yield frame
                n += 1
        except av.error.FFmpegError as exc:
            raise HarnessError(
                f"{p}: decode error after {n} frames (corrupt or truncated?): {_one_line(exc)}"
            ) from None
        if n == 0:
            raise HarnessError(f"{p}: video stream decoded to 0 frames (corrupt or truncated?)")
        if strict and declared and n < declared:
            raise HarnessError(f"{p}: decoded {n} of {declared} declared frames (truncated?)")
    finally:
        container.close()


def _frames_to_planar(frame: av.AudioFrame) -> np.ndarray:
    arr = frame.to_ndarray()
    if not frame.format.is_planar:  # packed: one row of interleaved samples
        arr = arr.reshape(-1, len(frame.layout.channels)).T
    if arr.dtype.kind == "i":  # s16/s32 -> [-1, 1)
        arr = arr.astype(np.float32) / float(np.iinfo(arr.dtype).max + 1)
    elif arr.dtype.kind == "u":  # u8 is offset binary
        arr = (arr.astype(np.float32) - 128.0) / 128.0
    return arr.astype(np.float32, copy=False)


def _soundfile_error(p: Path, exc: Exception) -> HarnessError:
    return HarnessError(f"{p}: cannot read audio: {_one_line(exc)}")


def _audio_header(p: Path) -> tuple[int, int, int]:
    """Rate, samples the header claims and channels of an mp4's track or a .wav/.flac file."""
    if p.suffix.lower() in SOUND_FILES:
        import soundfile as sf

        try:
            info = sf.info(str(p))
        except Exception as exc:  # soundfile raises its own LibsndfileError / RuntimeError
            raise _soundfile_error(p, exc) from None
        return int(info.samplerate), int(info.frames), int(info.channels)
    with open_media(p) as c:
        ast = first_stream(c.streams.audio, p, "no audio track")
        return int(ast.codec_context.sample_rate), _header_samples(ast) or 0, int(ast.codec_context.channels)


def read_audio(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """Audio as float32 [channels, samples] and its rate: an mp4's track or a .wav/.flac file."""
    p = check_file(path)
    rate, _, channels = _audio_header(p)
    blocks = list(iter_audio(p))
    return (np.concatenate(blocks, axis=1) if blocks else np.zeros((channels, 0), np.float32)), rate


def read_mono(path: str | os.PathLike) -> tuple[np.ndarray, int]:
    """The mono mix and the rate, decoded block by block into one buffer sized from the header."""
    p = check_file(path)
    rate, expected, _ = _audio_header(p)
    # pages of np.empty are only touched as they fill; a header claiming more is capped by the limit
    out = np.empty(max(0, min(expected, int(max_duration_s() * max(rate, 1))) + AUDIO_CHUNK), np.float32)
    n = 0
    for x in iter_audio(p):
        mono = x.mean(axis=0)
        if n + mono.size > out.size:  # the header said less: grow
            grown = np.empty(max(2 * out.size, n + mono.size), np.float32)
            grown[:n] = out[:n]
            out = grown
        out[n : n + mono.size] = mono
        n += mono.size
    return out[:n], rate


def iter_audio(path: str | os.PathLike, block: int = 1 << 16) -> Iterator[np.ndarray]:
    """An mp4's audio track (or a .wav/.flac file) as float32 [channels, samples] blocks, in order."""
    p = check_file(path)
    if p.suffix.lower() in SOUND_FILES:
        import soundfile as sf

        try:
            rate, samples = int(sf.info(str(p)).samplerate), 0
            for data in sf.blocks(str(p), blocksize=block, dtype="float32", always_2d=True):
                samples += data.shape[0]
                check_samples(p, samples, rate)
                yield np.ascontiguousarray(data.T)
        except HarnessError:
            raise
        except Exception as exc:  # soundfile raises its own LibsndfileError / RuntimeError
            raise _soundfile_error(p, exc) from None
        return
    with open_media(p) as c:
        ast = first_stream(c.streams.audio, p, "no audio track")
        rate = int(ast.codec_context.sample_rate)
        chunks: list[np.ndarray] = []
        pending = total = 0
        try:
            for frame in c.decode(ast):
                x = _frames_to_planar(frame)
                chunks.append(x)
                pending += x.shape[1]
                check_samples(p, total + pending, rate)
                if pending >= block:
                    total += pending
                    yield np.concatenate(chunks, axis=1)
                    chunks, pending = [], 0
        except av.error.FFmpegError as exc:
            raise HarnessError(f"{p}: audio decode error (corrupt or truncated?): {_one_line(exc)}") from None
    if chunks:
        total += pending
        yield np.concatenate(chunks, axis=1)
    if total == 0:
        raise HarnessError(f"{p}: audio track decoded to 0 samples")


def _mux_audio(c, astream, aud: AudioFeed, start: int, stop: int | None) -> int:
    """Audio from ``start`` up to sample ``stop`` (None: to the end); where it got to."""
    layout, pos = _layout(aud.channels), start
    while stop is None or pos < stop:
        part = aud.take(AUDIO_CHUNK if stop is None else min(AUDIO_CHUNK, stop - pos))
        if part is None:
            break
        af = av.AudioFrame.from_ndarray(np.ascontiguousarray(part), format="fltp", layout=layout)
        af.sample_rate = astream.codec_context.sample_rate
        af.pts = pos
        c.mux(astream.encode(af))
        pos += part.shape[1]
    return pos


LOSSLESS_CONVENTION = (
    "FFV1 (bgr0: 8-bit RGB, lossless) + pcm_f32le in Matroska, written from the same RGB frames"
)


class MediaWriter:
    """Frames (uint8 RGB, by ``add``) and audio (float32 [C, S]: an array or blocks),
    streamed and interleaved, into a file beside ``path`` renamed into place at ``close()`` (never
    half an output): H.264 yuv420p + AAC in mp4 or, ``lossless``, FFV1 RGB + float PCM in Matroska.
    ``seconds``: the time spent here (kept out of a run's timings)."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        fps: int | float,
        audio: np.ndarray | Iterable[np.ndarray] | None = None,
        sample_rate: int = 32000,
        lossless: bool = False,
        crf: int = 18,
        preset: str = "ultrafast",
    ):
        t0 = time.perf_counter()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(audio, np.ndarray):
            audio = [_check_audio(audio, self.path)]  # refused before anything is written
        fd, self.tmp = create_temp_beside(self.path)
        os.close(fd)
        self.c = None
        try:
            self.feed = AudioFeed(audio, self.path) if audio is not None else None
            self.c = av.open(str(self.tmp), mode="w", format="matroska" if lossless else "mp4")
            self.rate = Fraction(fps).limit_denominator(1001)
            self.vs = self.c.add_stream("ffv1" if lossless else "libx264", rate=self.rate)
            self.vs.pix_fmt = "bgr0" if lossless else "yuv420p"
            if not lossless:
                # mbtree's threaded lookahead makes libx264 give different bytes for the same frames
                # from one call to the next; without it any preset is reproducible (ultrafast has none).
                self.vs.options = {"crf": str(crf), "preset": preset, "x264-params": "mbtree=0"}
            self.ast = None
            if self.feed is not None and self.feed.channels:  # every stream before the first packet
                codec = "pcm_f32le" if lossless else "aac"
                self.ast = self.c.add_stream(codec, rate=sample_rate, layout=_layout(self.feed.channels))
        except BaseException:
            self.abandon()
            raise
        self.sample_rate, self.size, self.n, self.apos = sample_rate, None, 0, 0
        self.seconds = time.perf_counter() - t0

    def add(self, frame: np.ndarray) -> None:
        t0 = time.perf_counter()
        arr = np.asarray(frame)
        if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
            raise HarnessError(
                f"{self.path}: frame {self.n} must be uint8 HxWx3 RGB, got {arr.dtype} shape {tuple(arr.shape)}"
            )
        h, w = arr.shape[:2]
        if self.size is not None and (h, w) != self.size:
            raise HarnessError(
                f"{self.path}: frame {self.n} is {h}x{w}, earlier frames are {self.size[0]}x{self.size[1]}"
            )
        if h % 2 or w % 2:
            raise HarnessError(f"{self.path}: frame size {w}x{h} must be even in both dimensions for yuv420p")
        arr = np.ascontiguousarray(arr)
        if self.size is None:
            self.size = arr.shape[:2]
            self.vs.width, self.vs.height = self.size[1], self.size[0]
        vf = av.VideoFrame.from_ndarray(arr, format="rgb24")
        vf.pts = self.n
        self.c.mux(self.vs.encode(vf))
        self.n += 1
        if self.ast is not None:  # the audio up to this frame's time
            self.apos = _mux_audio(
                self.c, self.ast, self.feed, self.apos, int(self.n * self.sample_rate / float(self.rate))
            )
        self.seconds += time.perf_counter() - t0

    def close(self) -> None:
        t0 = time.perf_counter()
        try:
            if self.n == 0:
                raise HarnessError(f"{self.path}: no frames to write")
            self.c.mux(self.vs.encode(None))
            if self.ast is not None:
                _mux_audio(self.c, self.ast, self.feed, self.apos, None)
                self.c.mux(self.ast.encode(None))
            self.c.close()
            os.replace(self.tmp, self.path)
        except BaseException:
            self.abandon()
            raise
        self.seconds += time.perf_counter() - t0

    def abandon(self) -> None:
        """Stop without an output: the half-written file is removed."""
        if self.c is not None:
            with contextlib.suppress(Exception):
                self.c.close()
        self.tmp.unlink(missing_ok=True)


def write_av(path: str | os.PathLike, frames: Iterable[np.ndarray] | np.ndarray, audio=None, *,
             lossless_copy: str | os.PathLike | None = None, **kw) -> float:  # fmt: skip
    """Encode ``frames`` and ``audio`` as ``MediaWriter`` does (H.264 + AAC unless ``lossless``), and
    ``lossless_copy`` the same media losslessly (``audio`` then an array): the seconds the copy took."""
    w, twin = MediaWriter(path, audio=audio, **{"fps": 24, **kw}), None
    try:
        if lossless_copy:
            twin = MediaWriter(
                lossless_copy, audio=audio, lossless=True, fps=w.rate, sample_rate=w.sample_rate
            )
        for frame in frames:
            if twin:  # first, as the frame's problems name it
                twin.add(frame)
            w.add(frame)
        w.close()
        if twin:
            twin.close()
    except BaseException:
        w.abandon()
        if twin:
            twin.abandon()
        raise
    return twin.seconds if twin else 0.0
