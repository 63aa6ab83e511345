"""Audio metrics, on the decoded tracks at the container's alignment: SNR (its error energy
10^(-SNR/10) the verdict weighs where the floor's waveform is coherent), the samples' cosine, the
mel spectral error (weighed where it is not: ``collect.audio``) and the log-mel cosine (shown)."""

from __future__ import annotations

from typing import Any

from harness.metrics.metric import (
    METRICS,
    Energy,
    Headline,
    HistoryColumn,
    Metric,
    PrColumn,
    db_from_energy,
    energy_from_db,
    fmt_g4,
    one_minus,
    same,
)


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
):  # fmt: skip
    METRICS.register(_metric.key, _metric)
