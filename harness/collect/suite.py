"""The full metric suite: decode two runs once, in lockstep, and measure everything: a decoder thread
per run (hashing and measuring its frames on the side), SSIM + SSE workers, one audio thread, bounded
queues (flat memory); on a GPU the main thread computes SSIM, SSE and statistics on uploaded batches.
"""

from __future__ import annotations

import collections
import contextlib
import filecmp
import itertools
import math
import os
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.collect import audio as audio_metrics
from harness.collect.layout import LayoutPair
from harness.collect.models import AudioPairMetrics, PairResult, RunStats, VideoPairMetrics
from harness.collect.ssim import PairReducer, Workspace, sse_torch, ssim_sse, ssim_torch
from harness.collect.stats import StatsReducer, frame_stats_torch
from harness.envinfo import resolve_device
from harness.errors import HarnessError
from harness.media import MediaInfo, iter_audio, iter_frames, probe, read_audio
from harness.pixel_formats import describe_name

if TYPE_CHECKING:
    import torch

GPU_BATCH = 8  # frame pairs per GPU upload
QUEUE_FRAMES = 2  # decoded frames buffered per stream (and per side thread)
_DONE = object()


class FrameDecoder(threading.Thread):
    """Decodes one file into a bounded queue; a second thread hashes and (on CPU) measures
    every frame, so that on many cores neither chain limits the other."""

    def __init__(self, path: Path, limit: int, *, cpu_stats: bool, stop: threading.Event):
        super().__init__(daemon=True, name=f"decode-{path.name}")
        self.path, self.limit, self.cpu_stats, self.stop = path, limit, cpu_stats, stop
        # FFmpeg threads: none on small machines (our own threads keep the cores busy, and FFmpeg's
        # add overhead), a few on large ones (where decoding limits a GPU)
        self.threads = max(1, min(4, ((os.cpu_count() or 2) - 2) // 2))
        self.q: queue.Queue = queue.Queue(maxsize=QUEUE_FRAMES)
        self.side_q: queue.Queue = queue.Queue(maxsize=QUEUE_FRAMES)
        self.side = threading.Thread(target=self._measure, daemon=True, name=f"stats-{path.name}")
        self.side_error: BaseException | None = None
        self.stats = StatsReducer()
        self.count = 0
        self.ended = False  # the end marker was handed to the consumer

    def _put(self, q: queue.Queue, item: Any) -> bool:
        while not self.stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _measure(self) -> None:
        prev = None
        try:
            while not self.stop.is_set():
                try:
                    frame = self.side_q.get(timeout=0.1)
                except queue.Empty:
                    continue
                if frame is _DONE:
                    return
                if self.cpu_stats:
                    self.stats.push(frame, prev)
                else:
                    self.stats.update_hash(frame)
                prev = frame
        except BaseException as exc:
            self.side_error = exc
            self.stop.set()

    def run(self) -> None:
        self.side.start()
        try:
            # strict: a file that ends before its declared length is an error, not a short run
            frames = iter_frames(self.path, strict=True, threads=self.threads)
            for frame in frames:
                if self.count >= self.limit:
                    frames.close()
                    break
                self.count += 1
                if not (self._put(self.side_q, frame) and self._put(self.q, frame)):
                    return
            self._put(self.side_q, _DONE)
            self.side.join()  # the statistics are complete before the consumer sees the end
            self._put(self.q, self.side_error or _DONE)
        except BaseException as exc:  # handed to the main thread, which raises it
            self._put(self.q, exc)

    def get(self) -> np.ndarray | None:
        while True:
            try:
                item = self.q.get(timeout=0.1)
                break
            except queue.Empty:
                if self.side_error is not None:
                    raise self.side_error from None
                if not self.is_alive() and self.q.empty():
                    raise HarnessError(f"{self.path}: decoding stopped unexpectedly") from None
        if isinstance(item, BaseException):
            raise item
        if item is _DONE:
            self.ended = True
            return None
        return item

    def wait_end(self) -> None:
        """Block until the end marker: only then has the side thread hashed and measured every frame."""
        while not self.ended:
            self.get()


@contextlib.contextmanager
def decoding(
    paths: list[Path], limit: int, *, cpu_stats: bool, layout: LayoutPair | None = None
) -> Iterator[list[FrameDecoder]]:
    """A started decoder of each path (each handing its grid sums to ``layout`` as side 0, 1, ...);
    after the block every frame is hashed and measured and every thread stopped."""
    stop = threading.Event()
    decs = [FrameDecoder(p, limit, cpu_stats=cpu_stats, stop=stop) for p in paths]
    for k, dec in enumerate(decs):
        dec.stats.layout, dec.stats.side = layout, k
        dec.start()
    try:
        yield decs
        for dec in decs:
            dec.wait_end()
    finally:
        stop.set()  # unblocks decoders still waiting on a full queue
        for dec in decs:
            dec.join()
            dec.side.join()


def check_compatible(
    a: Path, b: Path, ia: MediaInfo, ib: MediaInfo, truncate: bool, resample_audio: bool, *, cli: bool = False
) -> int:
    """Frames to compare; raises before any decoding when the pair cannot be compared (``cli``: the
    words of ``harness compare``, which name its flags)."""
    if (ia.width, ia.height) != (ib.width, ib.height):
        raise HarnessError(
            f"{'frame size' if cli else 'resolution'} differs: {a} is {ia.width}x{ia.height}, {b} is "
            f"{ib.width}x{ib.height}{' (frames of other sizes are never compared)' if cli else ''}"
        )
    if not math.isclose(ia.fps, ib.fps, rel_tol=1e-6):
        raise HarnessError(f"frame rate differs: {a} is {ia.fps:g} fps, {b} is {ib.fps:g} fps")
    if ia.frames != ib.frames and not truncate:
        how = f"--truncate compares the first {min(ia.frames, ib.frames)}" if cli else ""
        raise HarnessError(
            f"frame count differs: {a} has {ia.frames}{' frames' if cli else ''}, {b} has {ib.frames} "
            f"({how or 'truncate to compare the shorter'})"
        )
    if ia.has_audio != ib.has_audio:
        has, lacks = (a, b) if ia.has_audio else (b, a)
        raise HarnessError(f"audio track in {has} but not in {lacks}")
    if ia.has_audio:
        if ia.audio_channels != ib.audio_channels:
            raise HarnessError(
                f"audio channel count differs: {a} has {ia.audio_channels}, {b} has {ib.audio_channels}"
            )
        if ia.audio_rate != ib.audio_rate and not resample_audio:
            how = f"--resample-audio resamples {b} to {ia.audio_rate} Hz" if cli else ""
            raise HarnessError(
                f"audio sample rate differs: {a} is {ia.audio_rate} Hz, {b} is {ib.audio_rate} Hz "
                f"({how or 'ask for resampling to compare'})"
            )
    return min(ia.frames, ib.frames)


def formats_note(ia: MediaInfo, ib: MediaInfo) -> str | None:
    """What a pair stored in different pixel formats is compared as (None when they agree)."""
    if ia.pix_fmt == ib.pix_fmt or None in (ia.pix_fmt, ib.pix_fmt):
        return None
    return (
        f"pixel formats differ: A {describe_name(ia.pix_fmt)}, B {describe_name(ib.pix_fmt)}; both compared as "
        "8-bit RGB by the one conversion of the 'rgb' convention (samples of more than 8 bits rounded to 8 first)"
    )


def _pair_job(fa: np.ndarray, fb: np.ndarray, local: threading.local) -> tuple[float, float]:
    """(MSE, SSIM) of one frame pair on CPU: one pass of the compiled kernel."""
    ws = getattr(local, "ws", None)
    if ws is None or ws.key[:2] != (fa.shape[1], fa.shape[2]):
        ws = local.ws = Workspace(fa.shape[1], fa.shape[2])
    total, count, err = ssim_sse(fa, fb, ws=ws)
    if err == 0:
        return 0.0, 1.0
    return err / fa.size, total / count


def _track(rate: int, blocks: Iterable[np.ndarray]) -> audio_metrics.TrackStream:
    track = audio_metrics.TrackStream(rate, mel=False)
    for x in blocks:
        track.push(x)
    return track


def _run_audio(t: audio_metrics.TrackStream) -> dict:
    return {
        "audio_rate": t.rate,
        "audio_channels": int(t.channels or 0),
        "audio_samples": int(t.samples),
        "audio_rms": t.rms,
        "audio_peak": t.peak,
    }


def audio_part(
    a: Path, b: Path, ia: MediaInfo, ib: MediaInfo, resample_audio: bool
) -> tuple[AudioPairMetrics | None, dict, dict]:
    """Audio pair metrics and the per-run audio fields of RunStats; equal rates stream both tracks in
    blocks (the one behind read next), resampling reads the whole tracks."""
    if not (ia.has_audio and ib.has_audio):
        return None, {}, {}
    ra, rb = int(ia.audio_rate or 0), int(ib.audio_rate or 0)
    if ra != rb:
        return _audio_resampled(a, b, resample_audio)
    # Aligned by the containers' timestamps; the residual lag is searched on a bounded head of each
    # track after that alignment (audio_metrics.CONVENTION), reported and never removed.
    lag = audio_metrics.container_lag(a, b, ra)
    head_a, blocks_a = audio_metrics.peek(iter_audio(a))
    head_b, blocks_b = audio_metrics.peek(iter_audio(b))
    residual = (0, None, None)
    if head_a.size and head_b.size:
        residual = audio_metrics.lag_search(*audio_metrics.overlap(head_a, head_b, lag))
    pair = audio_metrics.PairStream(ra, lag)
    blocks = (blocks_a, blocks_b)
    live = [True, True]
    while any(live):
        k = pair.behind if all(live) else live.index(True)
        x = next(blocks[k], None)
        if x is None:
            live[k] = False
            continue
        if pair.tracks[1 - k].channels not in (None, x.shape[0]):
            counts = [t.channels for t in pair.tracks]
            counts[k] = x.shape[0]
            raise HarnessError(f"audio channel count differs: {a} has {counts[0]}, {b} has {counts[1]}")
        pair.push(k, x)
    metrics = AudioPairMetrics(
        rate_a=ra, rate_b=rb, residual_lag_samples=residual[0], residual_corr=residual[1],
        aligned_corr=residual[2], **pair.result(),
    )  # fmt: skip
    return metrics, _run_audio(pair.tracks[0]), _run_audio(pair.tracks[1])


def _audio_resampled(a: Path, b: Path, resample_audio: bool) -> tuple[AudioPairMetrics, dict, dict]:
    pa, ra = read_audio(a)
    pb, rb = read_audio(b)
    runs = [_run_audio(_track(r, [p])) for p, r in ((pa, ra), (pb, rb))]
    if pa.shape[0] != pb.shape[0]:
        raise HarnessError(f"audio channel count differs: {a} has {pa.shape[0]}, {b} has {pb.shape[0]}")
    if not resample_audio:
        raise HarnessError(
            f"audio sample rate differs: {a} is {ra} Hz, {b} is {rb} Hz (ask for resampling to compare)"
        )
    pb = audio_metrics.resample(pb, rb, ra)
    note = f"{b.name} resampled {rb} Hz -> {ra} Hz with libswresample (PyAV); A is the reference"
    m = audio_metrics.pair_metrics(pa, pb, ra, audio_metrics.container_lag(a, b, ra))
    m["samples_b"] = runs[1]["audio_samples"]  # as decoded, before resampling
    metrics = AudioPairMetrics(rate_a=ra, rate_b=rb, resampled=True, resample_note=note, **m)
    return metrics, runs[0], runs[1]


def _video_cpu(dec_a: FrameDecoder, dec_b: FrameDecoder, n: int, reducer: PairReducer, workers: int) -> None:
    local = threading.local()
    pending: collections.deque[tuple[int, Future]] = collections.deque()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ssim") as pool:
        for i in range(n):
            fa, fb = dec_a.get(), dec_b.get()
            if fa is None or fb is None:
                break
            pending.append((i, pool.submit(_pair_job, fa, fb, local)))
            while len(pending) > workers + 1:
                j, fut = pending.popleft()
                reducer.add(j, *fut.result())
        for j, fut in pending:
            reducer.add(j, *fut.result())


class _Uploader:
    """Frames into one reused (pinned, on CUDA) host buffer, one copy per batch to the device; each
    batch's .tolist() synchronises, so the buffer is free again when it is refilled."""

    def __init__(self, shape: tuple[int, ...], device: torch.device):
        import torch

        pin = device.type == "cuda"
        self.buf = torch.empty((GPU_BATCH, *shape), dtype=torch.uint8, pin_memory=pin)
        self.view = self.buf.numpy()
        self.device = device

    def upload(self, frames: list[np.ndarray]) -> torch.Tensor:
        for k, f in enumerate(frames):
            np.copyto(self.view[k], f)
        return self.buf[: len(frames)].to(self.device, non_blocking=True)


def _batches(decs: list[FrameDecoder], n: int):
    """Up to ``GPU_BATCH`` [frame of each decoder] at a time, at most ``n``, ending where a decoder ends."""
    for start in range(0, n, GPU_BATCH):
        batch = []
        for _ in range(min(GPU_BATCH, n - start)):
            frames = [d.get() for d in decs]
            if any(f is None for f in frames):
                break
            batch.append(frames)
        if batch:
            yield batch
        if len(batch) < min(GPU_BATCH, n - start):
            return


def _video_torch(decs: list[FrameDecoder], n: int, reducer: PairReducer | None, device: str) -> None:
    """On the device: each decoder's statistics, and with a ``reducer`` (two decoders) SSIM and SSE."""
    import torch

    dev = torch.device(device.removeprefix("torch:"))
    prev: list[torch.Tensor | None] = [None] * len(decs)
    up: list[_Uploader] = []
    i = 0
    for batch in _batches(decs, n):
        up = up or [_Uploader(batch[0][0].shape, dev) for _ in decs]
        ts = [u.upload([frames[k] for frames in batch]) for k, u in enumerate(up)]
        values = ts[0][0].numel()
        if reducer is not None:
            s = ssim_torch(*ts, dtype=torch.float32).tolist()
            e = sse_torch(*ts).tolist()
            for k in range(len(batch)):
                m = float(e[k]) / values
                reducer.add(i + k, m, 1.0 if m == 0.0 else float(s[k]))
        for k, (dec, t) in enumerate(zip(decs, ts, strict=True)):
            for st in frame_stats_torch(t, prev[k]):
                dec.stats.add(st, values)
            prev[k] = t[-1].clone()  # the next batch overwrites the upload buffer
        i += len(batch)


def _run_stats(path: Path, info: MediaInfo, stats: StatsReducer, audio: dict) -> RunStats:
    return RunStats(
        file=str(path), width=info.width, height=info.height, fps=info.fps, **stats.result(), **audio
    )


def measure_pair(
    path_a: str | os.PathLike,
    path_b: str | os.PathLike,
    *,
    csv_path: str | os.PathLike | None = None,
    truncate: bool = False,
    resample_audio: bool = False,
    device: str = "auto",
) -> PairResult:
    """Video pair metrics, both runs' statistics and the audio metrics, from one decode of each file
    (run A the reference; what must match: ``check_compatible``); CPU SSIM: a thread a core, 8 at most."""
    t0 = time.perf_counter()
    a, b = Path(path_a), Path(path_b)
    ia, ib = probe(a), probe(b)
    n = check_compatible(a, b, ia, ib, truncate, resample_audio)
    dev = resolve_device(device)
    layout = LayoutPair(ia.height, ia.width)  # both runs' grids meet here (A side 0, B side 1)
    reducer = PairReducer()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="audio") as side:
        audio_future = side.submit(audio_part, a, b, ia, ib, resample_audio)
        same_file_future = side.submit(filecmp.cmp, a, b, shallow=False)
        with decoding([a, b], n, cpu_stats=dev == "cpu", layout=layout) as decs:
            if dev == "cpu":
                _video_cpu(*decs, n, reducer, max(1, min(8, os.cpu_count() or 2)))
            else:
                _video_torch(decs, n, reducer, dev)
        audio, audio_a, audio_b = audio_future.result()
        same_file = same_file_future.result()
    if reducer.frames != n:
        raise HarnessError(f"decoded {reducer.frames} frame pairs of {n} expected from {a} and {b}")
    if csv_path is not None:
        reducer.write_csv(csv_path)
    stats_a = _run_stats(a, ia, decs[0].stats, audio_a)
    stats_b = _run_stats(b, ib, decs[1].stats, audio_b)
    video = VideoPairMetrics(
        file_a=str(a),
        file_b=str(b),
        frames=n,
        width=ia.width,
        height=ia.height,
        fps=ia.fps,
        **reducer.result(),
        **layout.result(),
        frames_bitwise_equal=reducer.identical == n and ia.frames == ib.frames,
        frames_hash_a=stats_a.video_hash,
        frames_hash_b=stats_b.video_hash,
        files_bitwise_equal=same_file,
        truncated_to=n if truncate and ia.frames != ib.frames else None,
        frames_a=ia.frames,
        frames_b=ib.frames,
        per_frame_csv=Path(csv_path).name if csv_path is not None else None,
        pixel_formats=formats_note(ia, ib),
    )
    seconds = time.perf_counter() - t0
    return PairResult(video=video, audio=audio, stats_a=stats_a, stats_b=stats_b, seconds=seconds, device=dev)


def measure_run(path: str | os.PathLike, *, device: str = "cpu") -> RunStats:
    """Statistics of one run's video and audio track (one decode, streamed)."""
    p = Path(path)
    info = probe(p)
    stats = StatsReducer()
    if resolve_device(device) == "cpu":
        for prev, frame in itertools.pairwise(itertools.chain([None], iter_frames(p))):
            stats.push(frame, prev)
    else:
        with decoding([p], info.frames, cpu_stats=False) as decs:
            _video_torch(decs, info.frames, None, resolve_device(device))
        stats = decs[0].stats
    audio = _run_audio(_track(int(info.audio_rate or 0), iter_audio(p))) if info.has_audio else {}
    return _run_stats(p, info, stats, audio)
