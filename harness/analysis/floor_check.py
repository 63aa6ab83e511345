"""The noise floor checked before it judges, per seed, each floor run against the others (docs/verdicts.md):
one identical to the reference is left out, so is an outlier beyond ``max(log OUTLIER_FACTOR, OUTLIER_Z *
sigma * sqrt(1 + 1/(k - 1)))`` of the others' mean (three or more runs); two that disagree: invalid."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from pydantic import Field

from harness.analysis.energy import KINDS, PairErrors, is_identical
from harness.number_format import ratio_text
from harness.records import Record
from harness.rule import pooled_sd
from harness.safe_math import safe_exp

OUTLIER_FACTOR = 5.0  # a floor run within this factor of the others is never left out
OUTLIER_Z = 4.0  # nor within this many sds of the run-to-run spread
# The kinds a floor run is checked by: its video. Exact runs' audio energies spread over two orders of
# magnitude on the builtin pipeline (sd 1.3 of the log), so three runs cannot tell an outlier there:
# with audio checked too, 57 % of intact builtin floors (3 seeds x 3 runs) lost a run; by video, none.
CHECKED_KINDS = ("video_mse", "video_1_ssim")


class SeedFloorCheck(Record):
    seed: int | None = None
    kept: list[str] = Field(default_factory=list)  # floor run keys that judge
    left_out: dict[str, str] = Field(default_factory=dict)  # key -> why
    invalid: str = ""  # why the seed has no usable floor ("" when it has one)
    checked: bool = False  # False: fewer than two floor runs, nothing to check against


class FloorCheck(Record):
    seeds: list[SeedFloorCheck] = Field(default_factory=list)
    findings: list[str] = Field(default_factory=list)  # one line per run left out or seed invalid

    def seed(self, seed: int | None) -> SeedFloorCheck | None:
        return next((s for s in self.seeds if s.seed == seed), None)


def _logs(runs: Sequence[PairErrors], kind: str) -> dict[str, float]:
    get = KINDS[kind].get
    return {r.key: math.log(x) for r in runs if (x := get(r)) is not None and math.isfinite(x) and x > 0}


def _worst(seed_runs: list[PairErrors], rest: dict, kind: str) -> tuple[str, float, float] | None:
    """(key, log factor, log margin) of the run furthest outside the others' spread, or None."""
    logs = _logs(seed_runs, kind)
    if len(logs) < 2:
        return None
    other_groups = [list(_logs(rs, kind).values()) for rs in rest.values()]
    worst = None
    for key, x in logs.items():
        others = [v for k, v in logs.items() if k != key]
        if len(others) == 1:  # two runs: the spread must come from other seeds
            sigma = pooled_sd(other_groups)[0]
            if sigma is None:
                continue
        else:
            sigma = pooled_sd([others, *other_groups])[0]
        d = x - statistics.fmean(others)
        margin = math.log(OUTLIER_FACTOR)
        margin = (
            max(margin, OUTLIER_Z * sigma * math.sqrt(1 + 1 / len(others))) if sigma is not None else margin
        )
        # ties go to the larger key, so the order of the runs never matters
        if abs(d) > margin and (
            worst is None or (abs(d) / margin, key) > (abs(worst[1]) / worst[2], worst[0])
        ):
            worst = (key, d, margin)
    return worst


def check_floor(floors: Sequence[PairErrors]) -> FloorCheck:
    """Every seed's floor runs (each against its seed's reference) checked (module docstring)."""
    by_seed: dict = {}
    for f in floors:
        by_seed.setdefault(f.seed, []).append(f)
    out = FloorCheck()
    kept: dict = {}
    for seed, runs in by_seed.items():
        sc = SeedFloorCheck(seed=seed, checked=len(runs) >= 2)
        for r in runs:
            if is_identical(r):
                sc.left_out[r.key] = "identical to the reference (no perturbation)"
        kept[seed] = [r for r in runs if r.key not in sc.left_out]
        out.seeds.append(sc)
    before = dict(kept)  # other seeds lend their spread as found, so the order of seeds never matters
    for sc in out.seeds:  # leave one out, the worst first, until every run is within the others' spread
        seed = sc.seed
        where = f"seed {seed}" if seed is not None else "the floor"
        rest = {s: rs for s, rs in before.items() if s != seed}
        while len(kept[seed]) >= 2 and not sc.invalid:
            found = [(k, w) for k in CHECKED_KINDS if (w := _worst(kept[seed], rest, k)) is not None]
            if not found:
                break
            # the run furthest outside its margin, in any kind (a noisy kind's big factor is no evidence)
            kind, (key, d, margin) = max(found, key=lambda t: (abs(t[1][1]) / t[1][2], t[1][0], t[0]))
            label, factor = KINDS[kind].energy.label, ratio_text(safe_exp(d))
            if len(kept[seed]) == 2:
                a, b = (r.key for r in kept[seed])
                sc.invalid = (
                    f"its two floor runs ({a}, {b}) disagree: {label} {ratio_text(safe_exp(abs(d)))} apart "
                    f"(margin {ratio_text(safe_exp(margin))}): which one is wrong cannot be told"
                )
                break
            sc.left_out[key] = (
                f"{label} {factor} the other floor runs' of {where} (margin {ratio_text(safe_exp(margin))}): "
                "not exact noise (another kernel, another seed?)"
            )
            kept[seed] = [r for r in kept[seed] if r.key != key]
        if not kept[seed] and not sc.invalid:
            sc.invalid = "every floor run was left out"
        sc.kept = [] if sc.invalid else [r.key for r in kept[seed]]
        out.findings += [f"floor run {k} left out: {why}" for k, why in sc.left_out.items()]
        if sc.invalid:
            out.findings.append(f"{where}: floor invalid: {sc.invalid}")
    return out
