"""Timing from LightX2V's logs (PROFILING_DEBUG_LEVEL >= 1): its ``[Profile] Rank 0 - Level1_Log Run
Dit every step cost 12.3 seconds`` lines, MiniMax-H3's step markers and packed layout, for any ranks.
A rank is ``Rank N``, a torchrun ``[rankN]:`` prefix or the source's name (``Single GPU``: "0"); the
k-th step line of a rank is DiT step k, its seconds the maximum over ranks (kept only when every
stepping rank timed it); a stage sums per rank, then takes the maximum over ranks; what a rank timed
before ``Warmup`` (but the model load) is dropped. Nothing is guessed: a value not logged stays unset
and ``missing`` says so; an implausible one is a ``LogProblem`` with ``strict``, else left out and noted.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import PurePath

from pydantic import ValidationError

from harness.errors import HarnessError
from harness.records import MAX_SECONDS, StepTiming, TimingRecord

SOURCE = "lightx2v-log"


class LogProblem(HarnessError):
    """An implausible value in a log (exit 2): the message names the file and line."""


_PROFILE = re.compile(
    r"\[Profile\] (?:Single GPU|Rank (?P<rank>\d+)) - (?:Level[12]_Log )?(?P<name>.+?) cost "
    r"(?P<sec>[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|inf(?:inity)?|nan)) seconds",
    re.IGNORECASE,
)
_STEP_MARK = re.compile(r"==> (?:MiniMax-H3 step|step_index): (?P<i>\d+) / (?P<n>\d+)")
_PACKED = re.compile(
    r"MiniMax-H3 packed layout: text=(?P<text>\d+), audio=(?P<audio>\d+), video=(?P<video>\d+), total=(?P<total>\d+)"
)
_PREFIXES = re.compile(r"^\s*\[(?:rank|default)(?P<rank>\d+)\]:", re.MULTILINE)
_KEY_RANK = re.compile(r"rank[_-]?(?P<rank>\d+)", re.IGNORECASE)

STEP_NAME = "Run Dit every step"
PIPELINE = "RUN pipeline"
TOTAL = "Total Cost"
WARMUP = "Warmup"
LOAD = "Load models"
MUST_BE_POSITIVE = (STEP_NAME, PIPELINE, TOTAL)  # a zero here is no measurement

# LightX2V profile name -> stage key in timing.json.
STAGES = {
    LOAD: "load",
    WARMUP: "warmup",
    "Run Text Encoder": "text_encoder",
    "Run Input Encoder": "input_encoder",
    "Run VAE Encoder": "vae_encoder",
    "Prepare DiT": "prepare_dit",
    "Offload DiT": "offload_dit",
    "Run VAE Decoder": "vae_decode",
    "Run Video VAE Decoder": "video_vae_decode",
    "Run Audio VAE Decoder": "audio_vae_decode",
    "Save Audio-Video Output": "save",
    "Run DiT": "run_dit_stage",
}
# Lines every rank of an H3 run prints, and lines at least one rank prints (rank 0 saves; the
# audio decode runs on rank 0 only when the VAE decode is split over ranks).
EVERY_RANK = (TOTAL, PIPELINE, LOAD, "Run Text Encoder", "Run VAE Decoder", "Run Video VAE Decoder")
SOME_RANK = ("Run Audio VAE Decoder", "Save Audio-Video Output")


@dataclass
class _Rank:
    steps: list[float] = field(default_factory=list)
    stages: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    marks: list[tuple[int, int]] = field(default_factory=list)
    packed: dict[str, int] | None = None
    warmup_dropped: int = 0


def _key_rank(key: str) -> str | None:
    m = _KEY_RANK.search(PurePath(key).name)  # the file's name: not a folder that says "rank"
    return str(int(m.group("rank"))) if m else None


def _rank_order(r: str) -> tuple[int, str]:
    return (int(r), r) if r.isdigit() else (1 << 30, r)


def parse_lightx2v_logs(
    texts: dict[str, str] | str,
    *,
    strict: bool = True,
    world_size: int | None = None,
    infer_steps: int | None = None,
) -> TimingRecord:
    """One run's timing from its logs: source name -> text (one per rank, or stdout/stderr), or one text;
    ``infer_steps`` (the config's) must agree with the DiT steps timed."""
    if isinstance(texts, str):
        texts = {"log": texts}
    known = _known_ranks(texts)
    ranks: dict[str, _Rank] = defaultdict(_Rank)
    loose_marks: list[tuple[int, int]] = []  # markers that no rank can be attributed to
    loose_packed: list[dict[str, int]] = []
    rejected: list[str] = []
    for key, text in texts.items():
        key_rank = _key_rank(key)
        for number, line in enumerate(text.splitlines(), 1):
            prefix = _PREFIXES.match(line)
            line_rank = str(int(prefix.group("rank"))) if prefix else key_rank
            if m := _PROFILE.search(line):
                rank = str(int(m.group("rank"))) if m.group("rank") else (line_rank or "0")
                name = m.group("name").strip()
                if problem := _implausible(name, m.group("sec"), rank, known, world_size):
                    where = f"{key}:{number}: {problem}"
                    if strict:
                        raise LogProblem(where)
                    rejected.append(f"rejected {where}")
                    continue
                _profile(ranks[rank], name, float(m.group("sec")))
                if name == WARMUP:  # the warm-up's own step markers are not the run's
                    ranks[rank].marks.clear()
                    loose_marks.clear()
            elif m := _STEP_MARK.search(line):
                mark = (int(m.group("i")), int(m.group("n")))
                (ranks[line_rank].marks if line_rank is not None else loose_marks).append(mark)
            elif m := _PACKED.search(line):
                layout = {k: int(v) for k, v in m.groupdict().items()}
                if line_rank is not None:
                    ranks[line_rank].packed = layout
                else:
                    loose_packed.append(layout)
    try:
        timing = _build(dict(ranks), loose_marks, loose_packed)
    except ValidationError as err:  # plausible lines whose sum is not (a stage timed a million times)
        first = err.errors()[0]
        timed = [k for k, t in texts.items() if _PROFILE.search(t)] or list(texts)
        where = f"{', '.join(timed)}: {'.'.join(map(str, first['loc']))}: {first['msg']}"
        if strict:
            raise LogProblem(where) from None
        timing = TimingRecord(source=SOURCE, missing=[f"timing not taken: {where}"])
    timing.missing.extend(rejected)
    if disagreement := _config_steps(timing, infer_steps):
        if strict:
            raise LogProblem(f"{', '.join(texts)}: {disagreement}")
        timing.missing.append(disagreement)
    return timing


def _known_ranks(texts: dict[str, str]) -> set[str]:
    """The ranks the sources name (file names, torchrun prefixes), else 0..N-1 for the N the profile
    lines name (a stray "Rank 7" beside "Rank 0" is not one)."""
    known = {r for r in map(_key_rank, texts) if r is not None}
    for text in texts.values():
        known.update(str(int(m.group("rank"))) for m in _PREFIXES.finditer(text))
    if not known:
        named = {
            m.group("rank") for text in texts.values() for m in _PROFILE.finditer(text) if m.group("rank")
        }
        known = {str(i) for i in range(len(named))}
    return known


def _implausible(name: str, sec: str, rank: str, known: set[str], world_size: int | None) -> str | None:
    """Why a profile line's value cannot be a measurement (None: it can)."""
    seconds = float(sec)
    if not math.isfinite(seconds):
        return f"{name!r} cost {sec} seconds: not a finite number"
    if seconds < 0:
        return f"{name!r} cost {sec} seconds: negative"
    if seconds > MAX_SECONDS:  # the bound timing.json is held to
        return f"{name!r} cost {sec} seconds: above {MAX_SECONDS:g} s, no run lasts that long"
    if seconds == 0 and name in MUST_BE_POSITIVE:
        return f"{name!r} cost {sec} seconds: zero is no measurement"
    if world_size is not None and int(rank) >= world_size:
        return f"rank {rank} in a profile line, outside the world size {world_size}"
    if known and rank not in known:
        return (
            f"rank {rank} in a profile line, but the logs are of rank(s) {', '.join(sorted(known, key=int))}"
        )
    return None


def _config_steps(timing: TimingRecord, infer_steps: int | None) -> str | None:
    """Why the DiT steps timed disagree with the config's ``infer_steps`` (None: they agree)."""
    if not isinstance(infer_steps, int) or isinstance(infer_steps, bool) or not timing.steps:
        return None
    h3 = timing.packed_layout is not None  # MiniMax-H3 counts the terminal sigma: N - 1 DiT steps
    expected = infer_steps - 1 if h3 else infer_steps
    if len(timing.steps) == expected:
        return None
    how = f"{expected} DiT steps (MiniMax-H3 runs infer_steps - 1)" if h3 else f"{expected} DiT steps"
    return f"{len(timing.steps)} DiT step(s) timed, but the config's infer_steps {infer_steps} means {how}"


def _profile(state: _Rank, name: str, seconds: float) -> None:
    if name == STEP_NAME:
        state.steps.append(seconds)
    elif name == WARMUP:
        state.warmup_dropped += len(state.steps)
        state.steps.clear()
        kept = {LOAD: state.stages[LOAD]} if LOAD in state.stages else {}
        state.stages.clear()
        state.stages.update(kept)
        state.stages[WARMUP] += seconds
    else:
        state.stages[name] += seconds


def _build(
    ranks: dict[str, _Rank], loose_marks: list[tuple[int, int]], loose_packed: list[dict]
) -> TimingRecord:
    missing: list[str] = []
    timed = {r: s for r, s in ranks.items() if s.steps or s.stages}
    order = sorted(ranks, key=_rank_order)
    if not timed:
        missing.append("no [Profile] lines: was PROFILING_DEBUG_LEVEL >= 1, and did the run start?")

    # Steps: index k = the rank's k-th step line; kept when every stepping rank has it.
    stepping = sorted((r for r in timed if timed[r].steps), key=_rank_order)
    steps: list[StepTiming] = []
    longest = max((len(timed[r].steps) for r in stepping), default=0)
    for i in range(longest):
        per_rank = {r: timed[r].steps[i] for r in stepping if i < len(timed[r].steps)}
        if len(per_rank) == len(stepping):
            steps.append(StepTiming(index=i + 1, seconds=max(per_rank.values()), per_rank=per_rank))
        else:
            lacking = ", ".join(r for r in stepping if r not in per_rank)
            missing.append(f"DiT step {i + 1}: no time from rank {lacking} (step dropped)")
    if not stepping and timed:
        missing.append(f"{STEP_NAME}: not logged (no DiT step times)")

    # Expected step count from the markers (H3's N is the DiT step count).
    marks = [m for r in order for m in ranks[r].marks] + loose_marks
    totals = {n for _, n in marks}
    if len(totals) > 1:
        missing.append(f"step markers disagree on the step count: {sorted(totals)}")
    expected = max(totals) if totals else None
    if expected is None and stepping:
        missing.append(
            "step markers (==> MiniMax-H3 step: i / N) not logged: the expected step count is unknown"
        )
    if expected is not None:
        for r in stepping or order:
            have = len(ranks[r].steps)
            if have < expected:
                started = max((i for i, _ in ranks[r].marks), default=None)
                note = f", step {started} started" if started and started > have else ""
                missing.append(
                    f"rank {r}: DiT steps {have + 1}..{expected} of {expected} not logged{note} (run ended early?)"
                )
        if not ranks and loose_marks:
            missing.append(f"DiT steps 1..{expected} of {expected} not logged")

    def over_ranks(name: str) -> float | None:  # per rank sum, max over ranks
        return max((timed[r].stages[name] for r in timed if name in timed[r].stages), default=None)

    stages = {key: v for name, key in STAGES.items() if (v := over_ranks(name)) is not None}
    if steps:
        stages["dit"] = sum(s.seconds for s in steps)
    if timed:
        for name in (*EVERY_RANK, *SOME_RANK):
            lacking = [r for r in sorted(timed, key=_rank_order) if name not in timed[r].stages]
            if len(lacking) == len(timed):
                missing.append(f"{name}: not logged")
            elif lacking and name in EVERY_RANK:
                missing.append(f"{name}: not logged by rank {', '.join(lacking)}")
    dropped = sum(s.warmup_dropped for s in ranks.values())
    if dropped:
        missing.append(f"note: {dropped} step time(s) before the Warmup line were warm-up, not counted")

    # Attention sequence length from the packed layout.
    layouts = [ranks[r].packed for r in order if ranks[r].packed] + loose_packed
    packed = layouts[0] if layouts else None
    if packed is None:
        missing.append("MiniMax-H3 packed layout: not logged (attention sequence length unknown)")
    elif any(lay != packed for lay in layouts[1:]):
        missing.append(f"packed layout differs between ranks: {layouts}")

    return TimingRecord(
        source=SOURCE,
        steps=steps,
        stages=stages,
        pipeline_total_s=over_ranks(PIPELINE),
        wall_total_s=over_ranks(TOTAL),
        seq_len=packed["total"] if packed else None,
        packed_layout=packed,
        ranks=[r for r in order if r in timed or ranks[r].marks or ranks[r].packed],
        missing=missing,
    )
