"""The numbers a verdict is judged with, as a scenario writes them (the ``verdict:`` block).

Every verdict and every speed line prints the rule it used, so a reader never has to guess
the tolerance behind a "within" or the level behind a "slower".
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_ALPHA = 0.05  # significance level of the speed tests (compare.significance imports it)
DEFAULT_TOLERANCE = 2.0
DEFAULT_CHAOTIC_BELOW_DB = 20.0
DEFAULT_STATS_REL_TOL = 0.02
DEFAULT_AUDIO_SNR_MIN_DB = 20.0


class VerdictRules(BaseModel):
    """How candidates are judged against the noise floor and how speed differences are tested."""

    model_config = ConfigDict(extra="forbid")

    tolerance: float = Field(
        DEFAULT_TOLERANCE,
        gt=1.0,
        description="A candidate is within the floor when its error energy (MSE, 1 - SSIM, audio error "
        "energy, step-1 latent MSE; pooled over frames and seeds) is at most this many times the floor's "
        "(2 = 3.01 dB of PSNR).",
    )
    chaotic_below_db: float = Field(
        DEFAULT_CHAOTIC_BELOW_DB,
        description="When the floor's pooled video PSNR is below this, the exact runs themselves give a "
        "different video: pixel and audio pair metrics are shown as uninformative and the verdict rests "
        "on the earliest-step latents and the global statistics.",
    )
    stats_rel_tol: float = Field(
        DEFAULT_STATS_REL_TOL,
        ge=0.0,
        description="A global statistic (means and standard deviations) is inside when it lies within "
        "[min(exact), max(exact)] widened by this fraction of the exact runs' mean on both sides.",
    )
    audio_snr_min_db: float = Field(
        DEFAULT_AUDIO_SNR_MIN_DB,
        description="When the floor's audio SNR (after lag alignment) is below this, the waveform error "
        "is uninformative and the log-mel cosine (1 - cosine as its error energy) judges the audio.",
    )
    alpha: float = Field(
        DEFAULT_ALPHA,
        gt=0.0,
        lt=1.0,
        description="Significance level of the speed comparisons (Welch's t-test over runs).",
    )
