"""The numbers a verdict is judged with, as a scenario writes them (the ``verdict:`` block); every
verdict and speed line prints the rule it used, so a reader never guesses a tolerance or a level."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.metrics.metric import judged_energies
from harness.rule import DETECTABLE_HELP, TOLERANCE_HELP
from harness.scenario.parts import FieldProblem

DEFAULT_ALPHA = 0.05  # level of every interval and test (compare.significance imports it)
DEFAULT_MIN_EFFECT = 0.01  # speed: a smaller change is "no meaningful difference"
# floor_log_sd as measured: the H200 example (three seeds x three exact perturbations, bf16): video
# MSE 0.03, 1 - SSIM 0.02, audio 0.33; the builtin CPU pipeline about ten times more (video 0.29,
# audio 1.3: harness/bench/verdict_calibration.json).


class VerdictRules(BaseModel):
    """How candidates are judged against the noise floor and how speed differences are tested."""

    model_config = ConfigDict(extra="forbid")

    tolerance: float = Field(2.0, gt=1.0, description=TOLERANCE_HELP)
    alpha: float = Field(
        DEFAULT_ALPHA,
        gt=0.0,
        lt=1.0,
        description="Level of every interval and test: error-energy ratios (1 - alpha two-sided), the "
        "statistics' prediction intervals (Holm over the statistics judged) and the speed tests (Holm "
        "over the report's tests).",
    )
    chaotic_below_db: float = Field(
        20.0,
        description="A seed whose floor's pooled video PSNR is below this is chaotic: exact attention alone "
        "gives a different video, pixel metrics are shown as uninformative and the verdict rests on the "
        "in-situ reading, the early-step latents and the statistics.",
    )
    chaotic_band_db: float = Field(
        4.0,
        ge=0.0,
        description="Width of the band centred on chaotic_below_db where both the pixel metrics and the "
        "chaotic regime's evidence judge (no cliff at the threshold).",
    )
    audio_coherent_min_corr: float = Field(
        0.9,
        ge=-1.0,
        le=1.0,
        description="A seed whose floor's audio waveform correlation (cosine at the container's alignment) "
        "is at least this is judged by the waveform error energy; below, by the mel spectral error.",
    )
    floor_log_sd: dict[str, float] = Field(
        default_factory=dict,
        description="The within-seed spread (sd of the log) of a floor run's error energy per kind, measured "
        "for this pipeline elsewhere; used only where every seed has a single floor run, and named in the "
        "verdict with floor_log_sd_source. Unset: such a reading has no interval of its own.",
    )
    floor_log_sd_source: str | None = Field(
        None,
        description="Where floor_log_sd was measured (e.g. 'H200 example, 3 seeds x 3 floor runs'): printed "
        "beside every reading that uses it.",
    )
    stats_detectable: float = Field(0.05, gt=0.0, description=DETECTABLE_HELP)
    stats_min_effect: float = Field(
        0.01,
        ge=0.0,
        description="A statistic is outside only when it differs from the exact runs' mean of its seed by "
        "more than this fraction of it, and beyond their run-to-run variability (the builtin pipeline's exact "
        "perturbations move audio RMS by up to 0.74%).",
    )
    count_tolerance: float = Field(
        0.01,
        ge=0.0,
        description="Black and frozen frames are outside when they exceed every exact run of the seed by "
        "more than this fraction of the frames (at least 1); NaN-like frames by any.",
    )
    latent_min_psnr_db: float = Field(
        40.0,
        description="Without an accepted baseline, the early-step latent (the earliest step the candidate "
        "and the reference saved) is within when its PSNR against the reference is at least this.",
    )
    accepted_baseline: str | None = Field(
        None,
        description="An arm accepted as an approximate kernel (e.g. thu-ml SageAttention): each candidate "
        "also gets a non-inferiority reading against it, and early-step latents are judged against it "
        "(the top-level accepted_baseline names the same one: either key feeds both readings).",
    )
    baseline_margin: float = Field(
        1.25,
        gt=1.0,
        description="Non-inferiority margin: a candidate is not worse than the accepted baseline when the "
        "interval of its error energy over the baseline's lies under this.",
    )
    min_effect: float = Field(
        DEFAULT_MIN_EFFECT,
        ge=0.0,
        description="Speed: a change smaller than this fraction is 'no meaningful difference'; a speed word "
        "needs the whole interval beyond it.",
    )

    @model_validator(mode="after")
    def _known_kinds(self) -> VerdictRules:
        kinds = judged_energies()
        if unknown := sorted(set(self.floor_log_sd) - set(kinds)):
            raise ValueError(f"floor_log_sd: unknown kind {unknown[0]!r} (expected: {', '.join(kinds)})")
        if any(not v > 0 for v in self.floor_log_sd.values()):
            raise ValueError("floor_log_sd: every spread must be above 0")
        return self

    def stated_sd(self, kind: str) -> tuple[float | None, str]:
        """(the spread the scenario states for ``kind``, its source), (None, "") when none."""
        sd = self.floor_log_sd.get(kind)
        return (None, "") if sd is None else (sd, f"source: {self.floor_log_sd_source or 'not given'}")


def accepted_baseline(scenario: Any) -> str | None:
    """The scenario's one accepted baseline (a scenario or its dict, as campaign.json keeps it): the
    top-level ``accepted_baseline`` or ``verdict.accepted_baseline``, either feeding both readings (in
    situ and end to end); both given and different is refused (a FieldProblem, exit 2)."""

    def get(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)

    top, inner = get(scenario, "accepted_baseline"), get(get(scenario, "verdict") or {}, "accepted_baseline")
    if top and inner and top != inner:
        raise FieldProblem(
            ("accepted_baseline",),
            f"{top!r} and verdict.accepted_baseline {inner!r} differ: name one baseline (either key feeds "
            "both the in-situ and the end-to-end reading)",
        )
    return top or inner
