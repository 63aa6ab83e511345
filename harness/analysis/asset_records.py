"""What the page's per-run assets hold (assets/series, assets/audio): records written by the analysis
beside results.json and read by the renderers (through ``analysis.model``)."""

from __future__ import annotations

from pydantic import Field

from harness.records import Record

SERIES_SCHEMA = "harness.frame_series/1"
AUDIO_VIEW_SCHEMA = "harness.audio_view/1"
SPECTROGRAM_DIFF_SCHEMA = "harness.spectrogram_diff/1"


class FrameSeries(Record):
    """assets/series/<run>.json: one run's per-frame PSNR and SSIM against the reference."""

    schema_version: str = Field(SERIES_SCHEMA, alias="schema")
    key: str
    reference: str
    frame: list[int] = Field(default_factory=list)
    psnr: list[float] = Field(default_factory=list)  # +inf: an identical frame
    ssim: list[float] = Field(default_factory=list)


class Envelope(Record):
    """Min and max of a signal per bin of samples: a long track drawn quickly, its peaks kept."""

    t: list[float] = Field(default_factory=list)  # seconds at the start of each bin
    lo: list[float] = Field(default_factory=list)
    hi: list[float] = Field(default_factory=list)


class AudioView(Record):
    """assets/audio/<run>.json: what the audio figure draws of one run's track (mono mix)."""

    schema_version: str = Field(AUDIO_VIEW_SCHEMA, alias="schema")
    key: str
    rate: int
    seconds: float
    signal: Envelope
    minus_reference: Envelope | None = None  # the difference to the reference's track (same rate)
    spectrogram: str | None = None  # 8-bit PNG (relative to the results' folder); row 0: highest bin
    spectrogram_hz: list[float] = Field(default_factory=list)  # lowest, highest bin
    spectrogram_db: list[float] = Field(default_factory=list)  # dB of grey 0 and of grey 255


class SpectrogramDiff(Record):
    """assets/audio/<run>.specdiff.json: a run's spectrogram minus the reference's, in dB."""

    schema_version: str = Field(SPECTROGRAM_DIFF_SCHEMA, alias="schema")
    key: str
    reference: str
    rate: int
    seconds: float
    lag_samples: int = 0
    png: str  # 8-bit PNG: grey 0 = -db_range, 255 = +db_range; row 0 = top = highest bin
    hz: list[float] = Field(default_factory=list)  # lowest, highest bin
    db_range: float
    floor_db: float | None = None  # cells under this (both tracks) count as this
    max_abs_db: float = 0.0
    mean_abs_db: float = 0.0
