"""The speed tests of one campaign: each arm against the reference, runs as samples, paired where the
design pairs them, corrected together (Holm), and the stopping rule of ``repeats: auto``.

Design of a test (``compare.significance``): the arm's and the reference's runs share every
(seed, repeat): **paired** (each round ran both side by side); they share seeds only (e.g. a
noise floor that runs once per seed): **blocked by seed**; else **unpaired**. The p-values of
every test a report prints (each arm x DiT s/step and pipeline total) are adjusted together.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.compare.significance import (
    SpeedTest,
    compare_blocked,
    compare_pairs,
    compare_samples,
    holm_tests,
)
from harness.compare.summary import RunSummary
from harness.scenario.verdict import VerdictRules

TIMINGS = {"s_per_step": "DiT s/step", "pipeline_total_s": "pipeline total"}


def _value(r: RunSummary, timing: str) -> float | None:
    return getattr(r, timing)


def speed_test(arm_runs: Sequence[RunSummary], ref_runs: Sequence[RunSummary], timing: str,
               rules: VerdictRules) -> SpeedTest:  # fmt: skip
    """One timing of an arm against the reference, in the design its runs allow."""
    arm = [r for r in arm_runs if r.ok and _value(r, timing) is not None]
    ref = [r for r in ref_runs if r.ok and _value(r, timing) is not None]
    what, kw = TIMINGS[timing], {"alpha": rules.alpha, "min_effect": rules.min_effect}
    ref_at = {(r.seed, r.repeat): _value(r, timing) for r in ref}
    arm_at = {(r.seed, r.repeat): _value(r, timing) for r in arm}
    if len(arm_at) >= 2 and set(arm_at) == set(ref_at):
        return compare_pairs([(ref_at[k], arm_at[k]) for k in sorted(arm_at, key=str)], what=what, **kw)
    seeds = sorted({r.seed for r in arm} & {r.seed for r in ref}, key=str)
    if seeds and None not in seeds:
        blocks = [
            ([_value(r, timing) for r in ref if r.seed == s], [_value(r, timing) for r in arm if r.seed == s])
            for s in seeds
        ]
        blocked = compare_blocked(blocks, what=what, **kw)
        if blocked.speedup_ci is not None:
            return blocked
    return compare_samples(
        [_value(r, timing) for r in ref], [_value(r, timing) for r in arm], what=what, **kw
    )


def campaign_speed_tests(runs: Sequence[RunSummary], reference_arm: str | None,
                         rules: VerdictRules) -> dict[str, dict[str, SpeedTest]]:  # fmt: skip
    """arm -> timing -> test, for every arm but the reference; Holm over all of them."""
    out: dict[str, dict[str, SpeedTest]] = {}
    if reference_arm is None:
        return out
    ref = [r for r in runs if r.arm == reference_arm]
    for arm in dict.fromkeys(r.arm for r in runs):
        if arm == reference_arm:
            continue
        arm_runs = [r for r in runs if r.arm == arm]
        out[arm] = {t: speed_test(arm_runs, ref, t, rules) for t in TIMINGS}
    holm_tests([t for tests in out.values() for t in tests.values() if t.p is not None])
    return out


def interval_widths(tests: dict[str, dict[str, SpeedTest]], roles: dict[str, str]) -> dict[str, float | None]:
    """'arm timing' -> relative width of the speed-up's interval ((hi - lo) / speed-up; None: no
    interval yet), for the arms whose timing is a baseline (candidates)."""
    out: dict[str, float | None] = {}
    for arm, by in tests.items():
        if roles.get(arm) != "candidate":
            continue
        for timing, t in by.items():
            if not t.n_arm:  # never ran here (skipped): nothing to narrow
                continue
            ci, s = t.speedup_ci, t.speedup
            out[f"{arm} {TIMINGS[timing]}"] = (ci[1] - ci[0]) / s if ci and s else None
    return out


def auto_note(tests: dict[str, dict[str, SpeedTest]], roles: dict[str, str], repeats: int, target: float,
              most: int) -> str:  # fmt: skip
    """What ``repeats: auto`` reached: every candidate's interval under the target, or the widest."""
    widths = interval_widths(tests, roles)
    wide = {k: w for k, w in widths.items() if w is None or w >= target}
    if not wide:
        return f"repeats auto: {repeats} round(s); every speed-up interval is narrower than {100 * target:g}%"
    k = max(wide, key=lambda x: wide[x] if wide[x] is not None else float("inf"))
    shown = "no interval" if wide[k] is None else f"{100 * wide[k]:.2g}% wide"
    return (
        f"repeats auto: {repeats} round(s) of at most {most}; {k} is {shown}, not under the target "
        f"{100 * target:g}%"
    )
