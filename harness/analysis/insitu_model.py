"""The records of the in-situ readings and the hybrid schedules that results.json carries (no
torch, no numpy: renderers import this). ``analysis.insitu`` and ``analysis.insitu_cost`` fill them."""

from __future__ import annotations

from pydantic import Field

from harness.insitu_records import InSituStats
from harness.records import Record
from harness.rule import INCONCLUSIVE
from harness.scenario.insitu import InSituTolerance

BOOTSTRAP = 2000  # resamples of the calls for the 95 % intervals
WORST = 5  # worst calls listed per candidate
CONVENTION = (
    "errors against exact attention (FP32 unless the run chose FP64) on sampled query rows of every call, the "
    "same rows for every op; rel L1 = sum|o - r| / sum|r| pooled over calls; exact floor = mean of the exact ops' "
    "errors on the same call (the shadowed run's own exact attention, exact shadows such as K/V reversed); ratio "
    f"= candidate / floor on the same calls, 95 % interval from {BOOTSTRAP} bootstrap resamples of the calls; "
    "within when the whole interval is at or below the tolerance, outside when it is wholly above; judged per call "
    "kind (DiT self-attention, refiner, ...), each kind's calls pooled apart, the worst kind deciding; a call whose "
    "output holds a NaN or Inf anywhere (not only on the sampled rows), or whose shadow failed, makes the reading "
    "outside (a refused call is not measured: a real run hands it to its fallback)"
)


class InSituPart(Record):
    """One judged comparison of a reading: against the floor, the accepted baseline or an absolute limit."""

    against: str  # "exact floor" | "accepted baseline <name>" | "max rel L1" | "min cosine"
    word: str  # harness.rule.word of its interval
    value: float | None = None  # the ratio (floor, baseline) or the pooled metric (absolute)
    ci: list[float] | None = None  # 95 % interval [lo, hi]
    limit: float
    text: str = ""


class Finding(Record):
    """A group of a candidate's calls (or kernels rows) whose error is several times the rest's
    (``analysis.findings`` states the rule)."""

    candidate: str
    # padded_share | k_len_mod_64 | k_len_mod_128 | kind | k_len | q_len | shape | step | block | rank | all
    dimension: str
    group: str  # "whose key length is not a multiple of 64", "of kind refiner", ...
    also: list[str] = Field(default_factory=list)  # other descriptions of the same observations
    what: str = "calls"  # calls | rows
    facts: str = ""  # the kinds and key lengths of the group
    count: int
    rest_count: int
    rel_l1: float
    rest_rel_l1: float | None = None  # None (and ratio None): a scale alone, on every call left
    ratio: float | None = None
    ratio_ci: list[float] | None = None  # 95 % bootstrap interval
    floor_ratio: float | None = None  # the group's error over its exact floor
    scale: float | None = None  # fitted out ~ scale x ref over the group
    rel_l1_unscaled: float | None = None
    among_rest: bool = False  # found once the stronger findings' observations were set aside
    text: str = ""


class InSituStep(Record):
    step: int | None
    rel_l1: float | None = None
    floor_rel_l1: float | None = None
    baseline_rel_l1: float | None = None
    cosine: float | None = None
    calls: int = 0


class InSituCell(Record):
    step: int | None
    block: int | None
    rel_l1: float | None = None
    ratio: float | None = None  # to the floor on the same calls
    calls: int = 0


class InSituKind(Record):
    """A candidate's error pooled over the calls of one kind (DiT self-attention, token refiner...)."""

    kind: str
    calls: int = 0
    q_len: int | None = None  # query length of its calls (the largest, when they differ)
    rows: int = 0  # query rows its calls cover: the sum of their q_len
    rel_l1: float | None = None
    floor_rel_l1: float | None = None
    ratio: float | None = None  # to the floor on the same calls
    ratio_ci: list[float] | None = None  # 95 % bootstrap interval over this kind's calls
    cosine: float | None = None
    scale: float | None = None  # fitted out ~ scale x yardstick, weighted by sum|r| over its calls
    rel_l1_unscaled: float | None = None  # rel L1 once the scale is divided out
    word: str = ""  # its own parts' words combined (harness.rule)
    parts: list[InSituPart] = Field(default_factory=list)  # judged on this kind's calls alone


class WorstCall(Record):
    run: str
    call: int
    rank: str
    step: int | None = None
    block: int | None = None
    kind: str = "other"
    rel_l1: float
    cosine: float
    row_cos_p1: float
    floor_rel_l1: float | None = None
    scale: float | None = None  # fitted out ~ scale x yardstick (None: none fitted)
    rel_l1_unscaled: float | None = None


class InSituReading(Record):
    candidate: str  # the shadow's name (an arm's name when the shadow named one)
    attn_type: str = ""
    runs: list[str] = Field(default_factory=list)  # the shadowed runs measured
    calls: int = 0
    failed: int = 0  # calls whose shadow raised (a refusal aside): the reading is outside
    nonfinite: int = 0  # calls whose output (anywhere) or metrics held NaN/Inf: the reading is outside
    refused: int = 0  # calls the candidate refused: not measured (a real run hands them to its fallback)
    stats: InSituStats = Field(default_factory=InSituStats)
    floor: InSituStats | None = None  # the exact floor pooled on the same calls
    word: str = INCONCLUSIVE
    # what decided the word: a call kind (per_kind), "non-finite output" or "failed calls"
    decided_by: str = ""
    ratio: float | None = None  # the deciding kind's candidate rel L1 / floor rel L1 on the same calls
    ratio_ci: list[float] | None = None
    parts: list[InSituPart] = Field(default_factory=list)  # the deciding kind's
    per_step: list[InSituStep] = Field(default_factory=list)
    cells: list[InSituCell] = Field(default_factory=list)
    per_kind: list[InSituKind] = Field(default_factory=list)
    worst: list[WorstCall] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)  # groups of calls far worse than the rest
    heatmap: str = ""  # the report's figure name; its PNG is assets/<heatmap>.png
    text: str = ""


class Fidelity(Record):
    """An emulator beside the kernel it reproduces, both shadowing the same calls: per call, the
    emulator's rel L1 over the kernel's, and how far their fitted scales lie apart."""

    emulator: str
    kernel: str
    calls: int = 0  # calls both measured finite
    ratio_median: float | None = None
    ratio_min: float | None = None
    ratio_max: float | None = None
    scale_diff_max: float | None = None  # max over calls of |emulator's scale - kernel's|
    worst: str = ""  # the call furthest from agreement: its run, kind, key length
    text: str = ""


class InSituRunInfo(Record):
    """One shadowed run: what it measured and what the shadows cost."""

    key: str
    arm: str
    primary: str
    primary_exact: bool = False
    ops: dict[str, str] = Field(default_factory=dict)  # name -> "exact" | "candidate" | "primary"
    # ops that measured no call (each call raised): name -> the first error; in no floor, no reading
    dropped: dict[str, str] = Field(default_factory=dict)
    calls: int = 0
    steps: list[int] = Field(default_factory=list)
    blocks: list[int] = Field(default_factory=list)
    kinds: dict[str, int] = Field(default_factory=dict)
    sample_rows: int = 0
    yardstick: str = "float32"
    measure_s_per_step: float | None = None  # the measurement's own time per step (steps 2..N)
    s_per_step: float | None = None
    twin: str | None = None  # an arm with the same attention and no shadows
    twin_s_per_step: float | None = None
    cost_text: str = ""
    captured: list[str] = Field(default_factory=list)  # captured call files, relative to the run folder
    notes: list[str] = Field(default_factory=list)


class InSituResults(Record):
    runs: list[InSituRunInfo] = Field(default_factory=list)
    floor_ops: list[str] = Field(default_factory=list)
    floor: InSituStats | None = None  # the floor pooled over every call of every shadowed run
    readings: list[InSituReading] = Field(default_factory=list)
    fidelity: list[Fidelity] = Field(default_factory=list)  # emulators beside their kernels
    accepted_baseline: str | None = None
    tolerance: InSituTolerance = Field(default_factory=InSituTolerance)
    convention: str = CONVENTION
    notes: list[str] = Field(default_factory=list)


class ScheduleRow(Record):
    arm: str
    attn_type: str
    schedule: str  # "torch_sdpa on the first 1 and last 1 step(s)", "none (every step)"
    exact_steps: list[int] = Field(default_factory=list)
    steps: int | None = None
    routing: str = "not recorded"  # proven | NOT as scheduled | not recorded | n/a
    routing_text: str = ""
    speedup: float | None = None  # reference s/step / arm s/step
    speed_words: str = ""
    accuracy: str = ""  # the arm's verdict (its judgement alone)
    equivalent: bool | None = None
    insitu_estimate: float | None = None  # rel L1 from the candidate's in-situ errors on its steps
    cheapest: bool = False  # the fastest row that is equivalent at the tolerance
