"""The draws of ``harness bench verdicts``: campaigns as the verdict sees them (``PairErrors`` and
statistics), resampled from the committed builtin fixture (``verdict_calibration.json``, made by
``measure_fixture`` from real runs, defects planted in copies of each seed's reference and measured
by the real metric suite) or drawn from the spreads measured on the H200 and in the 29-step runs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import Field

from harness.analysis.energy import KINDS, PairErrors
from harness.analysis.stat_rule import StatsSample
from harness.analysis.verdict import InsituReading, stats_sample
from harness.metrics.metric import energy_from_db, in_order, judged_energies, mse_from_psnr
from harness.records import Record
from harness.scenario.verdict import VerdictRules
from harness.store import read_record

FIXTURE = Path(__file__).with_name("verdict_calibration.json")
H200 = {"video_mse": 0.03, "video_1_ssim": 0.02, "audio_error": 0.33}  # within-seed sd of log energy
H200_SOURCE = "H200 example, 3 seeds x 3 exact perturbations, bf16"
STATS5 = ("luma_mean", "luma_std", "sharpness", "motion", "audio_rms")
H200_STATS = dict(zip(STATS5, (4.6e-5, 1.7e-4, 1.3e-4, 4.7e-4, 6.7e-3), strict=True))  # relative sds
PR29 = {  # the pull request's five 29-step runs: luma mean, luma std, sharpness, motion, audio RMS
    "sdpa": (68.6, 56.2, 40.4, 23.24, 0.240),
    "floor": (69.0, 56.7, 42.3, 23.12, 0.233),
    "code_object": (69.3, 56.9, 40.6, 23.51, 0.238),
    "hip_kernel": (69.4, 57.3, 42.6, 23.51, 0.238),
    "sage_attn2_triton": (69.4, 57.2, 41.9, 22.92, 0.238),
}
SHARPNESS_LOST = 0.03
BROKEN_AUDIO = {"audio_snr": -2.8, "audio_cosine": 0.0}  # noise of the same RMS (builtin, measured)
FLOOR, EXTRA = (0, 1, 2), (3, 4)  # indices of the fixture's exact perturbations

FIXTURE_SCHEMA = "harness.verdict_calibration/2"  # 2: a pair's metric values keyed by the registry
DELAY_S = 0.005
BLUR = (1.0, 0.3)  # Gaussian sigma, blend weight
COMMANDS = [
    "harness run scenarios/verdict_calibration.yaml",
    "harness bench verdicts --measure reports/verdict_calibration/3step --write harness/bench/verdict_calibration.json",
]


class SeedFixture(Record):
    seed: int
    floors: list[PairErrors] = Field(default_factory=list)  # every noise-floor run vs the reference
    candidates: dict[str, PairErrors] = Field(default_factory=dict)  # approximate kernels
    defects: dict[str, PairErrors] = Field(default_factory=dict)  # planted, vs the reference
    exact_stats: list[StatsSample] = Field(default_factory=list)  # the reference and the floor runs
    stats: dict[str, StatsSample] = Field(default_factory=dict)  # candidates and defects (+ reencoded)


class CalibrationFixture(Record):
    schema_version: str = Field(FIXTURE_SCHEMA, alias="schema")
    commands: list[str] = Field(default_factory=lambda: list(COMMANDS))
    source: str = ""  # what the runs were (scenario, profile, preset)
    seeds: list[SeedFixture] = Field(default_factory=list)


def _defect_files(ref_mp4: Path, out: Path) -> dict[str, Path]:
    """The planted defects of one reference output, written into ``out``: ``inverted_audio`` (the track
    times -1), ``delayed_audio`` (5 ms late), ``broken_audio`` (noise of the same RMS), ``blurred`` (each
    frame blended 30 % with its Gaussian blur, sigma 1), against ``reencoded`` (the frames unchanged)."""
    import cv2

    from harness.media import iter_frames, probe, read_audio, write_av

    info = probe(ref_mp4)
    audio, rate = read_audio(ref_mp4)
    n = audio.shape[1]
    frames = list(iter_frames(ref_mp4))
    rng = np.random.default_rng(0)
    delay = round(DELAY_S * rate)
    noise = rng.normal(0.0, 1.0, audio.shape).astype(np.float32)
    noise *= float(np.sqrt(np.mean(audio.astype(np.float64) ** 2))) / float(noise.std())
    sigma, w = BLUR
    blurred = [
        np.clip((1 - w) * f + w * cv2.GaussianBlur(f, (0, 0), sigma), 0, 255).round().astype(np.uint8)
        for f in frames
    ]
    variants = {
        "reencoded": (frames, audio),
        "inverted_audio": (frames, -audio),
        "delayed_audio": (
            frames,
            np.concatenate([np.zeros((audio.shape[0], delay), np.float32), audio], 1)[:, :n],
        ),
        "broken_audio": (frames, np.clip(noise, -1, 1)),
        "blurred": (blurred, audio),
    }
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / f"{name}.mp4" for name in variants}
    for name, (fr, au) in variants.items():
        write_av(paths[name], fr, au, fps=info.fps, sample_rate=rate)
    return paths


def measure_fixture(campaign: Path, workdir: Path, say=print) -> CalibrationFixture:
    """The fixture of a calibration campaign of real builtin runs (several seeds, exact perturbations,
    approximate kernels), with the defects planted in each seed's reference measured by the suite."""
    from harness.analysis.analyze import analyze_campaign
    from harness.collect.suite import measure_pair
    from harness.compare.summary import stat_fields
    from harness.store import CampaignDir

    res = analyze_campaign(CampaignDir(Path(campaign)), progress=say)
    fx = CalibrationFixture(source=f"{res.scenario_name} / {res.profile} ({res.runner}), seeds {res.seeds}")
    primary = res.primary_runs
    for seed in res.seeds:
        sf = SeedFixture(seed=seed)
        ref = next(r for r in primary if r.seed == seed and r.arm == res.reference_arm)
        sf.exact_stats.append(stats_sample(ref))
        for c in res.comparisons:
            if c.b.seed != seed or not c.measured:
                continue
            e = PairErrors.from_comparison(c)
            e.latent_psnr = {}  # not simulated
            if c.b.role == "noise_floor":
                sf.floors.append(e)
                sf.exact_stats.append(stats_sample(c.b))
            else:
                sf.candidates[c.b.arm] = e
                sf.stats[c.b.arm] = stats_sample(c.b)
        assert ref.output is not None
        for name, path in _defect_files(Path(ref.output), Path(workdir) / str(seed)).items():
            say(f"measure {name} of seed {seed}")
            result = measure_pair(ref.output, path)
            sf.defects[name] = PairErrors.measured(name, seed, result.video, result.audio)
            sf.stats[name] = StatsSample(key=name, seed=seed, frames=result.stats_b.frames,
                                         values=stat_fields(result.stats_b))  # fmt: skip
        fx.seeds.append(sf)
    return fx


@dataclass
class Draw:
    cands: list[PairErrors]
    floors: list[PairErrors]
    cand_stats: list[StatsSample]
    exact_stats: list[StatsSample]
    insitu: InsituReading | None = None
    marks: dict = field(default_factory=dict)  # what a row checks the verdict against (a seed, a run)


def load_fixture(path: Path = FIXTURE) -> CalibrationFixture:
    return read_record(path, CalibrationFixture)


def floor_energies(psnr: float, ssim: float, snr: float) -> dict[str, float]:
    """The energies of a floor of pooled video PSNR ``psnr`` dB, SSIM ``ssim`` and audio SNR ``snr`` dB."""
    return {"video_mse": mse_from_psnr(psnr), "video_1_ssim": 1 - ssim, "audio_error": energy_from_db(snr)}


def h200_stated(rules: VerdictRules) -> VerdictRules:
    """``rules`` stating the H200 spreads (what the parametric designs model): a design with one floor
    run per seed has no interval without a stated spread."""
    return rules.model_copy(update={"floor_log_sd": dict(H200), "floor_log_sd_source": H200_SOURCE})


# --- builtin, resampled -------------------------------------------------------------------------


def metric_of(kind: str) -> str:
    """The key of the metric whose error energy is ``kind`` (video_1_ssim: the SSIM's)."""
    return KINDS[kind].metric.key


def with_audio(e: PairErrors, m: PairErrors) -> None:
    """``e`` given ``m``'s audio: every audio metric's value and the residual lag."""
    audio = {x.key for x in in_order() if x.modality == "audio"}
    e.values = {k: x for k, x in e.values.items() if k not in audio} | {
        k: x for k, x in m.values.items() if k in audio
    }
    e.audio_residual_lag = m.audio_residual_lag


def builtin_draw(fx: CalibrationFixture, rng: np.random.Generator, defect: str = "", seeds: int = 3) -> Draw:
    """One campaign from the fixture, ``seeds`` of its seeds resampled; ``defect`` planted (empty: exact)."""
    picked = rng.choice(len(fx.seeds), size=seeds, replace=False)
    d = Draw([], [], [], [])
    bad_seed = int(rng.integers(seeds))
    for n, idx in enumerate(picked):
        sf = fx.seeds[int(idx)]
        # The scenario's floor (the first three perturbations: K/V reversed, K/V in 2 chunks, the math
        # kernel); an exact candidate is one of the other exact computations (K/V in 3 chunks, reversed
        # and chunked); exact_stats holds the reference's, then one per floor run.
        i = int(rng.choice(EXTRA))
        cand, st = sf.floors[i].model_copy(deep=True), sf.exact_stats[1 + i].model_copy(deep=True)
        floors = [sf.floors[j] for j in FLOOR]
        exact = [sf.exact_stats[0]] + [sf.exact_stats[1 + j] for j in FLOOR]
        if defect in ("inverted_audio", "delayed_audio", "broken_audio"):
            with_audio(cand, sf.defects[defect])
            # the statistics moved by the defect's measured effect (defect / unchanged re-encode)
            base, bad = sf.stats["reencoded"].values, sf.stats[defect].values
            for k in STATS5:
                if st.values.get(k) is not None and base.get(k):
                    st.values[k] = st.values[k] * bad[k] / base[k]
        elif defect == "sharpness":
            st.values["sharpness"] = st.values["sharpness"] * (1 - SHARPNESS_LOST)
        elif defect == "kernel_3x":  # every judged error energy 3x the mean of the seed's floor runs
            for kind in judged_energies():
                energy = 3.0 * sum(KINDS[kind].get(f) or 0.0 for f in floors) / len(floors)
                cand.values[metric_of(kind)] = KINDS[kind].energy.value(energy)
        elif defect == "seed_specific" and n == bad_seed:  # one seed gets an approximate kernel's run
            cand = sf.candidates["sage_emul_aiter"].model_copy(deep=True)
            st = sf.stats["sage_emul_aiter"].model_copy(deep=True)
        d.cands.append(cand)
        d.floors += floors
        d.cand_stats.append(st)
        d.exact_stats += exact
    return d


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
            cand.values.update(BROKEN_AUDIO)
        d.cands.append(cand)
        d.floors += [_run(f"floor{j}", s, offset, base, sd, rng) for j in range(floor_runs)]
        center = [c * (1 + rng.normal(0, 0.005)) for c in stats_center]
        d.exact_stats += [
            _stats(f"exact{j}", s, center, stats_sd, rng) for j in range(exact_runs or floor_runs + 1)
        ]
        d.cand_stats.append(_stats("cand", s, center, stats_sd, rng))
    return d


def _run(key: str, seed: int, offset: dict, base: dict, sd: dict, rng, k: float = 1.0) -> PairErrors:
    """One run's energies: the seed's offset plus its own draw, ``k`` times for a worse kernel."""
    e = {m: base[m] * math.exp(offset[m] + rng.normal(0, sd[m])) for m in base}
    values = {metric_of(m): KINDS[m].energy.value(x * k) for m, x in e.items()}
    return PairErrors(key=key, seed=seed, frames=124, values=values, audio_residual_lag=0, audio_rate=32000)


def _stats(key: str, seed: int, center, rel_sd: dict[str, float], rng) -> StatsSample:
    vals = {k: c * (1 + rng.normal(0, rel_sd[k])) for k, c in zip(STATS5, center, strict=True)}
    return StatsSample(key=key, seed=seed, frames=124, values=vals)


def pr29_draw(rng: np.random.Generator, seeds: int, defect: str = "") -> Draw:
    """The 29-step design: one floor run per seed at the pull request's numbers (chaotic video),
    two exact runs' statistics with the spreads of its five runs."""
    runs = np.array(list(PR29.values()))
    sd, center = runs.std(axis=0, ddof=1), tuple(runs.mean(axis=0))
    return parametric_draw(rng, seeds=seeds, floor_runs=1, base=floor_energies(14.64, 0.629, 9.16), sd=H200,
                           defect=defect, stats_sd={k: s / c for k, s, c in zip(STATS5, sd, center, strict=True)},
                           stats_center=center, exact_runs=2)  # fmt: skip
