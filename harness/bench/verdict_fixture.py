"""The measured distributions behind ``harness bench verdicts``: a campaign of real runs (the builtin
pipeline over several seeds, exact perturbations and approximate kernels) and planted defects made
from each seed's reference output, reduced to the summary numbers a verdict reads.

``measure_fixture(campaign, workdir)`` analyses the campaign (``analysis.analyze``), then writes,
per seed, copies of the reference's output with one defect each and measures them against the
reference with the real metric suite (``collect.suite``):

* ``inverted_audio``: the audio track times -1;
* ``delayed_audio``: the audio 5 ms late (zeros before, the end cut);
* ``broken_audio``: noise of the same RMS instead of the audio;
* ``blurred``: every frame blended 30 % with its Gaussian blur (sigma 1), against ``reencoded``,
  the same frames encoded again unchanged: the sharpness lost is the ratio of the two.

The result (``CalibrationFixture``) is committed as ``harness/bench/verdict_calibration.json``,
with the commands that made it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import Field

from harness.analysis.energy import PairErrors
from harness.analysis.stat_rule import StatsSample
from harness.analysis.verdict import stats_sample
from harness.records import Record

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
    """The planted defects of one reference output (module docstring), written into ``out``."""
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
    paths = {}
    for name, (fr, au) in variants.items():
        paths[name] = out / f"{name}.mp4"
        write_av(paths[name], fr, au, fps=info.fps, sample_rate=rate)
    return paths


def measure_fixture(campaign: Path, workdir: Path, say=print) -> CalibrationFixture:
    """The fixture of a calibration campaign (module docstring)."""
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
