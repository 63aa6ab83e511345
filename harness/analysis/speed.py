"""The speed tests of one campaign: each arm against the reference (``compare.significance``), Holm within one
family of arms only (``speed_families``: floors, schedules and shadowed copies neither dilute nor lend
power to the candidates' words); and the stopping rule of ``repeats: auto``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from harness.compare.significance import (
    SpeedTest,
    compare_blocked,
    compare_pairs,
    compare_samples,
    holm_tests,
)
from harness.compare.summary import RunSummary
from harness.number_format import percent_text
from harness.scenario.verdict import VerdictRules

TIMINGS = {"s_per_step": "DiT s/step", "pipeline_total_s": "pipeline total"}
ROLE_FAMILIES = {"candidate": "candidates", "noise_floor": "noise floors", "reference": "reference"}
SCHEDULES, SHADOWED_COPIES = "schedules", "shadowed copies"


def speed_families(roles: Mapping[str, str], *, schedules: Iterable[str] = (),
                   shadowed_copies: Iterable[str] = ()) -> dict[str, str]:  # fmt: skip
    """arm -> Holm family: ``schedules``, ``shadowed copies`` of the reference, any other by its role."""
    out = {arm: ROLE_FAMILIES.get(role, role) for arm, role in roles.items()}
    out.update(dict.fromkeys((a for a in schedules if a in roles), SCHEDULES))
    out.update(dict.fromkeys((a for a in shadowed_copies if a in roles), SHADOWED_COPIES))
    return out


def speed_test(arm_runs: Sequence[RunSummary], ref_runs: Sequence[RunSummary], timing: str,
               rules: VerdictRules) -> SpeedTest:  # fmt: skip
    """One timing of an arm against the reference, in the design its runs allow."""

    def measured(runs: Sequence[RunSummary]) -> list[tuple]:  # (seed, repeat, time) of every ok run
        return [(r.seed, r.repeat, v) for r in runs if r.ok and (v := getattr(r, timing)) is not None]

    arm, ref = measured(arm_runs), measured(ref_runs)
    what, kw = TIMINGS[timing], {"alpha": rules.alpha, "min_effect": rules.min_effect}
    ref_at, arm_at = {(s, k): v for s, k, v in ref}, {(s, k): v for s, k, v in arm}
    if len(arm_at) >= 2 and set(arm_at) == set(ref_at):
        return compare_pairs([(ref_at[k], arm_at[k]) for k in sorted(arm_at, key=str)], what=what, **kw)
    seeds = sorted({s for s, _, _ in arm} & {s for s, _, _ in ref}, key=str)
    if seeds and None not in seeds:
        blocks = [([v for s, _, v in ref if s == b], [v for s, _, v in arm if s == b]) for b in seeds]
        blocked = compare_blocked(blocks, what=what, **kw)
        if blocked.speedup_ci is not None:  # no within-seed df, or zero spread within seeds: unpaired
            return blocked
    return compare_samples([v for *_, v in ref], [v for *_, v in arm], what=what, **kw)


def campaign_speed_tests(runs: Sequence[RunSummary], reference_arm: str | None, rules: VerdictRules,
                         families: Mapping[str, str] | None = None) -> dict[str, dict[str, SpeedTest]]:  # fmt: skip
    """arm -> timing -> test, for every arm but the reference; Holm within each family of arms."""
    out: dict[str, dict[str, SpeedTest]] = {}
    if reference_arm is None:
        return out
    family = speed_families({r.arm: r.role for r in runs}) | dict(families or {})
    ref = [r for r in runs if r.arm == reference_arm]
    for arm in dict.fromkeys(r.arm for r in runs):
        if arm == reference_arm:
            continue
        arm_runs = [r for r in runs if r.arm == arm]
        out[arm] = {t: speed_test(arm_runs, ref, t, rules) for t in TIMINGS}
    for name in dict.fromkeys(family[a] for a in out):
        holm_tests([t for a, tests in out.items() if family[a] == name for t in tests.values()], name)
    return out


def interval_widths(tests: dict[str, dict[str, SpeedTest]], roles: dict[str, str]) -> dict[str, float | None]:
    """'arm timing' -> the candidates' speed-up interval's relative width (None: none; 0: zero spread)."""
    out: dict[str, float | None] = {}
    for arm, by in tests.items():
        if roles.get(arm) != "candidate":
            continue
        for timing, t in by.items():
            if t.n_arm:  # else never ran here (skipped): nothing to narrow
                ci, s = t.speedup_ci, t.speedup
                width = (ci[1] - ci[0]) / s if ci and s else None
                out[f"{arm} {TIMINGS[timing]}"] = 0.0 if t.word == "zero spread" else width
    return out


def auto_note(tests: dict[str, dict[str, SpeedTest]], roles: dict[str, str], repeats: int, target: float,
              most: int) -> str:  # fmt: skip
    """What ``repeats: auto`` reached: every candidate's interval under the target, or the widest."""
    widths = interval_widths(tests, roles)
    wide = {k: w for k, w in widths.items() if w is None or w >= target}
    if not wide:
        cands = [t for a, by in tests.items() if roles.get(a) == "candidate" for t in by.values()]
        flat = sum(t.word == "zero spread" for t in cands)
        zero = f" ({flat} with zero spread: no interval, nothing to narrow)" if flat else ""
        return f"repeats auto: {repeats} round(s); every speed-up interval is narrower than {100 * target:g}%{zero}"
    k = max(wide, key=lambda x: wide[x] if wide[x] is not None else float("inf"))
    shown = "no interval" if wide[k] is None else f"{percent_text(wide[k])} wide"
    return (
        f"repeats auto: {repeats} round(s) of at most {most}; {k} is {shown}, not under the target "
        f"{100 * target:g}%"
    )
