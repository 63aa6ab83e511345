"""What the global statistics are blind to: broken frames and the coarse layout (a mirrored picture fools
every statistic), judged per seed against that seed's exact runs (docs/verdicts.md). Frames: more frozen,
black or flat frames than any exact run plus ``FRAME_SLACK`` is outside. Layout: at the coarsest scale
where every floor run agrees with the reference (``layout_mse`` under ``AGREE_FRACTION`` of its grid
variance, at least ``MIN_LAYOUT_VAR``), outside past ``LAYOUT_MULTIPLE`` x the floor's and that fraction.
Colour and time order (the runs' ``FrameTrack``; luma layouts and statistics are blind to both): at the
coarsest of ``TRACK_SCALES`` where every floor run's distance is under ``AGREE_FRACTION`` of what the
reference has to lose (its colour off grey; what playing it backwards changes), outside past
``LAYOUT_MULTIPLE`` x the floor runs' largest distance and ``MIN_LAYOUT_VAR``: the exact runs' spread, not
the reference's variance, which dwarfs a chaotic floor's distances at the coarse scales."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np
from pydantic import Field

from harness.analysis.energy import PairErrors
from harness.collect.layout import SCALES, TRACK, FrameTrack
from harness.compare.summary import RunSummary
from harness.records import Record
from harness.rule import INCONCLUSIVE, OUTSIDE, WITHIN, combine, word
from harness.run_keys import Sample

FRAME_SLACK = 0  # frames a candidate may have beyond the most an exact run of its seed has
AGREE_FRACTION = 0.25  # floor layout_mse below this fraction of the reference's layout variance: agreement
LAYOUT_MULTIPLE = 4.0  # a candidate's layout_mse beyond this multiple of the largest floor one: outside
MIN_LAYOUT_VAR = 4.0  # Y units^2: a reference with less grid variance has no layout to judge
FRAME_KINDS = ("frozen", "black", "flat")
KIND_TEXT = {"frozen": "frozen", "black": "black (max Y <= 16)", "flat": "flat (std Y < 1)"}
MIRRORS = (("left-right", "layout_mirror_lr_mse"), ("up-down", "layout_mirror_ud_mse"))
TRACK_SCALES = (1, 2, 4)  # coarsest first: a chaotic floor agrees on the whole frame's colour and course
# check -> (its distance, what the reference has to lose, the distance to the reference transformed)
TRACK_TERMS = {"colour": ("colour", "colourful", "swapped"), "time": ("time", "course", "reversed")}
TRACK_TEXT = {"colour": "colour", "time": "time order"}
TRACK_SIZE = {"colour": ("colour", "off grey"), "time": ("time course", "reversal")}  # what the reference has


class FrameCounts(Record):
    """One run's counts of frozen, black and flat frames with their first indices (None: not measured)."""

    key: str = ""
    seed: Sample | None = None
    frames: int | None = None
    frozen: int | None = None
    black: int | None = None  # RunStats.blank_frames
    flat: int | None = None  # RunStats.flat_frames
    frozen_first: list[int] = Field(default_factory=list)
    black_first: list[int] = Field(default_factory=list)
    flat_first: list[int] = Field(default_factory=list)
    track: FrameTrack | None = None  # per-frame coarse Y, Cb, Cr (RunStats.track)

    @classmethod
    def of(cls, run: RunSummary) -> FrameCounts:
        """From a run's summary (its ``stats``, set once the run has been measured)."""
        stats = run.stats
        if stats is None:
            return cls(key=run.key, seed=run.seed)
        new = "blank=" in stats.convention  # records older than the blank/flat counts lack them
        return cls(
            key=run.key,
            seed=run.seed,
            frames=stats.frames,
            frozen=stats.frozen_frames,
            black=stats.blank_frames if new else None,
            flat=stats.flat_frames if new else None,
            frozen_first=list(stats.frozen_first),
            black_first=list(stats.blank_first),
            flat_first=list(stats.flat_first),
            track=stats.track,
        )


class StructureCheck(Record):
    seed: Sample | None = None
    key: str = ""  # the candidate run
    check: str  # frozen | black | flat | layout | colour | time
    word: str = ""  # a word of harness.rule.SEVERITY, "" (not judged)
    value: float | None = None  # the candidate's count, or its layout (colour, time) distance at ``scale``
    limit: float | None = None  # the most an exact run has, or the bound
    frames: list[int] = Field(default_factory=list)  # the candidate's first such frames
    scale: int | None = None  # the S of the S x S grid judged
    floor: float | None = None  # the largest floor distance at ``scale``
    variance: float | None = None  # the reference's layout variance V_S (colour, time: what it has to lose)
    mirror: str | None = None  # left-right | up-down | U/V swapped | reversed: B nearer the reference so
    text: str = ""


class StructureReading(Record):
    word: str = ""  # the checks' words combined, "" (nothing judged)
    text: str = ""  # one line
    checks: list[StructureCheck] = Field(default_factory=list)


def _float(x: int | None) -> float | None:
    """A count as a float (a count too large for one reads as infinite)."""
    if x is None:
        return None
    try:
        return float(x)
    except OverflowError:
        return math.inf


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _frame_checks(cand: FrameCounts, exact: Sequence[FrameCounts]) -> list[StructureCheck]:
    out = []
    for kind in FRAME_KINDS:
        have = [getattr(e, kind) for e in exact if getattr(e, kind) is not None]
        value = getattr(cand, kind)
        c = StructureCheck(seed=cand.seed, key=cand.key, check=kind, value=_float(value))
        what = f"seed {cand.seed}: {cand.key} {KIND_TEXT[kind]} frames"
        if not have:
            c.text = f"{what}: not judged (no exact run of the seed has the count)"
        elif value is None:
            c.word, c.text = INCONCLUSIVE, f"{what}: not measured (the exact runs have it)"
        else:
            most = max(have)
            c.limit = _float(most)
            c.frames = list(getattr(cand, f"{kind}_first"))
            c.word = word(c.value or 0.0, c.value or 0.0, _float(most + FRAME_SLACK) or 0.0)
            if c.word == OUTSIDE:
                shown = ", ".join(map(str, c.frames)) + (", ..." if value > len(c.frames) else "")
                frames = f" (frame{'s' if value > 1 else ''} {shown})" if c.frames else ""
                c.text = f"{what}: {value}{frames} where the exact runs have at most {most}"
            else:
                c.text = f"{what}: {value}, the exact runs up to {most}"
        out.append(c)
    return out


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _coarsest(measured: dict, thing: str, size_name: str) -> tuple[int | None, float, float, str]:
    """(scale, largest floor distance, the reference's size, why none) at the coarsest scale of ``measured``
    (scale -> (floor distances, size), or why not) where every floor distance is under AGREE_FRACTION x size."""
    why = []
    for s, got in measured.items():
        if isinstance(got, str):
            why.append(f"{s}x{s}: {got}")
            continue
        # + 0.0: -0.0 reads as 0.0, so that the floors' order never shows in the text
        worst, size = max(got[0], key=lambda d: math.inf if math.isnan(d) else d) + 0.0, got[1] + 0.0
        if not math.isfinite(worst):
            why.append(f"{s}x{s}: floor distance {_num(worst)}")
        elif size < MIN_LAYOUT_VAR:
            why.append(
                f"{s}x{s}: the reference has no {thing} ({size_name} {_num(size)} < {MIN_LAYOUT_VAR:g})"
            )
        elif not worst < AGREE_FRACTION * size:
            why.append(
                f"{s}x{s}: floor distance {_num(worst)} >= {AGREE_FRACTION:g} x {size_name} {_num(size)}"
            )
        else:
            return s, worst, size, ""
    return None, math.nan, math.nan, "; ".join(why)


def _agreement(floors: Sequence[PairErrors]) -> tuple[int | None, float, float, str]:
    """(scale, largest floor layout_mse, V_S, why none) at the coarsest scale where the floors agree."""
    if not floors:
        return None, math.nan, math.nan, "no noise-floor run"
    measured: dict = {}
    for s in SCALES:
        dists = [f.layout_mse.get(s) for f in floors]
        vars_ = [v for f in floors if _finite(v := f.layout_var_a.get(s))]
        measured[s] = "not measured" if None in dists or not vars_ else (dists, statistics.median(vars_))
    return _coarsest(measured, "layout", "variance")


def _judge(c: StructureCheck, what: str, grid: str, missing: str) -> bool:
    """``c``'s word, and its text where not measured or within; True: the caller says why not within."""
    if c.value is None:
        c.word, c.text = INCONCLUSIVE, f"{what}: {missing}"
        return False
    c.word = word(c.value, c.value, c.limit) if math.isfinite(c.value) else OUTSIDE  # a non-finite one fails
    if c.word == WITHIN:
        c.text = f"{what} within: {grid} {_num(c.value)} <= {_num(c.limit)}"
    return c.word != WITHIN


def _layout_check(cand: PairErrors, scale: int, floor: float, var: float) -> StructureCheck:
    d = cand.layout_mse.get(scale)
    bound = max(LAYOUT_MULTIPLE * floor, AGREE_FRACTION * var)
    c = StructureCheck(seed=cand.seed, key=cand.key, check="layout", value=d, limit=bound, scale=scale,
                       floor=floor, variance=var)  # fmt: skip
    what, grid = f"seed {cand.seed}: {cand.key} layout", f"{scale}x{scale} luma grid distance"
    if not _judge(c, what, grid, f"not measured at {scale}x{scale} (the floor runs have it)"):
        return c
    bound_text = (
        f"above {LAYOUT_MULTIPLE:g} x the floor runs' largest {_num(floor)} and {AGREE_FRACTION:g} x the "
        f"reference's layout variance {_num(var)}"
    )
    mirrored = [  # named only where B is the mirrored reference within the bound
        (m, name)
        for name, field in MIRRORS
        if _finite(m := getattr(cand, field).get(scale)) and math.isfinite(d) and m < d and m <= bound
    ]
    if mirrored:
        m, name = min(mirrored)
        c.mirror = name
        c.text = (
            f"{what} mirrored {name}: B matches the mirror of the reference ({grid} {_num(d)}, "
            f"{_num(m)} to the reference mirrored {name}; {bound_text})"
        )
    else:
        c.text = f"{what} outside: {grid} {_num(d)} {bound_text}"
    return c


def _scaled(rows: list[list[float]], n: int, scale: int) -> np.ndarray:
    """[n, scale * scale]: the first n frames' TRACK x TRACK cells, averaged into scale x scale."""
    k = TRACK // scale
    x = np.asarray(rows[:n], np.float64).reshape(n, scale, k, scale, k)
    return x.mean(axis=(2, 4)).reshape(n, scale * scale)


def track_terms(a: FrameTrack, b: FrameTrack, scale: int) -> dict[str, float]:
    """B against the reference A over their common frames at scale x scale, mean squares over cells (and
    frames): colour, the distance of the (Cb, Cr) means over frames (the time course is time order's);
    swapped, the same to A's with Cb and Cr exchanged; colourful, A's off grey (128); time, the distance of
    the luma time courses (each cell less its mean over frames); reversed, the same to A played backwards;
    course, A's own distance to A reversed. Empty: no frames."""
    n = min(len(a.y), len(b.y), len(a.cb), len(b.cb), len(a.cr), len(b.cr))
    if n == 0 or any(len(r) != TRACK * TRACK for t in (a, b) for r in (*t.y[:n], *t.cb[:n], *t.cr[:n])):
        return {}
    ya, yb = (_scaled(t.y, n, scale) for t in (a, b))
    ya, yb = ya - ya.mean(axis=0), yb - yb.mean(axis=0)
    ca, cb = (
        np.stack([_scaled(t.cb, n, scale).mean(axis=0), _scaled(t.cr, n, scale).mean(axis=0)]) for t in (a, b)
    )

    def ms(x: np.ndarray) -> float:
        return float(np.mean(x * x)) + 0.0

    with np.errstate(all="ignore"):  # a non-finite track gives a non-finite distance, judged as such
        return {"colour": ms(cb - ca), "swapped": ms(cb - ca[::-1]), "colourful": ms(ca - 128.0),
                "time": ms(yb - ya), "reversed": ms(yb - ya[::-1]), "course": ms(ya - ya[::-1])}  # fmt: skip


def _track_agreement(
    ref: FrameTrack, floors: Sequence[FrameTrack], check: str
) -> tuple[int | None, float, float, str]:
    """(scale, largest floor distance, what the reference has to lose, why none) of a colour or time check."""
    (dist, size, _), measured = TRACK_TERMS[check], {}
    for s in TRACK_SCALES:
        ts = [track_terms(ref, f, s) for f in floors]
        measured[s] = ([t[dist] for t in ts], min(t[size] for t in ts)) if all(ts) else "no common frames"
    return _coarsest(measured, *TRACK_SIZE[check])


def _transformed(ref: FrameTrack, cand: FrameTrack, floors: Sequence[FrameTrack], check: str) -> float | None:
    """B's distance to the reference transformed (Cb and Cr exchanged; played backwards) at the finest
    scale, where a hue turn and a swap part, when the floor runs' spread there holds it (else None)."""
    dist, _, alt = TRACK_TERMS[check]
    worst = max(track_terms(ref, f, TRACK)[dist] for f in floors)
    d = track_terms(ref, cand, TRACK).get(alt, math.nan)
    return d if d <= max(LAYOUT_MULTIPLE * worst, MIN_LAYOUT_VAR) else None


def _track_check(
    cand: FrameCounts,
    ref: FrameTrack,
    floors: Sequence[FrameTrack],
    check: str,
    agreed: tuple[int, float, float],
) -> StructureCheck:
    scale, worst, size = agreed
    bound = max(LAYOUT_MULTIPLE * worst, MIN_LAYOUT_VAR)
    d = track_terms(ref, cand.track, scale).get(TRACK_TERMS[check][0]) if cand.track is not None else None
    c = StructureCheck(seed=cand.seed, key=cand.key, check=check, value=d, limit=bound, scale=scale,
                       floor=worst, variance=size)  # fmt: skip
    what = f"seed {cand.seed}: {cand.key} {TRACK_TEXT[check]}"
    grid = f"{scale}x{scale} {'chroma (Cb, Cr)' if check == 'colour' else 'luma time-course'} distance"
    if not _judge(c, what, grid, "not measured (the exact runs have a per-frame track)"):
        return c
    why = f"above {LAYOUT_MULTIPLE:g} x the floor runs' largest {_num(worst)}"
    why += f" and the least bound {MIN_LAYOUT_VAR:g}" if LAYOUT_MULTIPLE * worst < MIN_LAYOUT_VAR else ""
    alt = _transformed(ref, cand.track, floors, check)
    fine = f"{TRACK}x{TRACK}"
    if alt is None:
        c.text = f"{what} outside: {grid} {_num(d)} {why}"
    elif check == "colour":
        c.mirror = "U/V swapped"
        c.text = f"{what} outside, U and V swapped: {grid} {_num(d)} {why}; {_num(alt)} at {fine} to the reference with Cb and Cr exchanged"
    else:
        c.mirror = "reversed"
        c.text = f"{what} reversed: B plays the reference backwards ({grid} {_num(d)} {why}; {_num(alt)} at {fine} to the reference reversed)"
    return c


def _track_checks(
    seed: Sample | None, cands: Sequence[FrameCounts], exact: Sequence[FrameCounts], floor_keys: set[str]
) -> list[StructureCheck]:
    """Colour and time order of a seed's candidate runs against its reference and floor runs' tracks."""
    refs = [e.track for e in exact if e.key not in floor_keys and e.track is not None]
    floors = [e.track for e in exact if e.key in floor_keys and e.track is not None]
    why = ""
    if not any(r.track is not None for r in (*cands, *exact)):
        why = "no per-frame track in these records"
    elif len(refs) != 1:
        why = "no single reference run with a per-frame track"
    elif not floors:
        why = "no noise-floor run with a per-frame track"
    out = []
    for check in TRACK_TERMS:
        scale, worst, size, no = (None, 0.0, 0.0, why) if why else _track_agreement(refs[0], floors, check)
        if scale is None:
            out.append(StructureCheck(seed=seed, check=check, text=f"seed {seed}: {no}"))
        else:
            out += [_track_check(c, refs[0], floors, check, (scale, worst, size)) for c in cands]
    return out


def judge_structure(
    cands: Sequence[PairErrors],
    floors: Sequence[PairErrors],
    cand_frames: Sequence[FrameCounts] = (),
    exact_frames: Sequence[FrameCounts] = (),
) -> StructureReading:
    """Frames and layout of an arm's candidate runs against the exact runs of their seeds."""
    checks = [
        c for cf in cand_frames for c in _frame_checks(cf, [e for e in exact_frames if e.seed == cf.seed])
    ]
    not_judged: list[str] = []
    for seed in dict.fromkeys(c.seed for c in cands):
        scale, floor, var, why = _agreement([f for f in floors if f.seed == seed])
        if scale is None:
            checks.append(
                StructureCheck(seed=seed, check="layout", text=f"seed {seed}: layout not judged ({why})")
            )
            not_judged.append(f"seed {seed}: {why}")
            continue
        checks += [_layout_check(c, scale, floor, var) for c in cands if c.seed == seed]
    for seed in dict.fromkeys(c.seed for c in cand_frames):
        floor_keys = {f.key for f in floors if f.seed == seed}
        mine = [c for c in cand_frames if c.seed == seed]
        checks += _track_checks(seed, mine, [e for e in exact_frames if e.seed == seed], floor_keys)
    w = combine((c.word for c in checks), empty="")
    return StructureReading(word=w, text=_summary(w, checks, not_judged), checks=checks)


def _summary(w: str, checks: Sequence[StructureCheck], not_judged: Sequence[str]) -> str:
    if w in (OUTSIDE, INCONCLUSIVE):
        return f"structure {w}: " + "; ".join(c.text for c in checks if c.word == w)
    bits = []
    if any(c.check in FRAME_KINDS and c.word == WITHIN for c in checks):
        bits.append("frozen/black/flat frames within the exact runs' counts")
    for check in ("layout", *TRACK_TERMS):
        done = sorted({c.scale for c in checks if c.check == check and c.word == WITHIN and c.scale})
        if done:
            bits.append(f"{TRACK_TEXT.get(check, check)} within at {', '.join(f'{s}x{s}' for s in done)}")
        if check == "layout" and not_judged:
            bits.append(f"layout not judged ({'; '.join(not_judged)})")
    why: dict[str, str] = {}
    for k in TRACK_TERMS:  # one reason for every seed is said once
        texts = [c.text for c in checks if c.check == k and not c.word]
        reasons = {t.split(": ", 1)[-1] for t in texts}
        why[k] = reasons.pop() if len(reasons) == 1 else "; ".join(texts)
    if why["colour"] and why["colour"] == why["time"]:
        bits.append(f"colour and time order not judged ({why['colour']})")
    else:
        bits += [f"{TRACK_TEXT[k]} not judged ({t})" for k, t in why.items() if t]
    if not bits:
        return "structure: not judged (no frame counts or layout measured)"
    return f"structure {w}: " + "; ".join(bits) if w else "structure: " + "; ".join(bits)
