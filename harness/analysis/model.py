"""results.json and its assets: the contract between the analysis stage and the renderers. What the page
needs of the media is written under assets/ and named in ``ReportResults.assets``: ``frame:<run>:<index>``,
``series:<run>`` (``FrameSeries``), ``audio:<run>`` and ``spectrogram:<run>`` (``AudioView``),
``diff:<run>:<index>`` (``DiffScale``), ``clip:<run>`` and ``specdiff:<run>``, so a renderer needs this
file and those assets alone, never the campaign's media. A results.json read from the world travels, so it
is held to bounds before anything is read of it, refused in one line (exit 3: ``load_results_json``)."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any

from pydantic import Field, SerializationInfo, ValidationError, field_serializer, model_validator

# What results.json holds, by name (its own records and those of the stages it carries), so a renderer
# needs this module alone: the names imported and not used here are there for it.
from harness.analysis.asset_records import AudioView, Envelope, FrameSeries, SpectrogramDiff  # noqa: F401
from harness.analysis.dose_response import DoseCurve, DoseResponse, Prediction  # noqa: F401
from harness.analysis.insitu_model import Finding, InSituPart, InSituReading, InSituResults, ScheduleRow  # noqa: F401
from harness.analysis.verdict import Verdict
from harness.collect.models import CodecSettings
from harness.compare.latents import LatentPoint
from harness.compare.pairwise import CONVENTIONS, Comparison
from harness.compare.significance import SpeedTest
from harness.compare.summary import RunSummary
from harness.errors import Exit, HarnessError
from harness.input_files import check_input, read_input_text
from harness.records import Record, check_schema, positive_seconds, stage_seconds, step_count
from harness.run_keys import Sample
from harness.scenario.verdict import VerdictRules
from harness.store import utcnow

RESULTS_SCHEMA = "harness.report/7"  # 7: a comparison names its runs by key, the conventions said once


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
    seeds: list[Sample] = Field(default_factory=list)
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
    per_seed_psnr: dict[str, float | None] = Field(default_factory=dict)  # seed -> its floor's PSNR
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
    seed: Sample | None = None
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


INSITU_WHAT = "in-situ error / the exact floor's"  # what a ratio measures where in situ decides


class Terms(Record):
    """A number with its interval and what the interval is."""

    value: float | None = None
    ci: tuple[float, float] | None = None
    ci_what: str = ""  # "95 % CI", "range over seeds"
    word: str = ""


class Reading(Record):
    """One candidate at the top of the report, with the sentences every renderer prints of it."""

    arm: str
    word: str
    ratio: Terms = Field(default_factory=Terms)
    ratio_what: str = ""  # what the ratio measures: "video MSE / the floor's", "in-situ error / ..."
    tolerance: float = 2.0
    regime: str = ""
    step: Terms = Field(default_factory=Terms)  # DiT s/step speed-up
    total: Terms = Field(default_factory=Terms)  # pipeline-total speed-up
    baseline: bool = False  # the scenario's accepted baseline
    text: str = ""  # the verdict in words
    decided_by: str = ""  # the part whose word is the verdict's (``Verdict.decided_by``)
    end_to_end: Terms = Field(default_factory=Terms)  # the decoded output's own reading
    end_to_end_what: str = ""
    insitu: Terms | None = None  # the in-situ reading (ratio to the exact floor's, word), where there is one
    identical_seeds: list[Sample | None] = Field(default_factory=list)  # bitwise the reference's output
    seeds: int = 0
    warnings: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    attention: str = ""  # why the attention is invalid, where it is
    emulator: bool = False  # a numerics model: its accuracy stands for a kernel's, its timing for none
    badge: str = ""  # an emulator's words after its name; "" for a kernel
    emulator_detail: str = ""  # what the emulator models and how far that was checked
    name: str = ""  # its name as a line leads with it (with an emulator's badge)
    # Its sentences (``analysis.sentences``):
    line: str = ""  # the summary's line: name, word, the deciding ratio, the speed-up
    ratio_line: str = ""  # the deciding ratio with its interval and the tolerance
    lines: list[str] = Field(default_factory=list)  # the badge's accuracy lines ("error: ...")
    bare_lines: list[str] = Field(default_factory=list)  # the same without "error: " (a table cell)
    step_line: str = ""  # "DiT s/step speed-up ..." (or why there is none)
    total_line: str = ""
    step_cell: str = ""  # the speed-up with its interval and word, as a table cell
    total_cell: str = ""
    note: str = ""  # why a run is missing or invalid
    warning_lines: list[str] = Field(default_factory=list)  # each warning led by its arm's name


class FloorPoint(Record):
    """An exact noise-floor arm on the speed-against-accuracy axes."""

    arm: str
    speedup: Terms = Field(default_factory=Terms)
    ratio: float  # its own error energy / the pooled floor's, on ``metric``
    metric: str


class Summary(Record):
    """The summary a report opens with, and its parts pr.md and the job summary print."""

    lines: list[str] = Field(default_factory=list)  # the campaign, each candidate, copies, findings, ...
    incomplete: str = ""  # "INCOMPLETE: ..." where the results lack something
    findings: list[str] = Field(default_factory=list)
    intervals: list[str] = Field(default_factory=list)  # the intervals' confidence, said once


class PrLines(Record):
    """What pr.md says of the verdicts beyond the summary's lines (``analysis.pr_facts``)."""

    readings: dict[str, list[str]] = Field(default_factory=dict)  # arm -> a word per modality and reading
    speed: dict[str, str] = Field(default_factory=dict)  # arm -> its speed-ups where no interval was had
    codec: str = ""  # the caveat where output.mp4 (H.264/AAC) was scored


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
    seeds: list[Sample] = Field(default_factory=list)
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
    # In-situ readings of shadowed runs and the hybrid schedules (analysis.insitu, analysis.insitu_cost).
    insitu: InSituResults | None = None
    dose_response: DoseResponse | None = None  # the planted arms' curves (analysis.dose_response)
    schedules: list[ScheduleRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)  # bad input met on the way (one line each)
    # Every sentence said of the verdicts, written once (``analysis.sentences``); renderers print them.
    review: list[Reading] = Field(default_factory=list)  # one per candidate, in the report's order
    summary: Summary = Field(default_factory=Summary)
    floor_points: list[FloorPoint] = Field(default_factory=list)  # the floor arms in the speed figure
    pr: PrLines = Field(default_factory=PrLines)

    @model_validator(mode="before")
    @classmethod
    def _comparisons_runs(cls, data: Any) -> Any:
        """A comparison names its runs by key in the file: their summaries are ``runs``' own."""
        if not isinstance(data, dict) or not isinstance(data.get("comparisons"), list):
            return data
        runs = {}
        for r in data.get("runs") or []:
            k = r.get("key") if isinstance(r, dict) else getattr(r, "key", None)
            if isinstance(k, str):  # a hostile key (a list, a number) names nothing
                runs[k] = r
        cmps = []
        for i, c in enumerate(data["comparisons"]):
            for side in ("a", "b") if isinstance(c, dict) else ():
                if isinstance(c.get(side), str):
                    if c[side] not in runs:
                        raise ValueError(f"comparisons[{i}].{side}: no run {c[side]!r} among runs")
                    c = {**c, side: runs[c[side]]}
            cmps.append(c)
        return {**data, "comparisons": cmps}

    @field_serializer("comparisons", mode="wrap")
    def _comparisons_by_key(self, cmps: list[Comparison], handler: Any, info: SerializationInfo) -> Any:
        """In the file, a run summarised under ``runs`` is named by its key and the conventions every
        comparison shares stand once, in ``conventions``: a comparison holds what is its own."""
        out = handler(cmps)
        if not info.mode_is_json():
            return out
        runs = {r.key: r for r in self.runs}
        for c, d in zip(cmps, out, strict=True):
            if c.conventions == CONVENTIONS:
                d.pop("conventions", None)
            for side in ("a", "b"):
                if runs.get(getattr(c, side).key) == getattr(c, side):
                    d[side] = getattr(c, side).key
        return out

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
    def primary_seed(self) -> Sample | None:
        return self.seeds[0] if self.seeds else None

    @property
    def first_seed_runs(self) -> list[RunSummary]:
        """The first seed's runs (first repeats), the reference's first: the tracks the page plays and draws."""
        runs = [r for r in self.primary_runs if r.seed == self.primary_seed]
        return sorted(runs, key=lambda r: r.arm != self.reference_arm)


def read_results(path: Path) -> ReportResults:
    """A results.json of this schema; one of another is refused in one line."""
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


def worst_frames(res: ReportResults, seed: Sample | None) -> dict[str, dict[int, list[str]]]:
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


MiB = 1 << 20
# The largest results.json of the committed examples is 0.35 MiB (3 arms, in-situ readings);
# 32 MiB is about a hundred such campaigns in one file.
MAX_RESULTS_BYTES = 32 * MiB
MAX_DEPTH = 64  # results.json nests about 8 deep
RUN_TIMES = ("s_per_step", "pipeline_total_s", "wall_total_s")


class ResultsFileError(HarnessError):
    """A results.json that does not hold (exit 3); the message names the file and what is wrong."""

    exit_code = Exit.RUN_FAILED


def load_results_json(path: Path, schema: str | None = None) -> dict[str, Any]:
    """The parsed results.json at ``path`` once it is within every bound above; else one line.
    ``schema``: the one the caller reads; a file of another is left to the caller's schema check
    (refused in one line) once its bounds and run times hold (None: every file is read as current)."""
    path = Path(path)
    p = check_input(path, "results.json")  # missing, a folder, unreadable: exit 2 as any input
    size = p.stat().st_size
    if size > MAX_RESULTS_BYTES:
        raise ResultsFileError(
            f"{path}: results.json of {size / MiB:.1f} MiB, over the {MAX_RESULTS_BYTES // MiB} MiB "
            "a results.json may have (not read)"
        )
    # empty, not UTF-8 (line and byte named), grown while read: one line, as any input file
    text = read_input_text(p, "results.json", max_bytes=MAX_RESULTS_BYTES)
    try:
        data = json.loads(text)
    except RecursionError:
        raise ResultsFileError(
            f"{path}: not a harness results.json (nested deeper than {MAX_DEPTH})"
        ) from None
    except ValueError as err:
        raise ResultsFileError(f"{path}: not a readable results.json (not JSON: {err})") from None
    is_dict = isinstance(data, dict)
    runs = is_dict and isinstance(data.get("runs"), list)
    problem = bounds_problem(data) or (timing_problem(data["runs"]) if runs else None)
    # Another schema's structure is the schema check's to name; bounds and run times hold.
    current = schema is None or not is_dict or data.get("schema", schema) == schema
    if problem is None and current and not (runs and "campaign_id" in data):
        problem = "no campaign_id/runs" if is_dict else "not a JSON object"
    if problem:
        raise ResultsFileError(f"{path}: not a harness results.json ({problem})")
    return data


def bounds_problem(data: Any) -> str | None:
    """Why ``data`` (parsed JSON) is out of bounds: too deep, or a number that is not finite."""
    todo: list[tuple[Any, str, int]] = [(data, "", 1)]
    while todo:
        obj, where, depth = todo.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} at {where or 'the top'}"
        if isinstance(obj, dict):
            todo.extend((v, f"{where}.{k}" if where else str(k), depth + 1) for k, v in obj.items())
        elif isinstance(obj, list):
            todo.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(obj))
        elif isinstance(obj, float) and not math.isfinite(obj):
            return f"{where}: {obj} is not a finite number"
    return None


def timing_problem(runs: list[Any]) -> str | None:
    """Why a run's times cannot be a measurement (as timing.json is checked); None: they can."""
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            return f"runs[{i}]: not an object"
        steps, stages = run.get("step_seconds") or [], run.get("stages") or {}
        if not isinstance(steps, list) or not isinstance(stages, dict):
            return f"runs[{i}]: step_seconds or stages of the wrong type"
        values = [(f"step_seconds[{j}]", v, positive_seconds) for j, v in enumerate(steps)]
        values += [(name, run.get(name), positive_seconds) for name in RUN_TIMES]
        values += [(f"stages.{k}", v, stage_seconds) for k, v in stages.items()]
        values.append(("step_seconds", steps, step_count))
        for name, value, check in values:
            if value is None:
                continue
            try:
                number = isinstance(value, int | float) and not isinstance(value, bool)
                if check is not step_count and not number:
                    raise ValueError(f"{value!r} is not a number")
                check(value)
            except ValueError as err:
                return f"runs[{i}] ({run.get('key', '?')}): {name}: {err}"
    return None
