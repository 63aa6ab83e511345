"""The verdict classes of ``harness bench verdicts`` (``class_groups``): each draw judged once and read
by several rows (false alarms, power, what the verdict says)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.analysis.insitu import candidate_reading
from harness.analysis.structure import FrameCounts, judge_structure
from harness.analysis.verdict import InsituReading, Verdict, judge_numbers
from harness.bench.verdict_draws import (
    CalibrationFixture,
    Draw,
    builtin_draw,
    h200_stated,
    metric_of,
    pr29_draw,
    with_audio,
)
from harness.collect.layout import SCALES, TRACK, FrameTrack
from harness.insitu_records import InSituCall, InSituOpError
from harness.metrics.metric import in_order
from harness.records import Record
from harness.scenario.insitu import InSituTolerance
from harness.scenario.verdict import VerdictRules

KERNEL = "sage_emul_aiter"  # the quantised kernel whose run breaks a floor (12x-32x its video energy)
OTHER_SEED_SSIM = 0.2  # SSIM of independent frames (modelled)
LAG_MS = 20.0
# In situ (synthetic calls): kind, calls, query rows; a call's level of rel L1 (exact bf16 round-off)
# log-normal around INSITU_LEVEL with sd INSITU_CALL_SD, each op's around it with sd INSITU_OP_SD.
INSITU_CALLS = (("dit_self", 16, 4096), ("cross", 8, 4096))
INSITU_LEVEL, INSITU_CALL_SD, INSITU_OP_SD = 4e-3, 0.3, 0.1
INSITU_FLOOR = ("torch_sdpa_kv_reversed", "torch_sdpa_math")  # the exact shadows
# Layout (a chaotic floor keeps the coarse layout): the reference's grid variance V_S log-normal
# around LAYOUT_VAR (sd 0.5, times LAYOUT_SCALE_VAR per scale), a floor run's or exact candidate's
# distance LAYOUT_FLOOR[S] x V_S (log sd LAYOUT_RUN_SD per run); a mirrored run's distance
# 2 V_S (1 - rho) + its exact distance, rho (the layout's correlation with its mirror) uniform on
# [0, LAYOUT_RHO_MAX].
LAYOUT_VAR, LAYOUT_SCALE_VAR = 1500.0, {4: 1.0, 8: 1.2, 16: 1.4}
LAYOUT_FLOOR, LAYOUT_RUN_SD, LAYOUT_RHO_MAX = {4: 0.03, 8: 0.06, 16: 0.12}, 0.5, 0.8
# Colour and time order (modelled, like the layout): the reference's track over TRACK_FRAMES frames of
# 4x4 cells, Y a cell's level (uniform 40-200) plus a drift over the clip (up to +-TRACK_DRIFT levels,
# uniform per cell) and motion (sd 6 a frame), Cb and Cr a cell's offset from grey (sd TRACK_CHROMA);
# an exact run is the reference plus chaos of sd TRACK_CHAOS a cell and frame (half in Cb and Cr).
TRACK_FRAMES, TRACK_DRIFT, TRACK_CHROMA, TRACK_CHAOS = 24, 30.0, 12.0, 8.0

# A row of a group: (rule, measure, test of the draw and the group's judgement).
Test = Callable[[Draw, Any], bool]


class BenchRow(Record):
    """One row of ``harness bench verdicts``: a rule on a design, and how often it fired."""

    rule: str
    design: str
    measure: str  # false alarm | power
    rate: float
    draws: int
    old_rule: float | None = None  # the rule this replaced, on the same draws
    note: str = ""


def full_verdict(d: Draw, rules: VerdictRules) -> Verdict:
    return judge_numbers("c", d.cands, d.floors, cand_stats=d.cand_stats, exact_stats=d.exact_stats,
                         rules=rules, insitu=d.insitu)  # fmt: skip


@dataclass
class Group:
    design: str
    draw: Callable[[np.random.Generator], Draw]
    rows: list[tuple[str, str, Test]]
    judge: Callable[[Draw, VerdictRules], Any] = full_verdict
    stated: bool = False  # the design has one floor run per seed: the H200 spreads stated
    old: Callable[[Draw], bool] | None = None  # the rule this replaced, on the same draws


def _outside(d: Draw, v: Verdict) -> bool:
    return v.word == "outside"


# --- identical ----------------------------------------------------------------------------------


def identical_draw(
    fx: CalibrationFixture, rng: np.random.Generator, every: bool, kernel: bool = False
) -> Draw:
    """The builtin draw with one seed's candidate (``every``: each seed's) bitwise the reference's;
    ``kernel``: every other seed's candidate is the seed's quantised-kernel run."""
    d = builtin_draw(fx, rng)
    by_seed = {sf.seed: sf for sf in fx.seeds}
    if kernel:
        d.cands = [by_seed[c.seed].candidates[KERNEL] for c in d.cands]
        d.cand_stats = [by_seed[c.seed].stats[KERNEL] for c in d.cands]
    which = range(len(d.cands)) if every else [int(rng.integers(len(d.cands)))]
    for n in which:
        sf = by_seed[d.cands[n].seed]
        e = d.cands[n] = d.cands[n].model_copy(deep=True)  # every metric at its value for equal output
        e.values = {m.key: m.equal for m in in_order() if m.equal is not None}
        e.identical, e.identical_frames, e.audio_residual_lag = True, e.frames or 0, 0
        st = sf.exact_stats[0].model_copy(deep=True)  # the reference's own statistics
        st.key = d.cand_stats[n].key
        d.cand_stats[n] = st
    d.marks["identical"] = sorted(d.cands[n].seed for n in which)
    return d


def _reads_identical_per_seed(d: Draw, v: Verdict) -> bool:
    """The identical seed (only it) is named identical, its cell says so, the word is the others'."""
    want = d.marks["identical"]
    cells = {sv.seed: sv.word for sv in v.per_seed}
    return (
        sorted(v.identical_seeds) == want
        and v.word != "identical"
        and all(cells.get(s) == "identical" for s in want)
        and all(w != "identical" for s, w in cells.items() if s not in want)
    )


# --- a broken floor run -------------------------------------------------------------------------


def broken_floor_draw(fx: CalibrationFixture, rng: np.random.Generator, how: str, defect: str = "",
                      seeds: int = 3) -> Draw:  # fmt: skip
    """The builtin draw (``defect`` planted against the clean floor), then one floor run of one seed
    replaced: ``how`` "kernel" (the seed's measured quantised-kernel run) or "seed" (another seed's)."""
    d = builtin_draw(fx, rng, defect, seeds=seeds)
    seed = d.cands[int(rng.integers(len(d.cands)))].seed
    runs = [i for i, f in enumerate(d.floors) if f.seed == seed]
    i = runs[int(rng.integers(len(runs)))]
    victim = d.floors[i]
    by_seed = {sf.seed: sf for sf in fx.seeds}
    sf = by_seed[seed]
    if how == "kernel":
        run, st = sf.candidates[KERNEL].model_copy(deep=True), sf.stats[KERNEL].model_copy(deep=True)
    else:  # another seed's output: video MSE twice the reference's luma variance, SSIM 0.2
        other = by_seed[int(rng.choice([s for s in by_seed if s != seed]))]
        luma_sd = sf.exact_stats[0].values.get("luma_std") or 64.0
        run, st = victim.model_copy(deep=True), other.exact_stats[0].model_copy(deep=True)
        run.values |= {metric_of("video_mse"): 2 * luma_sd**2, metric_of("video_1_ssim"): OTHER_SEED_SSIM}
        run.identical, run.identical_frames = False, 0
        with_audio(run, sf.defects["broken_audio"])  # an independent track of the same RMS, measured
    run.key, run.seed, st.key, st.seed = victim.key, seed, victim.key, seed
    d.floors[i] = run
    d.exact_stats = [st if e.key == victim.key else e for e in d.exact_stats]
    d.marks["broken"] = victim.key
    return d


def floor_arm_draw(fx: CalibrationFixture, rng: np.random.Generator, how: str) -> Draw:
    """The builtin draw with two floor runs a seed (K/V reversed, K/V chunked), then on every seed
    the first ``how``: "kernel" (the seed's quantised-kernel run), "twin" (a bitwise copy of the
    second) or "" (left intact)."""
    d = builtin_draw(fx, rng)
    by_seed = {sf.seed: sf for sf in fx.seeds}
    runs = len(d.floors) // len(d.cands)  # the draw's floor runs a seed, in seed order
    # each run named by its arm (the fixture's keys are arm@seed), as a campaign's runs are
    d.floors = [
        f.model_copy(update={"arm": f.key.partition("@")[0]}) for i, f in enumerate(d.floors) if i % runs < 2
    ]
    d.exact_stats = [
        e for i, e in enumerate(d.exact_stats) if i % (runs + 1) < 3
    ]  # the reference's, two runs'
    for i in range(0, len(d.floors), 2):
        victim, seed = d.floors[i], d.floors[i].seed
        if how == "kernel":
            run, st = by_seed[seed].candidates[KERNEL], by_seed[seed].stats[KERNEL]
        elif how == "twin":
            run, st = d.floors[i + 1], d.exact_stats[3 * (i // 2) + 2]
        else:
            continue
        run, st = run.model_copy(deep=True), st.model_copy(deep=True)
        run.key, run.arm, st.key = victim.key, victim.arm, victim.key
        d.floors[i] = run
        d.exact_stats[3 * (i // 2) + 1] = st
    d.marks["arm"] = {f.key for f in d.floors[::2]}
    return d


# --- in situ ------------------------------------------------------------------------------------


def _op_error(rel: float, nonfinite: bool = False) -> InSituOpError:
    if nonfinite:
        nan = math.nan
        return InSituOpError(
            cosine=nan, rel_l1=nan, rmse=nan, max_abs=nan, row_cos_p1=nan, row_cos_p10=nan, nan=1
        )
    return InSituOpError(cosine=1 - rel**2 / 2, rel_l1=rel, rmse=1.25 * rel, max_abs=8 * rel,
                         row_cos_p1=1 - 8 * rel**2, row_cos_p10=1 - 3 * rel**2)  # fmt: skip


def insitu_calls(
    rng: np.random.Generator, name: str, nan_call: bool, wrong_call: float = 0.0
) -> list[tuple[str, InSituCall]]:
    """Synthetic calls of one shadowed run (constants above): the exact shadows and candidate ``name``
    (an exact op), one call of it non-finite when ``nan_call``, or at rel L1 ``wrong_call`` when set."""
    items: list[tuple[str, InSituCall]] = []
    bad = int(rng.integers(sum(k for _, k, _ in INSITU_CALLS))) if nan_call or wrong_call else -1
    for kind, calls, q_len in INSITU_CALLS:
        for j in range(calls):
            n = len(items)
            level = INSITU_LEVEL * math.exp(rng.normal(0, INSITU_CALL_SD))
            errs = {
                op: _op_error(level * math.exp(rng.normal(0, INSITU_OP_SD))) for op in (*INSITU_FLOOR, name)
            }
            if n == bad:
                errs[name] = _op_error(wrong_call, nonfinite=not wrong_call)
            items.append(("cand@0", InSituCall(call=n + 1, step=1 + j % 4, block=j, kind=kind, batch=1, heads=8,
                                               q_len=q_len, k_len=q_len, head_dim=64, rows=64,
                                               elements=8 * 64 * 64, ref_l1=8 * 64 * 64 * 0.8, errors=errs)))  # fmt: skip
    return items


def insitu_draw(rng: np.random.Generator, nan_call: bool, wrong_call: float = 0.0) -> Draw:
    """The 29-step design (1 seed) with the in-situ reading ``candidate_reading`` gives its calls."""
    d = pr29_draw(rng, 1)
    calls = insitu_calls(rng, "cand", nan_call, wrong_call)
    r = candidate_reading("cand", calls, list(INSITU_FLOOR), None, InSituTolerance())
    d.insitu = InsituReading(word=r.word, ratio=r.ratio, ratio_ci=r.ratio_ci, text=r.text)
    return d


# --- a frozen frame, a lag ----------------------------------------------------------------------


def frozen_draw(fx: CalibrationFixture, rng: np.random.Generator) -> Draw:
    d = builtin_draw(fx, rng)
    d.cand_stats[int(rng.integers(len(d.cand_stats)))].values["frozen_frames"] = 1.0
    return d


def lag_draw(fx: CalibrationFixture, rng: np.random.Generator, late: bool) -> Draw:
    """Floor runs lagging 1 sample either way; the candidate 1-2 samples (exact) or, on one seed,
    LAG_MS late."""
    d = builtin_draw(fx, rng)
    d.floors = [f.model_copy(deep=True) for f in d.floors]  # never the fixture's own records
    for f in d.floors:
        f.audio_residual_lag = int(rng.choice([-1, 1]))
    for c in d.cands:
        c.audio_residual_lag = int(rng.choice([-2, -1, 1, 2]))
    if late:
        c = d.cands[int(rng.integers(len(d.cands)))]
        c.audio_residual_lag = round(LAG_MS / 1000 * (c.audio_rate or 32000))
    return d


# --- a mirror under a chaotic floor -------------------------------------------------------------


def layout_pair(e, rng: np.random.Generator, var: dict[int, float], mirrored: bool = False):
    """``e`` with layout numbers drawn from the stated model (constants above)."""
    out = e.model_copy(deep=True)
    rho = rng.uniform(0, LAYOUT_RHO_MAX, size=2)
    for s in SCALES:
        exact = var[s] * LAYOUT_FLOOR[s] * math.exp(rng.normal(0, LAYOUT_RUN_SD))
        far = [2 * var[s] * (1 - r) + exact for r in rho]  # to the mirrored reference (lr, ud)
        out.layout_var_a[s] = out.layout_var_b[s] = var[s]
        direct, lr = (far[0], exact) if mirrored else (exact, far[0])
        out.layout_mse[s], out.layout_mirror_lr_mse[s], out.layout_mirror_ud_mse[s] = direct, lr, far[1]
    return out


def mirror_draw(rng: np.random.Generator, mirrored: bool) -> Draw:
    d = pr29_draw(rng, 1)
    base = LAYOUT_VAR * math.exp(rng.normal(0, 0.5))
    var = {s: base * LAYOUT_SCALE_VAR[s] for s in SCALES}
    d.floors = [layout_pair(f, rng, var) for f in d.floors]
    d.cands = [layout_pair(c, rng, var, mirrored) for c in d.cands]
    return d


def structure_group(design: str, draw: Callable, rule: str, measure: str) -> Group:
    """A group of one row: the layout, colour and time-order checks' word ``outside``."""

    def outside(d: Draw, rules: VerdictRules) -> bool:
        return judge_structure(d.cands, d.floors, *d.marks.get("frames", ((), ()))).word == "outside"

    return Group(design, draw, [(rule, measure, lambda d, hit: hit)], judge=outside)


def track_draw(rng: np.random.Generator, kind: str) -> Draw:
    """The 29-step design (1 seed, 1 floor run) with per-frame tracks from the stated model (constants
    above); the candidate an exact run of the reference as it is ("exact"), played backwards
    ("reversed"), with Cb and Cr exchanged ("swapped") or its hue turned 90 degrees ("hue")."""
    d = pr29_draw(rng, 1)
    frames, cells = TRACK_FRAMES, TRACK * TRACK
    drift = np.linspace(-1, 1, frames)[:, None] * rng.uniform(-TRACK_DRIFT, TRACK_DRIFT, cells)
    y = rng.uniform(40, 200, cells) + drift + rng.normal(0, 6, (frames, cells))
    cb, cr = (np.broadcast_to(128 + rng.normal(0, TRACK_CHROMA, cells), (frames, cells)) for _ in range(2))

    def run(key: str, y, cb, cr, chaos: float = TRACK_CHAOS) -> FrameCounts:
        y, cb, cr = (x + rng.normal(0, s, x.shape) for x, s in ((y, chaos), (cb, chaos / 2), (cr, chaos / 2)))
        track = FrameTrack(y=y.round(3).tolist(), cb=cb.round(3).tolist(), cr=cr.round(3).tolist())
        return FrameCounts(key=key, seed=d.cands[0].seed, track=track)

    changed = {
        "reversed": (y[::-1], cb[::-1], cr[::-1]),
        "swapped": (y, cr, cb),
        "hue": (y, 128 - (cr - 128), cb),
    }.get(kind, (y, cb, cr))
    exact = [run("reference", y, cb, cr, 0.0), *(run(f.key, y, cb, cr) for f in d.floors)]
    d.marks["frames"] = ([run(c.key, *changed) for c in d.cands], exact)
    return d


# --- the groups ---------------------------------------------------------------------------------


def class_groups(fx: CalibrationFixture) -> list[Group]:
    """Every class, in the order the table prints them."""
    b3 = "builtin, 3 seeds x 3 floor runs (resampled)"
    b6 = b3.replace("3 seeds", "6 seeds")
    b2 = b3.replace("3 floor runs", "2 floor runs")
    layout = "29-step design, 1 seed x 1 floor run, chaotic video; layout modelled"
    tracked = layout.replace("layout modelled", "colour and course modelled")
    p29 = "29-step design, 1 seed (the H200 spreads stated)"
    kernel = f"one floor run replaced by {KERNEL}'s"
    seed = "one floor run replaced by another seed's output"
    groups = [
        Group(f"{b3}, one seed's candidate identical", lambda r: identical_draw(fx, r, every=False), [
            ("verdict: identical on one seed", "false alarm", _outside),
            ("verdict: identical on one seed read identical there (and the rest judged)", "power",
             _reads_identical_per_seed),
        ]),
        Group(f"{b3}, every seed's candidate identical", lambda r: identical_draw(fx, r, every=True), [
            ("verdict: identical on every seed read 'identical'", "power", lambda d, v: v.word == "identical"),
        ]),
    ]  # fmt: skip
    groups.append(Group(b3, lambda r: builtin_draw(fx, r), [
        ("floor check: an intact floor run left out (or a seed's floor called invalid)", "false alarm",
         lambda d, v: v.floor_check is not None
         and any(sc.left_out or sc.invalid for sc in v.floor_check.seeds)),
    ]))  # fmt: skip
    for how, what in (("kernel", kernel), ("seed", seed)):
        groups += [
            Group(f"{b3}, {what}", lambda r, how=how: broken_floor_draw(fx, r, how), [
                ("verdict, a broken floor run", "false alarm", _outside),
                ("floor check: the broken floor run left out", "power", lambda d, v: v.floor_check is not None
                 and any(d.marks["broken"] in sc.left_out for sc in v.floor_check.seeds)),
            ]),
            Group(f"{b6}, {what}", lambda r, how=how: broken_floor_draw(fx, r, how, "kernel_3x", seeds=6), [
                ("verdict: a kernel at 3x the floor's energy, a broken floor run", "power", _outside),
            ]),
        ]  # fmt: skip
    groups += [
        *(Group(f"{p29}, in situ on 24 synthetic calls", lambda r, nan=nan: insitu_draw(r, nan_call=nan),
                [(rule, measure, _outside)], stated=True)
          for nan, rule, measure in ((False, "verdict with an in-situ reading", "false alarm"),
                                     (True, "verdict: NaN in situ (one call non-finite)", "power"))),
        Group(f"{b3}, no exact run with a frozen frame", lambda r: frozen_draw(fx, r), [
            ("verdict: one frozen frame", "power", _outside),
        ]),
        *(Group(f"{b3}, floor runs lagging 1 sample", lambda r, late=late: lag_draw(fx, r, late=late),
                [(rule, measure, _outside)])
          for late, rule, measure in ((False, "verdict: a candidate lagging 1-2 samples", "false alarm"),
                                      (True, f"verdict: audio {LAG_MS:g} ms late on one seed", "power"))),
        *(structure_group(layout, lambda r, m=m: mirror_draw(r, m), rule, measure)
          for m, rule, measure in ((False, "structure: layout", "false alarm"),
                                   (True, "structure: layout mirrored left-right", "power"))),
    ]  # fmt: skip
    # The classes of round 2, last: each group draws from stream 200 + its index, so the rows above
    # keep their draws.
    groups += [
        Group(f"{b3}, one seed identical, the others {KERNEL}'s", lambda r: identical_draw(fx, r, False, True), [
            ("verdict: identical on one seed, a quantised kernel on the others", "power", _outside),
        ]),
        Group(f"{b2}, both intact", lambda r: floor_arm_draw(fx, r, ""), [
            ("floor check: an intact floor of two runs called invalid", "false alarm", lambda d, v: any(
                sc.invalid or sc.left_out for sc in v.floor_check.seeds)),
            ("verdict, two floor runs a seed", "false alarm", _outside),
        ]),
        Group(f"{b2}, one floor arm {KERNEL}'s on every seed", lambda r: floor_arm_draw(fx, r, "kernel"), [
            ("verdict, a floor arm replaced by a kernel's output", "false alarm", _outside),
            # every seed's floor invalid or without the replaced run: the headline cannot read it as a floor
            ("floor check: a floor arm replaced by a kernel's output named", "power",
             lambda d, v: v.floor_check is not None and bool(v.floor_check.seeds)
             and all(sc.invalid or set(sc.left_out) & d.marks["arm"] for sc in v.floor_check.seeds)),
        ]),
        Group(f"{b2}, the two floor runs bitwise equal", lambda r: floor_arm_draw(fx, r, "twin"), [
            ("verdict, two floor runs equal", "false alarm", _outside),
            ("floor check: two equal floor runs counted once", "power", lambda d, v: v.floor_check is not None
             and all(set(sc.left_out) & d.marks["arm"] for sc in v.floor_check.seeds)),
        ]),
        Group(f"{p29}, in situ on 24 synthetic calls", lambda r: insitu_draw(r, False, wrong_call=0.3), [
            ("verdict: one call of 24 at rel L1 0.3 in situ", "power", _outside),
        ], stated=True),
        structure_group(tracked, lambda r: track_draw(r, "exact"), "structure: colour and time order", "false alarm"),
        *(structure_group(tracked, lambda r, k=k: track_draw(r, k), f"structure: {what}", "power")
          for k, what in (("reversed", "video played backwards"), ("swapped", "U and V swapped"),
                          ("hue", "hue turned 90 degrees"))),
    ]  # fmt: skip
    return groups


def run_groups(
    groups: list[Group], draws: int, seed: int, rules: VerdictRules, stream: int = 200
) -> list[BenchRow]:
    """Every group's rows on ``draws`` draws each, group ``j`` drawn from the seeded stream ``stream + j``."""
    out = []
    stated = h200_stated(rules)
    for j, g in enumerate(groups):
        rng = np.random.default_rng([seed, stream + j])
        hits, old = [0] * len(g.rows), 0
        for _ in range(draws):
            d = g.draw(rng)
            v = g.judge(d, stated if g.stated else rules)
            for k, (_, _, test) in enumerate(g.rows):
                hits[k] += bool(test(d, v))
            old += bool(g.old is not None and g.old(d))
        out += [BenchRow(rule=rule, design=g.design, measure=measure, rate=hits[k] / draws, draws=draws,
                         old_rule=None if g.old is None else old / draws)
                for k, (rule, measure, _) in enumerate(g.rows)]  # fmt: skip
    return out
