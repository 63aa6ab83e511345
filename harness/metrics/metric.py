"""What a metric is (``Metric``, with its views), the registry of them all (``METRICS``) and the
transforms between a figure and its error energy. A metric is read off a comparison by name (``field``
of its ``video`` or ``audio`` record), so this low module imports neither.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.number_format import NA, fmt_db, fmt_num
from harness.registry import Registry

PEAK = 255.0  # uint8 RGB: the peak of a video PSNR


def mse_from_psnr(db: float, peak: float = PEAK) -> float:
    return 0.0 if math.isinf(db) and db > 0 else peak * peak / 10.0 ** (db / 10.0)


def psnr_from_mse(mse: float, peak: float = PEAK) -> float:
    if math.isnan(mse):
        return math.nan
    if math.isinf(mse):
        return -math.inf
    return math.inf if mse == 0 else 10.0 * math.log10(peak * peak / mse)


def energy_from_db(db: float) -> float:
    """10^(-dB/10): +inf dB is 0, -inf dB (or below about -3,080 dB) infinite, NaN stays NaN."""
    if math.isnan(db):
        return math.nan
    if math.isinf(db):
        return 0.0 if db > 0 else math.inf
    try:
        return 10.0 ** (-db / 10.0)
    except OverflowError:
        return math.inf


def db_from_energy(e: float) -> float:
    if math.isnan(e):
        return math.nan
    return math.inf if e == 0 else -10.0 * math.log10(e)


def one_minus(x: float) -> float:
    """1 - x for a similarity; NaN stays NaN (max(0, 1 - nan) would read as perfect)."""
    if not math.isfinite(x):
        return math.nan
    return max(0.0, 1.0 - x)


def same(x: float) -> float:
    """An energy that is the figure itself (an MSE, a spectral error)."""
    return x


@dataclass(frozen=True)
class Energy:
    """A metric as the verdict weighs it: an error energy, pooled over pairs, read against the floor's."""

    key: str  # as results.json names it (a verdict reading's metric: video_mse, audio_error, ...)
    label: str
    of: Callable[[float], float]  # the metric's value -> its error energy; NaN stays NaN
    value: Callable[[float], float]  # energy -> the metric's value (``of``'s inverse, unclamped)
    judged: bool = True  # the verdict judges it (a scenario may state its floor_log_sd); else shown only


@dataclass(frozen=True)
class HistoryColumn:
    """A metric as ``harness history`` keeps it: a column of history.csv."""

    column: str
    label: str
    digits: int
    tested: bool = True  # each campaign is tested against the ones before it, and drawn
    latest: bool = True  # in the page's table of each arm's latest campaign


@dataclass(frozen=True)
class Headline:
    """A metric in `harness compare`'s accuracy line ('SSIM 0.99000 mean, 0.98000 min (frame 5)')."""

    text: str
    opens: bool = False
    fmt: Callable[[float], str] | None = None  # else the metric's own
    note: Callable[[Any], str] | None = None  # record -> what follows the value


@dataclass(frozen=True)
class PrColumn:
    """A column of pr.md's accuracy table, shared with ``beside`` as ``joint`` places them."""

    head: str
    beside: str  # the other metric's key
    joint: str = "{} ({})"


@dataclass(frozen=True)
class Metric:
    """One figure of a run against the reference, as every table, gate, history and verdict reads it;
    with a ``gate`` key an accuracy metric (tabled, aggregated, bounded by ``harness compare --gate``)."""

    key: str  # registry name; in results.json aggregates and floor bands
    label: str
    modality: str  # "video" | "audio": the comparison's record it is read from (and its weight)
    field: str  # that record's attribute
    order: int  # its place in every table (ascending)
    higher_is_closer: bool = True
    unit: str = ""  # "dB" or ""
    digits: int = 6
    column: str = ""  # its head in the per-run table and in `harness compare`'s; "": in neither
    row: str = ""  # its row label in `harness compare`'s table ("": the label)
    gate: str = ""  # its gate key ("": not gated, no accuracy metric)
    gate_doc: str = ""  # the gate key's description (the gate file's JSON Schema)
    gate_range: tuple[float | None, float | None] = (None, None)  # the values a bound may take (ge, le)
    worst_frame: str = ""  # a per-frame extreme: the record's field holding its frame index
    worst_label: str = ""  # how a gate violation names that frame
    note: Callable[[Any], str] | None = None  # record -> what the per-run cell adds after the value
    formatter: Callable[[float | None], str] | None = None  # else dB or ``digits`` decimals
    energy: Energy | None = None
    history: HistoryColumn | None = None
    headline: Headline | None = None
    pr: PrColumn | None = None

    def record(self, cmp: Any) -> Any:
        """The comparison's video or audio record (None: not measured)."""
        return getattr(cmp, self.modality, None)

    def read(self, record: Any) -> float | None:
        value = None if record is None else getattr(record, self.field, None)
        return None if value is None else float(value)

    def get(self, cmp: Any) -> float | None:
        return self.read(self.record(cmp))

    def fmt(self, x: float | None) -> str:
        if self.formatter is not None:
            return self.formatter(x)
        return fmt_db(x) if self.unit == "dB" else fmt_num(x, self.digits)

    def cell(self, record: Any) -> str:
        """The value as a table prints it, a per-frame extreme with its frame: '29.40 dB (frame 5)'."""
        text = self.fmt(self.read(record))
        if record is not None and self.worst_frame:
            text += f" (frame {getattr(record, self.worst_frame, None)})"
        return text

    def gate_label(self, cmp: Any) -> str:
        """The metric as a gate violation names it (a per-frame extreme with its frame index)."""
        if not self.worst_frame:
            return self.label
        frame = getattr(self.record(cmp), self.worst_frame, None)  # None: not measured
        return self.worst_label + (f" ({frame})" if frame is not None else "")

    def breaks(self, value: float, bound: float) -> bool:
        """Whether ``value`` is on the wrong side of a gate's bound (NaN always is)."""
        if math.isnan(value):
            return True
        return value < bound if self.higher_is_closer else value > bound

    @property
    def beyond(self) -> str:
        """How a violation reads: '<' under a lower bound, '>' over an upper one."""
        return "<" if self.higher_is_closer else ">"

    @property
    def equal(self) -> float | None:
        """Its value for output equal to the reference's (0, +inf dB or the top of its range; None: unknown)."""
        if not self.higher_is_closer:
            return 0.0
        top = math.inf if self.unit == "dB" else self.gate_range[1]
        return None if top is None else float(top)

    def energy_value(self, cmp: Any) -> float | None:
        """The comparison's error energy of this metric (None: none, or not measured)."""
        value = self.get(cmp)
        return None if value is None or self.energy is None else self.energy.of(value)

    def weight(self, cmp: Any) -> int:
        """Its weight when energies are pooled: the frames compared for video, 1 for audio."""
        record = self.record(cmp)
        return record.frames if self.modality == "video" and record is not None else 1


METRICS: Registry[Metric] = Registry("metric", base=Metric)


def in_order() -> list[Metric]:
    return sorted((METRICS.get(n) for n in METRICS.names()), key=lambda m: (m.order, m.key))


def accuracy_metrics() -> list[Metric]:
    """The gated ones: the accuracy tables' columns, the arms' aggregates, the gate's bounds."""
    return [m for m in in_order() if m.gate]


def table_metrics(modality: str | None = None) -> list[Metric]:
    """The columns of the per-run table and the rows of `harness compare`'s (of one modality)."""
    return [m for m in in_order() if m.column and modality in (None, m.modality)]


def energy_metrics() -> dict[str, Metric]:
    return {m.energy.key: m for m in in_order() if m.energy is not None}


def judged_energies() -> tuple[str, ...]:
    """The keys of the energies the verdict judges (the others are shown only)."""
    return tuple(k for k, m in energy_metrics().items() if m.energy is not None and m.energy.judged)


def history_metrics() -> list[Metric]:
    return [m for m in in_order() if m.history is not None]


def headline_metrics(modality: str) -> list[Metric]:
    """The metrics of one modality in the accuracy line of `harness compare`, in its order."""
    return [m for m in in_order() if m.headline is not None and m.modality == modality]


def pr_metrics() -> list[Metric]:
    return [m for m in in_order() if m.pr is not None]


def fmt_g4(x: float | None) -> str:
    return NA if x is None else f"{x:.4g}"


# The families: audio (SNR, whose error energy 10^(-SNR/10) the verdict weighs where the floor's waveform is
# coherent, the samples' cosine, the mel spectral error weighed where it is not, the log-mel cosine shown),
# then video on decoded RGB (the MSE the verdict weighs; PSNR pooled from the mean per-frame MSE, so one
# identical frame neither lifts nor sinks it, the frames' mean and the worst; SSIM mean and worst).
def _residual_lag(a: Any, unit: str = "") -> str:
    return f" (residual lag {a.residual_lag_samples:+d}{unit})" if a.residual_lag_samples else ""


for _metric in (
    Metric("audio_snr", "audio SNR", "audio", "snr_db", 50, unit="dB", digits=2, column="audio SNR",
           row="audio SNR (at the containers' alignment)", gate="min_audio_snr",
           gate_doc="Audio SNR of B against A, in dB.", note=_residual_lag,
           energy=Energy("audio_error", "audio error energy", energy_from_db, db_from_energy),
           history=HistoryColumn("audio_snr", "audio SNR (dB)", 2),
           headline=Headline("audio SNR {}", opens=True, note=lambda a: _residual_lag(a, " samples")),
           pr=PrColumn("audio SNR / cos", "audio_cosine", "{} / {}")),
    Metric("audio_cosine", "audio cosine", "audio", "cosine", 60, digits=6, column="audio cosine",
           gate="min_audio_cosine", gate_doc="Cosine of the audio samples.", gate_range=(-1, 1),
           history=HistoryColumn("audio_cosine", "audio cosine", 6, latest=False),
           headline=Headline("cosine {}")),
    Metric("audio_spectral", "audio mel spectral error", "audio", "spectral_error", 70,
           higher_is_closer=False, column="mel spectral error", formatter=fmt_g4,
           energy=Energy("audio_spectral", "audio mel spectral error", same, same),
           headline=Headline("spectral error {}")),
    Metric("audio_logmel_cosine", "audio log-mel cosine", "audio", "logmel_cosine", 80, digits=6,
           column="log-mel cosine", gate="min_audio_logmel_cosine",
           gate_doc="Cosine of the audio log-mel spectra.", gate_range=(-1, 1),
           energy=Energy("audio_logmel", "audio 1 - log-mel cosine", one_minus, lambda x: 1.0 - x,
                         judged=False)),
    Metric("video_mse", "video MSE", "video", "mse_mean", 5, higher_is_closer=False,  # weighed, not shown
           energy=Energy("video_mse", "video MSE", same, same)),
    Metric("psnr", "video PSNR (pooled)", "video", "psnr_pooled", 10, unit="dB", digits=2,
           column="PSNR (pooled)", gate="min_psnr",
           gate_doc="Video PSNR of B against A, pooled (from the mean MSE over frames), in dB.",
           history=HistoryColumn("psnr_pooled", "video PSNR pooled (dB)", 2),
           headline=Headline("video PSNR {} pooled", opens=True),
           pr=PrColumn("video PSNR pooled (min frame)", "psnr_min")),
    Metric("psnr_mean", "video PSNR mean of frames", "video", "psnr_mean", 15, unit="dB", digits=2,
           history=HistoryColumn("psnr_mean", "video PSNR mean of frames (dB)", 2, tested=False,
                                 latest=False)),
    Metric("psnr_min", "video PSNR min frame", "video", "psnr_min", 20, unit="dB", digits=2,
           column="PSNR min (frame)", row="video PSNR min (frame)", gate="min_psnr_frame",
           gate_doc="Video PSNR of the worst frame, in dB.", worst_frame="psnr_min_frame",
           worst_label="video PSNR of the worst frame", headline=Headline("{} min")),
    Metric("ssim_mean", "SSIM mean", "video", "ssim_mean", 30, digits=6, column="SSIM mean", gate="min_ssim",
           gate_doc="SSIM, mean over frames.", gate_range=(None, 1),
           energy=Energy("video_1_ssim", "video 1 - SSIM", one_minus, lambda x: 1.0 - x),
           history=HistoryColumn("ssim_mean", "SSIM mean", 5),
           headline=Headline("SSIM {} mean", opens=True, fmt="{:.5f}".format), pr=PrColumn("SSIM (min frame)", "ssim_min")),
    Metric("ssim_min", "SSIM min frame", "video", "ssim_min", 40, digits=6, column="SSIM min (frame)",
           row="SSIM min (frame)", gate="min_ssim_frame", gate_doc="SSIM of the worst frame.",
           gate_range=(None, 1),
           worst_frame="ssim_min_frame", worst_label="SSIM of the worst frame",
           headline=Headline("{} min", fmt="{:.5f}".format)),
):  # fmt: skip
    METRICS.register(_metric.key, _metric)
