"""``harness bench verdicts``: how often each verdict rule cries wolf, and how often it catches a
planted defect, on campaigns drawn from measured distributions (seeded, reproducible).

Two sources of draws:

* **builtin, resampled**: the committed fixture (``verdict_fixture``: real builtin runs over six
  seeds, five exact perturbations each, three approximate kernels, defects planted in each
  seed's reference output). A drawn campaign takes 3 of the 6 seeds; in each, the floor is the
  three perturbations ``scenarios/e2e_3step.yaml`` runs (K/V reversed, K/V in 2 chunks, the math
  kernel) and an exact candidate is one of the two other exact computations (K/V in 3 chunks,
  reversed and in 2 chunks), as exact as the floor; a defect replaces the parts it breaks with that
  seed's measured defect (its audio metrics, a residual lag) or scales them (statistics by the
  defect's ratio to an unchanged re-encode; energies by a factor);
* **parametric**: log-normal energies and normal statistics with the spreads measured elsewhere:
  the H200 example (three seeds x three exact perturbations, bf16) and the pull request's five
  29-step runs (their statistics; one floor run at 14.64 dB, audio 9.16 dB).

Each row is one rule on one design: the **false-alarm rate** of exact candidates (the rule says
outside, or a speed word for identical kernels) or the **power** for a planted defect (the rule
says outside). ``run_bench`` returns the rows; ``markdown`` lays them out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field

from harness.analysis.energy import PairErrors, energy_from_db, mse_from_psnr
from harness.analysis.stat_rule import StatsSample, judge_stats
from harness.analysis.verdict import judge_numbers
from harness.bench.verdict_fixture import CalibrationFixture, SeedFixture
from harness.bench.verdict_speed import BenchRow, speed_rows
from harness.records import Record
from harness.scenario.verdict import VerdictRules
from harness.store import read_record
from harness.text_table import md_rows

FIXTURE = Path(__file__).with_name("verdict_calibration.json")
H200 = {"video_mse": 0.03, "video_1_ssim": 0.02, "audio_error": 0.33}  # within-seed sd of log energy
H200_STATS = {
    "luma_mean": 4.6e-5,
    "luma_std": 1.7e-4,
    "sharpness": 1.3e-4,
    "motion": 4.7e-4,
    "audio_rms": 6.7e-3,
}
PR29 = {  # the pull request's five 29-step runs: luma mean, luma std, sharpness, motion, audio RMS
    "sdpa": (68.6, 56.2, 40.4, 23.24, 0.240),
    "floor": (69.0, 56.7, 42.3, 23.12, 0.233),
    "code_object": (69.3, 56.9, 40.6, 23.51, 0.238),
    "hip_kernel": (69.4, 57.3, 42.6, 23.51, 0.238),
    "sage_attn2_triton": (69.4, 57.2, 41.9, 22.92, 0.238),
}
STATS5 = ("luma_mean", "luma_std", "sharpness", "motion", "audio_rms")
SHARPNESS_LOST = 0.03
FLOOR, EXTRA = (0, 1, 2), (3, 4)  # indices of the fixture's exact perturbations


class VerdictBench(Record):
    draws: int
    seed: int
    level: float
    rows: list[BenchRow] = Field(default_factory=list)
    seconds: float = 0.0


@dataclass
class Draw:
    cands: list[PairErrors]
    floors: list[PairErrors]
    cand_stats: list[StatsSample]
    exact_stats: list[StatsSample]


def load_fixture(path: Path = FIXTURE) -> CalibrationFixture:
    return read_record(path, CalibrationFixture)


# --- builtin, resampled -------------------------------------------------------------------------


def _held_out(sf: SeedFixture, i: int, keep: list[int]) -> tuple[PairErrors, list[PairErrors], StatsSample,
                                                                   list[StatsSample]]:  # fmt: skip
    """(candidate, floor runs, candidate's stats, exact stats): floor run ``i`` as the candidate, the floor
    runs ``keep`` as the floor."""
    cand = sf.floors[i].model_copy(deep=True)
    ref_stats, floor_stats = sf.exact_stats[0], sf.exact_stats[1:]
    stats = floor_stats[i].model_copy(deep=True)
    return cand, [sf.floors[j] for j in keep], stats, [ref_stats] + [floor_stats[j] for j in keep]


def _scaled_stats(st: StatsSample, sf: SeedFixture, defect: str) -> None:
    """The candidate's statistics moved by a defect's measured effect (defect / unchanged re-encode)."""
    base, bad = sf.stats["reencoded"].values, sf.stats[defect].values
    for k in STATS5:
        if st.values.get(k) is not None and base.get(k):
            st.values[k] = st.values[k] * bad[k] / base[k]


def builtin_draw(fx: CalibrationFixture, rng: np.random.Generator, defect: str = "", seeds: int = 3) -> Draw:
    """One campaign from the fixture (module docstring); ``defect`` planted (empty: exact)."""
    picked = rng.choice(len(fx.seeds), size=seeds, replace=False)
    d = Draw([], [], [], [])
    bad_seed = int(rng.integers(seeds))
    for n, idx in enumerate(picked):
        sf = fx.seeds[int(idx)]
        # The scenario's floor (the first three perturbations: K/V reversed, K/V in 2 chunks, the math
        # kernel); an exact candidate is one of the other exact computations (K/V in 3 chunks, reversed
        # and chunked).
        cand, floors, st, exact = _held_out(sf, int(rng.choice(EXTRA)), list(FLOOR))
        if defect in ("inverted_audio", "delayed_audio", "broken_audio"):
            m = sf.defects[defect]
            cand.audio_snr_db, cand.audio_cosine, cand.audio_spectral = (
                m.audio_snr_db,
                m.audio_cosine,
                m.audio_spectral,
            )
            cand.audio_logmel_cosine, cand.audio_residual_lag = m.audio_logmel_cosine, m.audio_residual_lag
            _scaled_stats(st, sf, defect)
        elif defect == "sharpness":
            st.values["sharpness"] = st.values["sharpness"] * (1 - SHARPNESS_LOST)
        elif defect == "kernel_3x":
            cand = _times_floor(cand, floors, 3.0)
        elif defect == "seed_specific" and n == bad_seed:  # one seed gets an approximate kernel's run
            cand = sf.candidates["sage_emul_aiter"].model_copy(deep=True)
            st = sf.stats["sage_emul_aiter"].model_copy(deep=True)
        d.cands.append(cand)
        d.floors += floors
        d.cand_stats.append(st)
        d.exact_stats += exact
    return d


def _times_floor(e: PairErrors, floors: list[PairErrors], k: float) -> PairErrors:
    """A pair whose every error energy is ``k`` times the mean of the seed's floor runs."""
    out = e.model_copy(deep=True)
    n = len(floors)
    out.video_mse = k * sum(f.video_mse or 0.0 for f in floors) / n
    out.ssim_mean = 1 - k * sum(1 - (f.ssim_mean or 1.0) for f in floors) / n
    out.audio_snr_db = -10 * math.log10(
        k * sum(energy_from_db(f.audio_snr_db or math.inf) for f in floors) / n
    )
    out.audio_spectral = k * sum(f.audio_spectral or 0.0 for f in floors) / n
    return out


# --- parametric ---------------------------------------------------------------------------------


def parametric_draw(rng: np.random.Generator, *, seeds: int, floor_runs: int, base: dict[str, float],
                    sd: dict[str, float], defect: str = "", stats_sd: dict[str, float] | None = None,
                    stats_center: tuple[float, ...] = (115.7, 73.5, 18.1, 1.69, 0.056),
                    exact_runs: int | None = None) -> Draw:  # fmt: skip
    """Log-normal energies around ``base`` (energies per kind) with within-seed sds ``sd``, seed
    effects of the same size, and normal statistics with relative sds ``stats_sd``."""
    d = Draw([], [], [], [])
    stats_sd = stats_sd or H200_STATS
    for s in range(seeds):
        offset = {k: rng.normal(0, sd[k]) for k in base}
        cand = _run("cand", s, offset, base, sd, rng, 3.0 if defect == "kernel_3x" else 1.0)
        if defect == "broken_audio":
            cand.audio_snr_db, cand.audio_cosine = -2.8, 0.0  # noise of the same RMS (builtin, measured)
        d.cands.append(cand)
        d.floors += [_run(f"floor{j}", s, offset, base, sd, rng) for j in range(floor_runs)]
        center = [c * (1 + rng.normal(0, 0.005)) for c in stats_center]
        for j in range(exact_runs or floor_runs + 1):
            d.exact_stats.append(_stats(f"exact{j}", s, center, stats_sd, rng))
        d.cand_stats.append(_stats("cand", s, center, stats_sd, rng))
    return d


def _run(key: str, seed: int, offset: dict, base: dict, sd: dict, rng, k: float = 1.0) -> PairErrors:
    """One run's energies: the seed's offset plus its own draw, ``k`` times for a worse kernel."""
    e = {m: base[m] * math.exp(offset[m] + rng.normal(0, sd[m])) for m in base}
    return PairErrors(key=key, seed=seed, frames=124, video_mse=e["video_mse"] * k,
                      ssim_mean=1 - e["video_1_ssim"] * k, audio_snr_db=-10 * math.log10(e["audio_error"] * k),
                      audio_residual_lag=0, audio_rate=32000)  # fmt: skip


def _stats(key: str, seed: int, center, rel_sd: dict[str, float], rng) -> StatsSample:
    vals = {k: c * (1 + rng.normal(0, rel_sd[k])) for k, c in zip(STATS5, center, strict=True)}
    return StatsSample(key=key, seed=seed, frames=124, values=vals)


def pr29_draw(rng: np.random.Generator, seeds: int, defect: str = "") -> Draw:
    """The 29-step design: one floor run per seed at the pull request's numbers (chaotic video),
    two exact runs' statistics with the spreads of its five runs."""
    sd = np.array(list(PR29.values())).std(axis=0, ddof=1)
    center = tuple(np.array(list(PR29.values())).mean(axis=0))
    base = {"video_mse": mse_from_psnr(14.64), "video_1_ssim": 1 - 0.629, "audio_error": energy_from_db(9.16)}
    d = parametric_draw(rng, seeds=seeds, floor_runs=1, base=base, sd=H200, defect=defect,
                        stats_sd={k: s / c for k, s, c in zip(STATS5, sd, center, strict=True)},
                        stats_center=center, exact_runs=2)  # fmt: skip
    return d


# --- rules --------------------------------------------------------------------------------------


def old_stats_rule(d: Draw) -> bool:
    """The rule this replaced: outside min..max of the seed's exact runs widened by 2 % of their mean."""
    for c in d.cand_stats:
        for k in STATS5:
            xs = [e.values[k] for e in d.exact_stats if e.seed == c.seed and e.values.get(k) is not None]
            if xs:
                pad = 0.02 * abs(sum(xs) / len(xs))
                if not min(xs) - pad <= c.values[k] <= max(xs) + pad:
                    return True
    return False


def verdict_outside(d: Draw, rules: VerdictRules) -> bool:
    v = judge_numbers("c", d.cands, d.floors, cand_stats=d.cand_stats, exact_stats=d.exact_stats, rules=rules)
    return v.word == "outside"


def part_outside(part: str) -> Callable[[Draw, VerdictRules], bool]:
    def rule(d: Draw, rules: VerdictRules) -> bool:
        if part == "statistics":
            return judge_stats(d.cand_stats, d.exact_stats, rules).word == "outside"
        v = judge_numbers("c", d.cands, d.floors, rules=rules)
        if part == "audio":
            return any(r.word == "outside" for r in v.energy if r.metric.startswith("audio")) or bool(
                v.audio_lag
            )
        return any(r.word == "outside" for r in v.energy if r.metric.startswith(part))

    return rule


def run_bench(draws: int = 500, seed: int = 0, fixture: Path = FIXTURE,
              rules: VerdictRules | None = None) -> VerdictBench:  # fmt: skip
    """Every row (module docstring) on ``draws`` seeded draws each."""
    import time

    t0 = time.perf_counter()
    rules = rules or VerdictRules()
    fx = load_fixture(fixture)
    out = VerdictBench(draws=draws, seed=seed, level=rules.alpha)
    b3 = "builtin, 3 seeds x 3 floor runs (resampled)"
    h1 = "H200 spreads, 1 seed x 1 floor run (the 3-step design)"
    h3 = "H200 spreads, 3 seeds x 3 floor runs"
    rows: list[tuple[str, str, str, Callable, Callable | None]] = [
        ("verdict (any part outside)", b3, "false alarm", lambda r: builtin_draw(fx, r), verdict_outside),
        ("video energy", b3, "false alarm", lambda r: builtin_draw(fx, r), part_outside("video")),
        ("audio energy and lag", b3, "false alarm", lambda r: builtin_draw(fx, r), part_outside("audio")),
        ("statistics", b3, "false alarm", lambda r: builtin_draw(fx, r), part_outside("statistics")),
        ("verdict (any part outside)", h1, "false alarm",
         lambda r: parametric_draw(r, seeds=1, floor_runs=1, base=_h200_base(), sd=H200), verdict_outside),
        ("verdict (any part outside)", h3, "false alarm",
         lambda r: parametric_draw(r, seeds=3, floor_runs=3, base=_h200_base(), sd=H200), verdict_outside),
        ("statistics", "29-step spreads, 1 seed x 2 exact runs", "false alarm", lambda r: pr29_draw(r, 1),
         part_outside("statistics")),
        ("statistics", "29-step spreads, 3 seeds x 2 exact runs", "false alarm", lambda r: pr29_draw(r, 3),
         part_outside("statistics")),
        ("verdict: a seed-specific failure", b3, "power", lambda r: builtin_draw(fx, r, "seed_specific"),
         verdict_outside),
        ("verdict: broken audio, chaotic video floor", "29-step design, 1 seed", "power",
         lambda r: pr29_draw(r, 1, "broken_audio"), verdict_outside),
        ("verdict: audio 5 ms late", b3, "power", lambda r: builtin_draw(fx, r, "delayed_audio"), verdict_outside),
        ("verdict: inverted audio", b3, "power", lambda r: builtin_draw(fx, r, "inverted_audio"), verdict_outside),
        (f"verdict: {100 * SHARPNESS_LOST:g}% of sharpness lost", b3, "power",
         lambda r: builtin_draw(fx, r, "sharpness"), verdict_outside),
        ("verdict: a kernel at 3x the floor's energy", b3, "power", lambda r: builtin_draw(fx, r, "kernel_3x"),
         verdict_outside),
        ("verdict: a kernel at 3x the floor's energy", b3.replace("3 seeds", "6 seeds"), "power",
         lambda r: builtin_draw(fx, r, "kernel_3x", seeds=6), verdict_outside),
        ("verdict: a kernel at 3x the floor's energy", h3, "power",
         lambda r: parametric_draw(r, seeds=3, floor_runs=3, base=_h200_base(), sd=H200, defect="kernel_3x"),
         verdict_outside),
    ]  # fmt: skip
    for i, (rule, design, measure, draw, judge) in enumerate(rows):
        rng = np.random.default_rng([seed, i])
        hits = old = 0
        for _ in range(draws):
            d = draw(rng)
            hits += judge(d, rules)
            if rule == "statistics":
                old += old_stats_rule(d)
        out.rows.append(BenchRow(rule=rule, design=design, measure=measure, rate=hits / draws, draws=draws,
                                 old_rule=old / draws if rule == "statistics" else None))  # fmt: skip
    out.rows += speed_rows(draws, seed, rules)
    out.seconds = time.perf_counter() - t0
    return out


def _h200_base() -> dict[str, float]:
    """The H200 example's floor energies: 42.5 dB, SSIM 0.9931, audio 15.3 dB."""
    return {
        "video_mse": mse_from_psnr(42.46),
        "video_1_ssim": 1 - 0.9931,
        "audio_error": energy_from_db(15.3),
    }


def markdown(b: VerdictBench) -> str:
    head = ["rule", "design", "measure", "rate", "the rule it replaced"]
    rows = [
        [
            r.rule,
            r.design,
            r.measure,
            f"{100 * r.rate:.1f}%",
            "" if r.old_rule is None else f"{100 * r.old_rule:.1f}%",
        ]
        for r in b.rows
    ]
    lines = md_rows(head, rows)
    lines.append("")
    lines.append(
        f"{b.draws} draws per row (seed {b.seed}), level {b.level:g}: a false-alarm rate should be at or under it; "
        f"{b.seconds:.1f} s"
    )
    return "\n".join(lines) + "\n"
