"""Results the collectors write to disk (metrics/<pair>.json, metrics/<run>.stats.json) and the codec
settings of a codec floor; each carries its ``convention`` so numbers of different definitions are
never compared silently.
"""

from __future__ import annotations

from pydantic import Field

from harness.collect.layout import LAYOUT_CONVENTION, FrameTrack
from harness.records import Record

PSNR_CONVENTION = (
    "psnr=rgb-uint8-L255; pooled=10log10(255^2/mean of per-frame MSE) (reported), per-frame mean kept for "
    "reference only; min=worst frame with its index; identical frames (MSE 0) counted"
)
SSIM_CONVENTION = (
    "ssim=wang2004-g11s1.5-K.01/.03-pop-L255-valid, mean of the R, G, B channel SSIMs (= skimage "
    "structural_similarity(gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=255, "
    "channel_axis=-1))"
)
VIDEO_CONVENTION = f"{PSNR_CONVENTION}; {SSIM_CONVENTION}; {LAYOUT_CONVENTION}"
AUDIO_CONVENTION = (
    "audio=float32-native-rate; aligned by the container's timestamps (audio_align), metrics on the overlap; "
    "residual lag |l|<=2048 by |cross-correlation|, reported; "
    "snr=10log10(sum a^2/sum (a-b)^2) A=reference, over all channels; "
    "cosine=all samples (signed); rms/peak=whole track; "
    "spectral_error=sum(|M_a|-|M_b|)^2/sum|M_a|^2, M=sqrt(hann1024-hop256-64mel(htk,0..nyquist) power); "
    "logmel=same mel power in dB, floor(max-80dB), shifted, cosine"
)
STATS_CONVENTION = (
    "Y=bt601 round(0.299R+0.587G+0.114B) uint8 (cv2 RGB2GRAY); luma=population mean/std over all pixels; "
    "sharpness=var(Laplacian ksize=1 scale=1 of Y 0..255) over interior pixels, mean over frames; "
    "motion=mean|F(t)-F(t-1)| over RGB 0..255, mean over t>=1 (none for one frame); black=mean Y<10; "
    "frozen=F(t)==F(t-1); nan_like=std Y<1 or >=95% of RGB values are 0 or 255; "
    "blank=max Y<=16; flat=std Y<1; *_first=first 8 such frame indices (0-based)"
)


class VideoPairMetrics(Record):
    schema_version: str = Field("harness.video_pair/1", alias="schema")
    convention: str = VIDEO_CONVENTION
    file_a: str
    file_b: str
    frames: int  # frames compared
    width: int
    height: int
    fps: float
    psnr_mean: float  # mean of per-frame PSNR; +inf as soon as one frame is identical
    psnr_mean_finite: float | None = None  # mean over the non-identical frames; None if all identical
    psnr_min: float
    psnr_min_frame: int
    ssim_mean: float
    ssim_min: float
    ssim_min_frame: int
    mse_mean: float  # mean of per-frame MSE
    psnr_pooled: float  # PSNR of mse_mean (ffmpeg's summary convention), for cross-checks
    identical_frames: int
    frames_bitwise_equal: bool  # every decoded frame identical
    frames_hash_a: str  # sha256 over the decoded RGB frames
    frames_hash_b: str
    files_bitwise_equal: bool
    truncated_to: int | None = None  # set only when truncation was asked for and happened
    frames_a: int
    frames_b: int
    per_frame_csv: str | None = None  # name relative to the metrics JSON
    pixel_formats: str | None = None  # set when A and B are stored in different pixel formats
    # Coarse layout (collect.layout), scale S (4, 8, 16) -> mean over frames, Y units squared; empty:
    # not measured (an older record) or the frames are smaller than every scale.
    layout_mse: dict[int, float] = Field(default_factory=dict)  # mean (b - a)^2 of the SxS luma grids
    layout_mirror_lr_mse: dict[int, float] = Field(default_factory=dict)  # against A mirrored left-right
    layout_mirror_ud_mse: dict[int, float] = Field(default_factory=dict)  # against A mirrored up-down
    layout_var_a: dict[int, float] = Field(default_factory=dict)  # variance of A's grid cells (its layout)
    layout_var_b: dict[int, float] = Field(default_factory=dict)


class AudioPairMetrics(Record):
    schema_version: str = Field("harness.audio_pair/1", alias="schema")
    convention: str = AUDIO_CONVENTION
    sample_rate: int
    rate_a: int
    rate_b: int
    resampled: bool = False
    resample_note: str | None = None
    channels: int
    samples_a: int
    samples_b: int
    samples_compared: int
    samples_dropped: int  # samples cut from the longer track (per channel)
    lag_samples: int = 0  # the alignment the metrics are taken at: the container's (audio_align)
    residual_lag_samples: int = 0  # B's lag left after that alignment (a finding; 0: none found)
    residual_corr: float | None = None  # normalised correlation at the residual lag (signed)
    aligned_corr: float | None = None  # the same at the container's alignment, on the search window
    snr_db: float  # +inf when equal; -inf when the reference is silent (audio._snr)
    snr_db_per_channel: list[float] = Field(default_factory=list)
    cosine: float
    logmel_cosine: float
    spectral_error: float | None = None  # mel spectral error energy (collect.audio); None: older record
    rms_a: float
    rms_b: float
    peak_a: float
    peak_b: float
    bitwise_equal: bool  # decoded tracks identical: same length and samples


class RunStats(Record):
    schema_version: str = Field("harness.run_stats/1", alias="schema")
    convention: str = STATS_CONVENTION
    file: str
    frames: int
    width: int
    height: int
    fps: float
    luma_mean: float
    luma_std: float
    sharpness: float  # mean over frames of the variance of the Laplacian of Y
    motion: float | None  # mean over t>=1 of mean |F(t)-F(t-1)|; None (undefined) for one frame
    black_frames: int
    frozen_frames: int
    nan_like_frames: int  # flat or saturated frames: what broken quantized kernels produce
    blank_frames: int = 0  # max Y <= 16: nothing but black (0 in records older than the field)
    flat_frames: int = 0  # std Y < 1: one colour, what NaN outputs decode to
    # The first indices (0-based, at most 8) of each kind of frame counted above.
    black_first: list[int] = Field(default_factory=list)
    frozen_first: list[int] = Field(default_factory=list)
    nan_like_first: list[int] = Field(default_factory=list)
    blank_first: list[int] = Field(default_factory=list)
    flat_first: list[int] = Field(default_factory=list)
    audio_rate: int | None = None
    audio_channels: int | None = None
    audio_samples: int | None = None
    audio_rms: float | None = None
    audio_peak: float | None = None
    video_hash: str  # sha256 over the decoded RGB frames
    track: FrameTrack | None = None  # per-frame coarse Y, Cb, Cr (collect.layout); None: an older record


class PairResult(Record):
    schema_version: str = Field("harness.pair/1", alias="schema")
    video: VideoPairMetrics
    audio: AudioPairMetrics | None = None
    stats_a: RunStats
    stats_b: RunStats
    seconds: float
    device: str = "cpu"


DEFAULT_CRF = 18  # MiniMax-H3's writer (ultrafast, CRF 18), the builtin pipeline's default too
DEFAULT_PRESET = "ultrafast"


class CodecSettings(Record):
    codec: str = "h264"
    pix_fmt: str = "yuv420p"
    crf: int = DEFAULT_CRF
    preset: str = DEFAULT_PRESET
    source: str = "assumed"  # run spec | x264 info in the file | assumed
    encoder_info: str | None = None  # the x264 options the file carries (when found)

    def text(self) -> str:
        return f"{self.codec} {self.pix_fmt} CRF {self.crf} preset {self.preset} (settings: {self.source})"
