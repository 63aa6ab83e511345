"""The speed tests of one campaign: each arm against the reference, runs as samples, paired where the
design pairs them, corrected by family (Holm), and the stopping rule of ``repeats: auto``.

Design of a test (``compare.significance``): the arm's and the reference's runs share every
(seed, repeat): **paired** (each round ran both side by side); they share seeds only (e.g. a
noise floor that runs once per seed): **blocked by seed**; else **unpaired**.

Holm's families: the p-values of the tests (each arm x DiT s/step and pipeline total) are adjusted
together within one family of arms only: the candidates' tests are the report's question, and the
noise floors, schedules (hybrids) and shadowed copies of the reference answer other questions, each
in a family of its own, so that they neither dilute nor lend power to the candidates' words. An
arm's family comes from ``families`` (``speed_families``), else from its role.
"""

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
    """arm -> Holm family: a schedule (hybrid) arm in ``schedules``, a shadowed copy of the reference
    (shadowed runs whose own attention is exact) in ``shadowed copies``, any other by its role
    (``candidates``, ``noise floors``; an unknown role is a family of its own name)."""
    out = {arm: ROLE_FAMILIES.get(role, role) for arm, role in roles.items()}
    out.update(dict.fromkeys((a for a in schedules if a in roles), SCHEDULES))
    out.update(dict.fromkeys((a for a in shadowed_copies if a in roles), SHADOWED_COPIES))
    return out


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
        if blocked.speedup_ci is not None:  # no within-seed df, or zero spread within seeds: unpaired
            return blocked
    return compare_samples(
        [_value(r, timing) for r in ref], [_value(r, timing) for r in arm], what=what, **kw
    )


def campaign_speed_tests(runs: Sequence[RunSummary], reference_arm: str | None, rules: VerdictRules,
                         families: Mapping[str, str] | None = None) -> dict[str, dict[str, SpeedTest]]:  # fmt: skip
    """arm -> timing -> test, for every arm but the reference; Holm within each family of arms.

    ``families``: arm -> family name (``speed_families``); an arm it leaves out (or all, when None)
    is in the family of its runs' role."""
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
    """'arm timing' -> relative width of the speed-up's interval ((hi - lo) / speed-up; None: no
    interval yet; 0 for zero spread: more runs of identical timings narrow nothing), for the arms
    whose timing is a baseline (candidates)."""
    out: dict[str, float | None] = {}
    for arm, by in tests.items():
        if roles.get(arm) != "candidate":
            continue
        for timing, t in by.items():
            if not t.n_arm:  # never ran here (skipped): nothing to narrow
                continue
            ci, s = t.speedup_ci, t.speedup
            if t.word == "zero spread":
                out[f"{arm} {TIMINGS[timing]}"] = 0.0
                continue
            out[f"{arm} {TIMINGS[timing]}"] = (ci[1] - ci[0]) / s if ci and s else None
    return out


def auto_note(tests: dict[str, dict[str, SpeedTest]], roles: dict[str, str], repeats: int, target: float,
              most: int) -> str:  # fmt: skip
    """What ``repeats: auto`` reached: every candidate's interval under the target, or the widest."""
    widths = interval_widths(tests, roles)
    wide = {k: w for k, w in widths.items() if w is None or w >= target}
    if not wide:
        flat = sum(
            t.word == "zero spread"
            for a, by in tests.items()
            if roles.get(a) == "candidate"
            for t in by.values()
        )
        zero = f" ({flat} with zero spread: no interval, nothing to narrow)" if flat else ""
        return f"repeats auto: {repeats} round(s); every speed-up interval is narrower than {100 * target:g}%{zero}"
    k = max(wide, key=lambda x: wide[x] if wide[x] is not None else float("inf"))
    shown = "no interval" if wide[k] is None else f"{percent_text(wide[k])} wide"
    return (
        f"repeats auto: {repeats} round(s) of at most {most}; {k} is {shown}, not under the target "
        f"{100 * target:g}%"
    )
