"""results.json and its assets: the contract between the analysis stage and the renderers. What the page
needs of the media is written under assets/ and named in ``ReportResults.assets``: ``frame:<run>:<index>``,
``series:<run>`` (``FrameSeries``), ``audio:<run>`` and ``spectrogram:<run>`` (``AudioView``),
``diff:<run>:<index>`` (``DiffScale``), ``clip:<run>`` and ``specdiff:<run>``, so a renderer needs this
file and those assets alone, never the campaign's media."""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

# What results.json holds, by name (its own records and those of the stages it carries), so a renderer
# needs this module alone: the names imported and not used here are there for it.
from harness.analysis.insitu_model import Finding, InSituPart, InSituReading, InSituResults, ScheduleRow  # noqa: F401
from harness.analysis.review_model import INSITU_WHAT, FloorPoint, Reading, Summary, Terms  # noqa: F401
from harness.analysis.verdict import Verdict
from harness.collect.models import CodecSettings
from harness.compare.latents import LatentPoint
from harness.compare.pairwise import Comparison
from harness.compare.significance import SpeedTest
from harness.compare.summary import RunSummary
from harness.records import Record, check_schema
from harness.scenario.verdict import VerdictRules
from harness.store import utcnow

RESULTS_SCHEMA = "harness.report/6"  # 6: the review and the summary worded once (analysis.sentences)
SERIES_SCHEMA = "harness.frame_series/1"
AUDIO_VIEW_SCHEMA = "harness.audio_view/1"
SPECTROGRAM_DIFF_SCHEMA = "harness.spectrogram_diff/1"


class Spread(Record):
    n: int
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    std: float | None = None  # sample std over seeds; None below two finite values
    values: list[float] = Field(default_factory=list)


class ArmAggregate(Record):
    arm: str
    role: str
    attn_type: str | None = None
    kv_reversed: bool = False
    perturbation: str = ""  # how a noise-floor arm perturbs exact attention
    keys: list[str] = Field(default_factory=list)  # every run: seeds x repeats
    seeds: list[int] = Field(default_factory=list)
    repeats: int = 1  # most runs of one seed
    runs_ok: int = 0
    metrics: dict[str, Spread] = Field(default_factory=dict)  # speed over runs, accuracy over seeds
    speed: dict[str, SpeedTest] = Field(default_factory=dict)  # s_per_step, pipeline_total_s vs the reference
    timing_baseline: bool = True
    timing_label: str = ""  # "not a timing baseline" (a noise floor), "an emulator's timing"
    timing_note: str = ""  # why its timings are no baseline
    # Runs that timed their DiT blocks (layers.json): the metrics layer_s, outside_layers_s and
    # released_step_s (extrapolated) over them, and what they were measured on.
    layers_timed: int | None = None  # DiT layers a step ran
    layer_seq_len: int | None = None
    released_layers: int | None = None


class FloorSummary(Record):
    """The noise floor as a distribution: every noise-floor run against the reference."""

    arms: list[str] = Field(default_factory=list)
    keys: list[str] = Field(default_factory=list)
    perturbations: dict[str, str] = Field(default_factory=dict)  # arm -> what it perturbs
    psnr_pooled: float | None = None  # from the mean MSE over all floor runs
    band: dict[str, list[float]] = Field(default_factory=dict)  # metric key -> min, median, max
    per_seed_psnr: dict[str, float | None] = Field(
        default_factory=dict
    )  # seed -> pooled PSNR of its floor runs
    regimes: dict[str, str] = Field(default_factory=dict)  # seed -> pixel | transitional | chaotic
    chaotic: bool = False  # some seed is chaotic
    text: str = ""


class CodecFloorRow(Record):
    """The codec's own error on the reference, with its share of the floor's error energy."""

    key: str
    method: str
    settings: CodecSettings
    decode: str = ""
    psnr_pooled: float | None = None
    psnr_min: float | None = None
    psnr_min_frame: int | None = None
    ssim_mean: float | None = None
    ssim_min: float | None = None
    ssim_min_frame: int | None = None
    audio_snr: float | None = None
    audio_logmel_cosine: float | None = None
    mse: float | None = None
    share_of_floor: float | None = None  # codec MSE / floor pooled MSE
    text: str = ""


class LatentSeries(Record):
    key: str
    arm: str
    seed: int | None = None
    role: str
    points: list[LatentPoint] = Field(default_factory=list)


class FrameGrid(Record):
    """Rows are frame indices, columns are runs; cells are the thumbnails' asset paths."""

    title: str
    indices: list[int]
    columns: list[str]
    cells: dict[str, dict[int, str]] = Field(default_factory=dict)  # run -> frame index -> asset path
    missing: dict[str, str] = Field(default_factory=dict)  # run -> why it has no frames
    reference: str | None = None  # the column the differences are taken to
    diffs: dict[str, dict[int, str]] = Field(default_factory=dict)  # run -> frame index -> difference image


class DiffScale(Record):
    """How the difference images were drawn: one gain for the whole campaign."""

    gain: float
    full_scale: float  # |difference| (8-bit levels) at the top of the colour scale: 255 / gain
    colormap: str = "inferno"
    colours: list[str] = Field(default_factory=list)  # the colour map at evenly spaced grey levels (#rrggbb)
    percentile: float = 99.5
    largest: float = 0.0  # that percentile of the largest map, in 8-bit levels
    scale: str | None = None  # the colour bar's PNG (relative to the results' folder)
    text: str = ""


class ClipSet(Record):
    """What the audio clips (``clip:<run>``) hold."""

    seconds: float  # the longest clip
    text: str = ""


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
    spectrogram: str | None = (
        None  # 8-bit PNG path (relative to the results' folder); row 0 = top = highest bin
    )
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


class ReportResults(Record):
    schema_version: str = Field(RESULTS_SCHEMA, alias="schema")
    generated_at: str = Field(default_factory=utcnow)
    inputs_digest: str | None = None  # of everything the analysis read (campaign.json, runs/, rules, code)
    campaign_id: str
    campaign_path: str
    scenario_name: str
    scenario_file: str | None = None
    scenario_sha256: str | None = None
    profile: str | None = None
    runner: str
    executor: str = "local"
    kind: str = "e2e"
    harness_version: str | None = None
    created_at: str | None = None
    scenario: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    env_summary: list[tuple[str, str]] = Field(default_factory=list)
    conventions: dict[str, str] = Field(default_factory=dict)
    reference_arm: str | None = None
    noise_floor_arms: list[str] = Field(default_factory=list)
    seeds: list[int] = Field(default_factory=list)
    multi_seed: bool = False
    runs: list[RunSummary] = Field(default_factory=list)
    comparisons: list[Comparison] = Field(default_factory=list)
    arms: list[ArmAggregate] = Field(default_factory=list)
    latents: list[LatentSeries] = Field(default_factory=list)
    verdicts: list[Verdict] = Field(default_factory=list)
    exact_attention: str = ""
    rules: VerdictRules = Field(default_factory=VerdictRules)
    repeats: int = 1  # most runs of one arm and seed
    floor: FloorSummary | None = None
    codec_floor: CodecFloorRow | None = None
    pixel_source: str = ""  # what the pixel metrics were taken on (lossless copies or decoded mp4)
    repeat_notes: list[str] = Field(default_factory=list)  # are repeats' outputs byte-identical
    frame_indices: list[int] = Field(default_factory=list)
    frame_grids: list[FrameGrid] = Field(default_factory=list)  # one per seed
    frame_diff: DiffScale | None = None  # how the difference images of the grids were drawn
    audio_clips: ClipSet | None = None
    assets: dict[str, str] = Field(default_factory=dict)  # name -> path relative to the results' folder
    # In-situ readings of shadowed runs and the hybrid schedules (analysis.insitu, analysis.schedules).
    insitu: InSituResults | None = None
    schedules: list[ScheduleRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)  # bad input met on the way (one line each)
    # Every sentence said of the verdicts, written once (``analysis.sentences``); renderers print them.
    review: list[Reading] = Field(default_factory=list)  # one per candidate, in the report's order
    summary: Summary = Field(default_factory=Summary)
    floor_points: list[FloorPoint] = Field(default_factory=list)  # the floor arms in the speed figure

    def run(self, key: str) -> RunSummary | None:
        return next((r for r in self.runs if r.key == key), None)

    @property
    def primary_runs(self) -> list[RunSummary]:
        """The first repeat of every arm and seed: the runs compared for accuracy."""
        return [r for r in self.runs if r.repeat == 1]

    def arm(self, name: str) -> ArmAggregate | None:
        return next((a for a in self.arms if a.arm == name), None)

    def comparison_for(self, key: str) -> Comparison | None:
        return next((c for c in self.comparisons if c.b.key == key), None)

    @property
    def primary_seed(self) -> int | None:
        return self.seeds[0] if self.seeds else None


def read_results(path: Path) -> ReportResults:
    """A results.json of this schema; one of another is refused in one line."""
    from harness.analysis.results_file import ResultsFileError, load_results_json

    path = Path(path)
    data = load_results_json(path, RESULTS_SCHEMA)  # bounded: size, nesting, finite numbers, run times
    older = f"re-analyse its campaign with this harness: harness report {shlex.quote(str(path.parent))}"
    check_schema(data, ReportResults, str(path), older)  # another version or kind: refused
    try:
        return ReportResults.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ResultsFileError(f"{path}: not a harness results.json ({where}: {first['msg']})") from None


def is_emulator(res: ReportResults, arm: str) -> bool:
    """Whether the arm's backend is a numerics model (run.json's word, else the aggregate's label)."""
    if any(r.emulated for r in res.runs if r.arm == arm):
        return True
    agg = res.arm(arm)
    return agg is not None and agg.timing_label == "an emulator's timing"


def is_shadowed_copy(res: ReportResults, arm: str) -> bool:
    """Whether ``arm`` is a shadowed copy of the reference (its verdict's role "insitu"): no candidate."""
    return any(v.arm == arm and v.role == "insitu" for v in res.verdicts)


def worst_frames(res: ReportResults, seed: int | None) -> dict[str, dict[int, list[str]]]:
    """{run: {frame index: ["PSNR", "SSIM"]}}: each candidate's worst frame of ``seed`` by each metric."""
    out: dict[str, dict[int, list[str]]] = {}
    for c in res.comparisons:
        v = c.video
        if v is None or c.b.seed != seed or c.b.role != "candidate" or c.a.arm != res.reference_arm:
            continue
        if is_shadowed_copy(res, c.b.arm):
            continue
        marks = out.setdefault(c.b.key, {})
        if math.isfinite(v.psnr_min):
            marks.setdefault(int(v.psnr_min_frame), []).append("PSNR")
        if v.ssim_min < 1.0:
            marks.setdefault(int(v.ssim_min_frame), []).append("SSIM")
        if not marks:
            del out[c.b.key]
    return out
