"""Error energies: a run against the reference reduced to energies, pooled and set against the floor's.

The kinds of energy a verdict weighs: video MSE on decoded RGB (pooled over frames, so one
identical frame neither lifts nor sinks it) and 1 - SSIM; the audio waveform error energy
(10^(-SNR/10), after the lag search) or 1 - log-mel cosine; the MSE of the earliest latent step.
``energy_check`` divides a candidate's pooled energy by the noise floor's (every perturbation x
seed) and says in words whether it is within the tolerance.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from pydantic import Field

from harness.compare.pairwise import Comparison
from harness.number_format import fmt_db, fmt_num, ratio_text
from harness.records import Record

PEAK = 255.0


class PairErrors(Record):
    """One run against the reference, reduced to what a verdict needs (no media)."""

    key: str = ""
    seed: int | None = None
    frames: int = 1  # weight of the video energies when pooling over seeds
    video_mse: float | None = None  # mean of per-frame MSE (uint8 RGB)
    ssim_mean: float | None = None
    psnr_min: float | None = None
    psnr_min_frame: int | None = None
    identical_frames: int = 0
    audio_snr_db: float | None = None  # after the lag search
    audio_logmel_cosine: float | None = None
    latent_step: int | None = None  # earliest step with a latent in both runs
    latent_psnr: float | None = None  # against the reference's range (compare.latents)

    @classmethod
    def from_psnr(cls, psnr_db: float, **kw) -> PairErrors:
        """From a pooled PSNR in dB (e.g. a table in a pull request)."""
        return cls(video_mse=mse_from_psnr(psnr_db), **kw)

    @classmethod
    def from_comparison(cls, c: Comparison) -> PairErrors:
        e = cls(key=c.b.key, seed=c.b.seed)
        if c.video is not None:
            v = c.video
            e.frames, e.video_mse, e.ssim_mean = v.frames, v.mse_mean, v.ssim_mean
            e.psnr_min, e.psnr_min_frame, e.identical_frames = (
                v.psnr_min,
                v.psnr_min_frame,
                v.identical_frames,
            )
        if c.audio is not None:
            e.audio_snr_db, e.audio_logmel_cosine = c.audio.snr_db, c.audio.logmel_cosine
        if c.latents:
            first = min(c.latents, key=lambda p: p.step)
            e.latent_step, e.latent_psnr = first.step, first.psnr
        return e


def mse_from_psnr(psnr_db: float, peak: float = PEAK) -> float:
    return 0.0 if math.isinf(psnr_db) and psnr_db > 0 else peak * peak / 10.0 ** (psnr_db / 10.0)


def psnr_from_mse(mse: float, peak: float = PEAK) -> float:
    return math.inf if mse == 0 else 10.0 * math.log10(peak * peak / mse)


def energy_from_db(db: float) -> float:
    return 0.0 if math.isinf(db) and db > 0 else 10.0 ** (-db / 10.0)


def db_from_energy(e: float) -> float:
    return math.inf if e == 0 else -10.0 * math.log10(e)


# metric -> (label, energy of a pair, weight of a pair, energy -> display value, display format)
_KINDS: dict[str, tuple[str, Callable, Callable, Callable, Callable]] = {
    "video_mse": (
        "video MSE",
        lambda e: e.video_mse,
        lambda e: e.frames,
        psnr_from_mse,
        fmt_db,
    ),
    "video_1_ssim": (
        "video 1 - SSIM",
        lambda e: None if e.ssim_mean is None else max(0.0, 1.0 - e.ssim_mean),
        lambda e: e.frames,
        lambda x: 1.0 - x,
        lambda x: f"SSIM {fmt_num(x, 5)}",
    ),
    "audio_error": (
        "audio error energy",
        lambda e: None if e.audio_snr_db is None else energy_from_db(e.audio_snr_db),
        lambda e: 1,
        db_from_energy,
        lambda x: f"SNR {fmt_db(x)}",
    ),
    "audio_logmel": (
        "audio 1 - log-mel cosine",
        lambda e: None if e.audio_logmel_cosine is None else max(0.0, 1.0 - e.audio_logmel_cosine),
        lambda e: 1,
        lambda x: 1.0 - x,
        lambda x: f"log-mel cosine {fmt_num(x, 6)}",
    ),
    "latent": (
        "earliest-step latent MSE",
        lambda e: None if e.latent_psnr is None else energy_from_db(e.latent_psnr),
        lambda e: 1,
        db_from_energy,
        fmt_db,
    ),
}


def pooled(pairs: Sequence[PairErrors], metric: str) -> tuple[float | None, int]:
    """(pooled energy, pairs used): the weighted mean (frames for video, 1 otherwise)."""
    _, get, weight, _, _ = _KINDS[metric]
    vals = [(get(p), weight(p)) for p in pairs]
    vals = [(x, w) for x, w in vals if x is not None and math.isfinite(x)]
    if not vals:
        return None, 0
    total = sum(w for _, w in vals)
    return sum(x * w for x, w in vals) / total, len(vals)


class EnergyCheck(Record):
    metric: str
    label: str
    judged: bool = True  # False: shown for information (uninformative here, or not the audio metric used)
    why_not_judged: str = ""
    candidate: float | None = None  # pooled error energy of the candidate
    floor: float | None = None  # pooled error energy of the floor (perturbations x seeds)
    ratio: float | None = None  # candidate / floor
    tolerance: float = 2.0
    within: bool | None = None
    n_candidate: int = 0
    n_floor: int = 0
    floor_band: list[float] = Field(default_factory=list)  # display values: min, median, max
    per_seed: dict[str, float] = Field(default_factory=dict)  # seed -> ratio against the pooled floor
    text: str = ""


def _band(floors: Sequence[PairErrors], metric: str) -> list[float]:
    _, get, _, show, _ = _KINDS[metric]
    vals = sorted(show(x) for x in (get(p) for p in floors) if x is not None and math.isfinite(x))
    if not vals:
        return []
    return [vals[0], statistics.median(vals), vals[-1]]


def energy_check(
    metric: str,
    cands: Sequence[PairErrors],
    floors: Sequence[PairErrors],
    tolerance: float,
    *,
    judged: bool = True,
    why_not_judged: str = "",
) -> EnergyCheck | None:
    """The candidate's pooled energy over the floor's; None when the candidate has none of it."""
    label, get, _, show, fmt = _KINDS[metric]
    cand, n_c = pooled(cands, metric)
    if cand is None:
        return None
    floor, n_f = pooled(floors, metric)
    chk = EnergyCheck(
        metric=metric,
        label=label,
        judged=judged,
        why_not_judged=why_not_judged,
        candidate=cand,
        floor=floor,
        tolerance=tolerance,
        n_candidate=n_c,
        n_floor=n_f,
        floor_band=_band(floors, metric),
    )
    shown_c = fmt(show(cand))
    if floor is None:
        chk.judged = False
        chk.text = f"{label}: candidate {shown_c}; no noise floor measured"
        return chk
    if floor == 0.0:
        chk.ratio = 1.0 if cand == 0.0 else math.inf
    else:
        chk.ratio = cand / floor
        for p in cands:
            x = get(p)
            if x is not None and p.seed is not None:
                chk.per_seed[str(p.seed)] = x / floor
    chk.within = chk.ratio <= tolerance
    band = chk.floor_band
    band_txt = (
        f"{fmt(band[0])} / {fmt(band[1])} / {fmt(band[2])} (min / median / max of {n_f})"
        if len(band) == 3 and n_f > 1
        else fmt(show(floor))
    )
    head = f"{label} {ratio_text(chk.ratio)} the floor's: candidate {shown_c} pooled over {n_c} run(s), floor {fmt(show(floor))} pooled, band {band_txt}"
    if floor == 0.0 and cand > 0.0:
        head += " (every floor run is identical to the reference; the candidate is not)"
    if len(chk.per_seed) > 1:
        head += "; per seed " + ", ".join(f"{s}: {ratio_text(r)}" for s, r in chk.per_seed.items())
    if chk.judged:
        word = "within" if chk.within else "outside the floor"
        chk.text = f"{head}; tolerance {tolerance:g}x: {word}"
    else:
        chk.text = f"{head}; not judged ({why_not_judged})"
    return chk
