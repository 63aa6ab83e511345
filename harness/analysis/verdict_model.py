"""The records of a verdict: the words, the in-situ and latent readings a verdict weighs, one seed's
verdict and an arm's (``analysis.verdict`` judges, ``analysis.verdict_text`` words them)."""

from __future__ import annotations

from pydantic import Field

from harness.analysis.floor_check import FloorCheck
from harness.analysis.intervals import RatioReading
from harness.analysis.stat_rule import StatCheck
from harness.analysis.structure import StructureReading
from harness.records import Record
from harness.rule import NOT_RUN, WITHIN

LAG_MARGIN_SAMPLES = 2  # a residual lag is judged beyond the floor's largest by more than this
LAG_MARGIN_MS = 0.5  # or this, whichever is larger
JUDGED_BY = {  # regime -> kinds of energy it judges
    "pixel": ("video_mse", "video_1_ssim"),
    "transitional": ("video_mse", "video_1_ssim"),
    "waveform": ("audio_error",),
    "spectral": ("audio_spectral",),
}


class InsituReading(Record):
    """A candidate's in-situ attention reading (measured inside its own run, against exact attention
    on the same inputs): what a chaotic regime rests on where it exists. Extra fields are ignored."""

    word: str = ""  # a word of harness.rule.SEVERITY
    ratio: float | None = None  # to the exact floor's in-situ error
    ratio_ci: list[float] | None = None
    text: str = ""
    decided_by: str = ""  # the call kind that decides, or "non-finite output" / "failed calls"
    nonfinite: int = 0  # calls whose output held NaN or Inf (the reading is then outside)
    failed: int = 0  # calls whose shadow raised (not a refusal)


class LatentReading(Record):
    """The early-step latents (the earliest step saved), judged where video is chaotic."""

    judged: bool = False
    against: str = ""  # an accepted baseline's name, or "absolute"
    steps: dict[str, int] = Field(default_factory=dict)  # seed -> step
    psnr: dict[str, float] = Field(default_factory=dict)  # seed -> candidate's PSNR at that step
    reading: RatioReading | None = None  # against the baseline
    word: str = ""
    text: str = ""


class SeedVerdict(Record):
    seed: int | None = None
    regime: dict[str, str] = Field(default_factory=dict)  # video, audio
    floor_psnr: float | None = None
    floor_audio_corr: float | None = None
    floor_runs: int = 0
    floor_left_out: list[str] = Field(default_factory=list)  # floor runs of the seed that do not judge
    identical: bool = False  # the candidate's output is bitwise the reference's on this seed
    ratio: float | None = None  # the decisive reading's ratio on this seed
    ci: list[float] | None = None
    word: str = ""
    text: str = ""


class Verdict(Record):
    arm: str
    role: str = "candidate"
    keys: list[str] = Field(default_factory=list)
    seeds: list[int] = Field(default_factory=list)
    measured: int = 0  # runs with accuracy metrics
    tolerance: float = 2.0
    word: str = NOT_RUN  # one of harness.rule.WORDS
    ratio: float | None = None  # the largest judged error-energy ratio to the floor (combined over seeds)
    ratio_ci: list[float] | None = None
    ratio_metric: str = ""
    text: str = ""  # the one line a reviewer reads
    per_seed: list[SeedVerdict] = Field(default_factory=list)
    energy: list[RatioReading] = Field(default_factory=list)  # per kind, judged ones first
    shown: list[str] = Field(default_factory=list)  # kinds shown, not judged, with why
    audio_lag: list[str] = Field(default_factory=list)  # residual lags the floor does not have
    latent: LatentReading | None = None
    insitu: InsituReading | None = None
    structure: StructureReading | None = None  # broken frames and the coarse layout (mirror)
    stats: list[StatCheck] = Field(default_factory=list)
    stats_word: str = ""
    stats_text: str = ""
    baseline: RatioReading | None = None  # non-inferiority against the accepted baseline
    missing: list[str] = Field(default_factory=list)  # what made it incomplete
    floor_runs: int = 0
    floor_check: FloorCheck | None = None  # floor runs left out, seeds whose floor is invalid
    identical_seeds: list[int | None] = Field(default_factory=list)  # bitwise equal to the reference
    decided_by: str = ""  # the part whose word is the verdict's: an energy kind, insitu, lag, ...
    end_to_end_word: str = ""  # the word of the decoded output alone (every part but in situ)
    warnings: list[str] = Field(default_factory=list)  # e.g. an approximate kernel's output identical
    attention_ok: bool | None = None
    attention: str = ""
    sentences: list[str] = Field(default_factory=list)
    accuracy: str = ""  # the judgement alone (no attention)
    summary: str = ""  # accuracy; attention

    @property
    def equivalent(self) -> bool:
        """Every judged part within (the only word that supports "equivalent at this tolerance")."""
        return self.word == WITHIN
