"""The accuracy metrics read off a comparison, in one table that gates, verdicts and reports share.

Each metric says how to read it from a ``Comparison``, how to print it and which gate key sets
its lower bound; higher is closer to the reference for all of them. They are registered by key in
``METRICS`` (the project's one registry mechanism); adding a metric is one entry here and its key
in ``gates.Gate``. Verdicts judge error energies (``verdict``); these are the
figures tables show and gates bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.compare.pairwise import Comparison
from harness.number_format import fmt_db, fmt_num
from harness.registry import Registry


@dataclass(frozen=True)
class AccuracyMetric:
    key: str  # name in verdicts and in results.json aggregates
    label: str
    unit: str  # "dB" or ""
    digits: int
    get: Callable[[Comparison], float | None]
    gate: str  # the Gate field that bounds it from below
    worst_frame: Callable[[Comparison], int | None] | None = None  # for per-frame minima
    worst_label: str = ""  # how a gate violation names a per-frame minimum

    def fmt(self, x: float | None) -> str:
        if self.unit == "dB":
            return fmt_db(x)
        return fmt_num(x, self.digits)

    def gate_label(self, cmp: Comparison) -> str:
        """The metric as a gate violation names it (a per-frame minimum with its frame index)."""
        if self.worst_frame is None:
            return self.label
        frame = self.worst_frame(cmp)
        return self.worst_label + (f" ({frame})" if frame is not None else "")


def _v(attr: str) -> Callable[[Comparison], float | None]:
    return lambda c: None if c.video is None else float(getattr(c.video, attr))


def _frame(attr: str) -> Callable[[Comparison], int | None]:
    return lambda c: None if c.video is None else getattr(c.video, attr)


def _a(attr: str) -> Callable[[Comparison], float | None]:
    return lambda c: None if c.audio is None else float(getattr(c.audio, attr))


METRICS: Registry[AccuracyMetric] = Registry("accuracy metric", base=AccuracyMetric)

# In table order: the columns of every accuracy table.
ACCURACY_METRICS: tuple[AccuracyMetric, ...] = (
    # PSNR of the mean per-frame MSE: one identical frame (PSNR +inf) neither lifts nor sinks it.
    AccuracyMetric("psnr", "video PSNR (pooled)", "dB", 2, _v("psnr_pooled"), "min_psnr"),
    AccuracyMetric(
        "psnr_min",
        "video PSNR min frame",
        "dB",
        2,
        _v("psnr_min"),
        "min_psnr_frame",
        _frame("psnr_min_frame"),
        "video PSNR of the worst frame",
    ),  # fmt: skip
    AccuracyMetric("ssim_mean", "SSIM mean", "", 6, _v("ssim_mean"), "min_ssim"),
    AccuracyMetric(
        "ssim_min",
        "SSIM min frame",
        "",
        6,
        _v("ssim_min"),
        "min_ssim_frame",
        _frame("ssim_min_frame"),
        "SSIM of the worst frame",
    ),  # fmt: skip
    AccuracyMetric("audio_snr", "audio SNR", "dB", 2, _a("snr_db"), "min_audio_snr"),
    AccuracyMetric("audio_cosine", "audio cosine", "", 6, _a("cosine"), "min_audio_cosine"),
    AccuracyMetric(
        "audio_logmel_cosine", "audio log-mel cosine", "", 6, _a("logmel_cosine"), "min_audio_logmel_cosine"
    ),
)
for _metric in ACCURACY_METRICS:
    METRICS.register(_metric.key, _metric)
METRICS.freeze()
