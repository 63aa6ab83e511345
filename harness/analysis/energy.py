"""Error energies: a run against the reference reduced to the numbers a verdict weighs (no media), the
metric registry's energies (``KINDS``). A value that is not finite stays so: the verdict fails it."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from harness.compare.pairwise import Comparison
from harness.metrics.metric import Energy, Metric, energy_metrics, in_order, mse_from_psnr, psnr_from_mse
from harness.records import Record
from harness.run_keys import Sample

# The metrics (harness.metrics keys) an identical pair has at exactly 0 (video MSE) and +inf dB (audio
# SNR), and the audio similarity the verdict reads (the cosine, else from the SNR).
VIDEO_MSE, AUDIO_SNR, AUDIO_COSINE = "video_mse", "audio_snr", "audio_cosine"


class PairErrors(Record):
    """One run against the reference, reduced to what a verdict needs (no media)."""

    key: str = ""
    seed: Sample | None = None
    arm: str = ""  # the run's arm ("": unknown, each run its own)
    digest: str | None = None  # sha256 of the run's output (runs of equal digest are one sample)
    frames: int = 1  # weight of the video energies when pooling
    values: dict[str, float] = Field(default_factory=dict)  # metric key (harness.metrics) -> its value
    identical_frames: int = 0
    audio_residual_lag: int | None = None  # samples left after the container's alignment (0: none)
    audio_rate: int | None = None
    latent_psnr: dict[int, float] = Field(default_factory=dict)  # step -> PSNR against the reference
    # Coarse layout (collect.layout): scale S (4, 8, 16) -> mean over frames of the SxS luma grids'
    # squared distance, Y units squared; empty when not measured.
    layout_mse: dict[int, float] = Field(default_factory=dict)  # B against the reference
    layout_mirror_lr_mse: dict[int, float] = Field(default_factory=dict)  # against it mirrored L-R
    layout_mirror_ud_mse: dict[int, float] = Field(default_factory=dict)  # against it mirrored up-down
    layout_var_a: dict[int, float] = Field(default_factory=dict)  # variance of the reference's grid cells
    layout_var_b: dict[int, float] = Field(default_factory=dict)  # variance of B's grid cells
    identical: bool | None = None  # bitwise equal output (file, or every frame and sample); None: unknown

    def value(self, metric: str) -> float | None:
        """The value of a registered metric (by its key); None: not measured."""
        return self.values.get(metric)

    @classmethod
    def from_psnr(cls, db: float, values: Mapping[str, float] | None = None, **kw) -> PairErrors:
        """From a pooled PSNR in dB (e.g. a table in a pull request), with other metrics' ``values``."""
        return cls(values={VIDEO_MSE: mse_from_psnr(db), **(values or {})}, **kw)

    @classmethod
    def measured(cls, key: str, seed: Sample | None, video: Any, audio: Any, **kw) -> PairErrors:
        """A measured pair: every registered metric read off its video and audio records (None: none)."""
        records = {"video": video, "audio": audio}
        values = {m.key: m.read(records[m.modality]) for m in in_order()}
        e = cls(key=key, seed=seed, values={k: x for k, x in values.items() if x is not None}, **kw)
        if video is not None:
            e.frames, e.identical_frames = video.frames, video.identical_frames
            e.layout_mse, e.layout_mirror_lr_mse = dict(video.layout_mse), dict(video.layout_mirror_lr_mse)
            e.layout_mirror_ud_mse = dict(video.layout_mirror_ud_mse)
            e.layout_var_a, e.layout_var_b = dict(video.layout_var_a), dict(video.layout_var_b)
        if audio is not None:
            e.audio_residual_lag, e.audio_rate = audio.residual_lag_samples, audio.sample_rate
        return e

    @classmethod
    def from_comparison(cls, c: Comparison) -> PairErrors:
        e = cls.measured(c.b.key, c.b.seed, c.video, c.audio, identical=c.bitwise.identical)
        e.arm, e.digest = c.b.arm, c.b.output_sha256
        e.latent_psnr = {p.step: p.psnr for p in c.latents}
        return e


def is_identical(e: PairErrors) -> bool:
    """Output equal to the reference's: as measured bitwise, else video MSE 0 and no audio or SNR inf."""
    if e.identical is not None:
        return e.identical
    return e.value(VIDEO_MSE) == 0.0 and e.value(AUDIO_SNR) in (None, math.inf)


@dataclass(frozen=True)
class Kind:
    """One kind of error energy, read off a pair: a registered metric and its ``Energy``."""

    metric: Metric

    @property
    def energy(self) -> Energy:
        assert self.metric.energy is not None  # KINDS holds the metrics that have one
        return self.metric.energy

    def get(self, e: PairErrors) -> float | None:
        value = e.value(self.metric.key)
        return None if value is None else self.energy.of(value)

    def weight(self, e: PairErrors) -> float:
        return e.frames if self.metric.modality == "video" else 1


class _Kinds(Mapping[str, Kind]):
    """Every registered error energy by its key, read from the metric registry at each use."""

    def __getitem__(self, key: str) -> Kind:
        return Kind(energy_metrics()[key])

    def __iter__(self) -> Iterator[str]:
        return iter(energy_metrics())

    def __len__(self) -> int:
        return len(energy_metrics())


KINDS: Mapping[str, Kind] = _Kinds()


def pooled_psnr(pairs: Sequence[PairErrors]) -> float | None:
    """The PSNR of the pairs' video MSE pooled (weighted by frames; NaN or inf when one is), None: none has one."""
    kind = KINDS[VIDEO_MSE]
    vals = [(x, kind.weight(p)) for p in pairs if (x := kind.get(p)) is not None]
    if not vals:
        return None
    return psnr_from_mse(sum(x * w for x, w in vals) / (sum(w for _, w in vals) or 1))
