from __future__ import annotations

import csv
import hashlib
import math
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from collect_testutil import make_video, scene, tone
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from harness.collect.models import PairResult
from harness.collect.suite import measure_pair, measure_run, resolve_device
from harness.errors import HarnessError
from harness.media import iter_frames, read_audio


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("suite")
    n = 10
    frames = scene(n)
    audio = tone(n)
    v = {
        "a": make_video(d / "a.mp4", frames, audio),
        "b": make_video(d / "b.mp4", scene(n, noise=6.0, seed=1), tone(n, noise=0.01, seed=1)),
        "short": make_video(d / "short.mp4", frames[:7], audio),
        "mute": make_video(d / "mute.mp4", frames),
        "mute2": make_video(d / "mute2.mp4", scene(n, noise=4.0, seed=2)),
        "wide": make_video(d / "wide.mp4", scene(n, 64, 112)),
        "fps30": make_video(d / "fps30.mp4", frames, audio, fps=30),
        "rate16k": make_video(d / "rate16k.mp4", frames, tone(n, rate=16000), rate=16000),
        "one": make_video(d / "one.mp4", frames[:1], audio[:, :1400]),
    }
    shutil.copy(v["a"], d / "a_copy.mp4")
    v["a_copy"] = d / "a_copy.mp4"
    return v


def _skimage_ssim(x: np.ndarray, y: np.ndarray) -> float:
    return float(
        structural_similarity(
            x,
            y,
            gaussian_weights=True,
            sigma=1.5,
            use_sample_covariance=False,
            data_range=255,
            channel_axis=-1,
        )
    )


def test_pair_matches_an_independent_frame_loop(videos: dict[str, Path], tmp_path: Path) -> None:
    res = measure_pair(videos["a"], videos["b"], csv_path=tmp_path / "pair.csv", device="cpu")
    fa, fb = list(iter_frames(videos["a"])), list(iter_frames(videos["b"]))
    mses = [np.mean((x.astype(np.float64) - y) ** 2) for x, y in zip(fa, fb, strict=True)]
    psnrs = [10 * np.log10(255**2 / m) for m in mses]
    ssims = [_skimage_ssim(x, y) for x, y in zip(fa, fb, strict=True)]
    v = res.video
    assert (v.frames, v.width, v.height, v.fps) == (10, 96, 64, 24.0)
    assert v.psnr_mean == pytest.approx(np.mean(psnrs), abs=1e-9)
    assert v.psnr_min == pytest.approx(min(psnrs), abs=1e-9) and v.psnr_min_frame == int(np.argmin(psnrs))
    assert v.ssim_mean == pytest.approx(np.mean(ssims), abs=1e-6)
    assert v.ssim_min == pytest.approx(min(ssims), abs=1e-6) and v.ssim_min_frame == int(np.argmin(ssims))
    assert v.mse_mean == pytest.approx(np.mean(mses), rel=1e-12)
    assert v.identical_frames == 0 and not v.frames_bitwise_equal and not v.files_bitwise_equal
    assert v.frames_hash_a == hashlib.sha256(b"".join(f.tobytes() for f in fa)).hexdigest()
    assert v.truncated_to is None and (v.frames_a, v.frames_b) == (10, 10)
    assert v.per_frame_csv == "pair.csv"
    rows = list(csv.DictReader((tmp_path / "pair.csv").open()))
    assert [float(r["ssim"]) for r in rows] == pytest.approx(ssims, abs=1e-6)
    assert [float(r["psnr"]) for r in rows] == pytest.approx(psnrs, abs=1e-9)

    # audio: A is the reference
    pa, _ = read_audio(videos["a"])
    pb, _ = read_audio(videos["b"])
    n = min(pa.shape[1], pb.shape[1])
    x, y = pa[:, :n].astype(np.float64), pb[:, :n].astype(np.float64)
    au = res.audio
    assert au is not None and au.sample_rate == 32000 and au.channels == 2 and not au.resampled
    assert au.snr_db == pytest.approx(10 * np.log10((x**2).sum() / ((x - y) ** 2).sum()), rel=1e-9)
    assert 10 < au.snr_db < 60  # an AAC round trip plus added noise: finite, not garbage
    assert au.samples_compared == n and au.samples_dropped == abs(pa.shape[1] - pb.shape[1])
    assert 0.9 < au.logmel_cosine <= 1.0 and 0.9 < au.cosine < 1.0

    # the statistics equal a one-file measurement
    run_a = measure_run(videos["a"])
    assert res.stats_a.model_dump() == run_a.model_dump()
    assert res.stats_a.audio_rms == pytest.approx(np.sqrt((pa.astype(np.float64) ** 2).mean()))
    assert res.seconds > 0 and res.device == "cpu"
    assert PairResult.model_validate_json(res.model_dump_json()) == res


def test_identical_files(videos: dict[str, Path]) -> None:
    res = measure_pair(videos["a"], videos["a_copy"], device="cpu")
    v = res.video
    assert v.psnr_mean == math.inf and v.psnr_min == math.inf and v.psnr_mean_finite is None
    assert v.ssim_mean == 1.0 and v.ssim_min == 1.0
    assert v.identical_frames == 10 and v.frames_bitwise_equal and v.files_bitwise_equal
    assert v.frames_hash_a == v.frames_hash_b
    assert res.audio is not None and res.audio.snr_db == math.inf and res.audio.bitwise_equal
    assert res.stats_a.model_dump(exclude={"file"}) == res.stats_b.model_dump(exclude={"file"})
    text = res.model_dump_json()
    assert '"psnr_mean":"Infinity"' in text
    assert PairResult.model_validate_json(text).video.psnr_mean == math.inf


def _per_frame(path: Path) -> tuple[list[float], list[float]]:
    rows = list(csv.DictReader(path.open()))
    return [float(r["ssim"]) for r in rows], [float(r["psnr"]) for r in rows]


def _skimage_per_frame(a: Path, b: Path) -> tuple[list[float], list[float]]:
    ssims, psnrs = [], []
    for x, y in zip(iter_frames(a), iter_frames(b), strict=True):
        ssims.append(_skimage_ssim(x, y))
        psnrs.append(float(peak_signal_noise_ratio(x, y, data_range=255)))
    return ssims, psnrs


@pytest.fixture(scope="module")
def realistic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The benchmark's material (panning texture, moving disc, perturbed copy) at 288x352:
    H.264 at the pull request's settings, several bands of rows per frame."""
    from harness.bench.run import synthetic_frames

    d = tmp_path_factory.mktemp("realistic")
    pair = []
    for tag, perturbed in (("a", False), ("b", True)):
        frames = np.stack(list(synthetic_frames(6, 288, 352, perturbed=perturbed)))
        pair.append(make_video(d / f"{tag}.mp4", frames))
    return pair[0], pair[1]


@pytest.mark.parametrize("device", ["cpu", "torch:cpu"])
def test_every_frame_equals_pyav_rgb24_and_scikit_image(
    realistic: tuple[Path, Path], device: str, tmp_path: Path
) -> None:
    """The issue's exactness rule, per frame: SSIM within 1e-6 and PSNR within 1e-4 dB of
    PyAV rgb24 + scikit-image (the torch path runs float32, the GPU's precision)."""
    a, b = realistic
    measure_pair(a, b, device=device, csv_path=tmp_path / "f.csv")
    ssim_got, psnr_got = _per_frame(tmp_path / "f.csv")
    ssim_want, psnr_want = _skimage_per_frame(a, b)
    assert len(ssim_got) == 6
    assert ssim_got == pytest.approx(ssim_want, abs=1e-6)
    assert psnr_got == pytest.approx(psnr_want, abs=1e-4)


def test_torch_float32_path_equals_float64(videos: dict[str, Path], tmp_path: Path) -> None:
    """The GPU path computes in float32 (consumer GPUs have slow float64): per frame within
    1e-5 SSIM and 1e-3 dB PSNR of the float64 computation (run here through torch on CPU)."""
    import torch

    from harness.collect.ssim import ssim_torch

    measure_pair(videos["a"], videos["b"], device="torch:cpu", csv_path=tmp_path / "f.csv")
    ssim_got, psnr_got = _per_frame(tmp_path / "f.csv")
    fa, fb = list(iter_frames(videos["a"])), list(iter_frames(videos["b"]))
    f64 = ssim_torch(torch.from_numpy(np.stack(fa)), torch.from_numpy(np.stack(fb))).tolist()
    psnr64 = [
        10 * np.log10(255**2 / np.mean((x.astype(np.float64) - y) ** 2)) for x, y in zip(fa, fb, strict=True)
    ]
    assert ssim_got == pytest.approx(f64, abs=1e-5)
    assert psnr_got == pytest.approx(psnr64, abs=1e-3)


def test_torch_path_on_cpu_equals_cpu_kernel(videos: dict[str, Path]) -> None:
    cpu = measure_pair(videos["a"], videos["b"], device="cpu")
    tor = measure_pair(videos["a"], videos["b"], device="torch:cpu")
    assert tor.device == "torch:cpu"
    assert tor.video.ssim_mean == pytest.approx(cpu.video.ssim_mean, abs=1e-6)
    assert tor.video.ssim_min_frame == cpu.video.ssim_min_frame
    exact = {"ssim_mean", "ssim_min"}
    assert tor.video.model_dump(exclude=exact) == cpu.video.model_dump(exclude=exact)
    assert tor.stats_a == cpu.stats_a and tor.stats_b == cpu.stats_b
    assert measure_run(videos["b"], device="torch:cpu") == measure_run(videos["b"])


def hold_a_side_thread_until_the_consumer_is_done(monkeypatch: pytest.MonkeyPatch, frames: int) -> None:
    """Every decoder's side thread holds one frame until its consumer, which has all ``frames``
    frames by then, asks for the end marker (or the decoders are told to stop). The frames after
    the held one fill the side queue: they are still to be hashed when the consumer is done.
    Not left to scheduling: the side thread is certain to be behind."""
    from harness.collect import stats, suite

    held = frames - suite.QUEUE_FRAMES  # the frames after it fit in the side queue
    assert held >= 1
    decoders: dict[int, suite.FrameDecoder] = {}
    hashed: dict[int, int] = {}
    init, get = suite.FrameDecoder.__init__, suite.FrameDecoder.get
    update_hash = stats.StatsReducer.update_hash

    def tracked_init(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        self.received, self.asked_for_end = 0, threading.Event()
        decoders[id(self.stats)] = self

    def counted_get(self):
        if self.received >= self.limit:
            self.asked_for_end.set()  # wait_end: the consumer has every frame and wants the end
        frame = get(self)
        self.received += frame is not None
        return frame

    def lagging(self: stats.StatsReducer, frame: np.ndarray) -> None:
        hashed[id(self)] = hashed.get(id(self), 0) + 1
        dec = decoders.get(id(self))
        if dec is not None and hashed[id(self)] == held:
            deadline = time.monotonic() + 60
            while not (dec.asked_for_end.wait(0.01) or dec.stop.is_set()):
                assert time.monotonic() < deadline, (
                    f"{dec.path.name}: the consumer did not get all {frames} frames while the side thread "
                    f"held frame {held}"
                )
        update_hash(self, frame)

    monkeypatch.setattr(suite.FrameDecoder, "__init__", tracked_init)
    monkeypatch.setattr(suite.FrameDecoder, "get", counted_get)
    monkeypatch.setattr(stats.StatsReducer, "update_hash", lagging)


@pytest.mark.concurrency
@pytest.mark.parametrize("device", ["cpu", "torch:cpu"])
def test_a_lagging_side_thread_still_hashes_and_measures_every_frame(
    videos: dict[str, Path], device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The side thread that hashes (and on CPU measures) each frame can run behind the consumer,
    which stops at the frame limit; the hash and the statistics must still cover every frame."""
    whole = hashlib.sha256()
    for frame in iter_frames(videos["a"]):
        whole.update(frame.tobytes())
    plain = measure_run(videos["a"])
    hold_a_side_thread_until_the_consumer_is_done(monkeypatch, plain.frames)
    res = measure_pair(videos["a"], videos["a_copy"], device=device)
    assert res.video.frames_hash_a == res.video.frames_hash_b == whole.hexdigest()
    assert res.stats_a.frames == res.stats_b.frames == 10
    assert res.stats_a.model_dump(exclude={"file"}) == plain.model_dump(exclude={"file"})
    if device != "cpu":
        assert measure_run(videos["a"], device=device).video_hash == whole.hexdigest()


@pytest.mark.concurrency
def test_frame_count_mismatch_names_both_and_truncation(videos: dict[str, Path]) -> None:
    with pytest.raises(HarnessError, match=r"a\.mp4 has 10.*short\.mp4 has 7"):
        measure_pair(videos["a"], videos["short"], device="cpu")
    res = measure_pair(videos["a"], videos["short"], truncate=True, device="cpu")
    assert res.video.frames == 7 and res.video.truncated_to == 7
    assert (res.video.frames_a, res.video.frames_b) == (10, 7)
    assert res.video.identical_frames == 7 and not res.video.frames_bitwise_equal
    assert res.stats_a.frames == 7  # statistics cover what was compared
    # truncation asked for but not needed: nothing recorded
    assert measure_pair(videos["a"], videos["b"], truncate=True, device="cpu").video.truncated_to is None


@pytest.mark.parametrize(
    ("other", "match"),
    [
        ("wide", r"resolution differs: .*a\.mp4 is 96x64, .*wide\.mp4 is 112x64"),
        ("fps30", r"frame rate differs: .*a\.mp4 is 24 fps, .*fps30\.mp4 is 30 fps"),
        ("mute", r"audio track in .*a\.mp4 but not in .*mute\.mp4"),
        ("rate16k", r"sample rate differs: .*a\.mp4 is 32000 Hz, .*rate16k\.mp4 is 16000 Hz"),
    ],
)
def test_incompatible_pairs(videos: dict[str, Path], other: str, match: str) -> None:
    with pytest.raises(HarnessError, match=match):
        measure_pair(videos["a"], videos[other], device="cpu")


def test_resampling_on_request(videos: dict[str, Path]) -> None:
    res = measure_pair(videos["a"], videos["rate16k"], resample_audio=True, device="cpu")
    au = res.audio
    assert au is not None and au.resampled and au.rate_b == 16000 and au.sample_rate == 32000
    assert "16000 Hz -> 32000 Hz" in (au.resample_note or "")
    assert au.samples_b == res.stats_b.audio_samples  # as decoded
    assert au.logmel_cosine > 0.5  # same signal, band-limited by the lower rate


def test_no_audio_in_either(videos: dict[str, Path]) -> None:
    res = measure_pair(videos["mute"], videos["mute2"], device="cpu")
    assert res.audio is None and res.stats_a.audio_rate is None and res.stats_a.audio_rms is None
    assert res.video.frames == 10 and math.isfinite(res.video.psnr_mean)


def test_single_frame(videos: dict[str, Path]) -> None:
    res = measure_pair(videos["one"], videos["one"], device="cpu")
    assert res.video.frames == 1 and res.video.ssim_mean == 1.0
    assert res.stats_a.motion is None and res.stats_a.frames == 1  # motion is undefined for one frame


@pytest.mark.concurrency
def test_bad_files(videos: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"missing\.mp4: file not found"):
        measure_pair(tmp_path / "missing.mp4", videos["a"])
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(HarnessError, match=r"empty\.mp4: file is empty"):
        measure_pair(videos["a"], empty)
    cut = tmp_path / "cut.mp4"
    data = videos["a"].read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(HarnessError, match=r"cut\.mp4"):
        measure_pair(videos["a"], cut)
    with pytest.raises(HarnessError, match=r"cut\.mp4"):
        measure_run(cut)


def test_resolve_device() -> None:
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("torch:cpu") == "torch:cpu"
    assert resolve_device("auto") in ("cpu", "cuda")
    with pytest.raises(HarnessError, match="unknown device"):
        resolve_device("tpu")


def test_gpu_path_when_present(videos: dict[str, Path], realistic: tuple[Path, Path], tmp_path: Path) -> None:
    """On a CUDA/ROCm GPU: float32 SSIM per frame within 1e-5 of float64 (the issue's rule;
    1e-6 of scikit-image in practice), PSNR and statistics exactly the CPU path's."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA/ROCm GPU here; the torch path is covered on CPU by torch:cpu")
    from harness.collect.ssim import ssim_torch

    for a, b in ((videos["a"], videos["b"]), realistic):
        cpu = measure_pair(a, b, device="cpu", csv_path=tmp_path / "cpu.csv")
        gpu = measure_pair(a, b, device="cuda", csv_path=tmp_path / "gpu.csv")
        assert gpu.device == "cuda"
        ssim_gpu, psnr_gpu = _per_frame(tmp_path / "gpu.csv")
        fa, fb = np.stack(list(iter_frames(a))), np.stack(list(iter_frames(b)))
        f64 = ssim_torch(torch.from_numpy(fa), torch.from_numpy(fb)).tolist()  # float64, on CPU
        assert ssim_gpu == pytest.approx(f64, abs=1e-5)
        assert ssim_gpu == pytest.approx(_skimage_per_frame(a, b)[0], abs=1e-6)
        assert psnr_gpu == _per_frame(tmp_path / "cpu.csv")[1]
        assert gpu.video.psnr_mean == cpu.video.psnr_mean
        assert gpu.stats_a == cpu.stats_a and gpu.stats_b == cpu.stats_b


@pytest.mark.slow  # two subprocesses on a 96-frame pair
def test_peak_memory_is_flat_in_video_length(tmp_path: Path) -> None:
    """Twice the frames, the same peak RSS: nothing holds the whole video. Buffering the
    decoded frames would add 48 x 2 x 0.7 MB = 67 MB at twice the length."""
    from harness.bench.run import ensure_pair, measure_side

    peaks = []
    for n in (48, 96):
        a, b, _ = ensure_pair(tmp_path, n, 360, 640)
        peaks.append(measure_side("suite", a, b).peak_mb)
    assert peaks[1] - peaks[0] < 25, peaks
