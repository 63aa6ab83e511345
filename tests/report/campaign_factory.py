"""Small real campaigns for the compare and report tests (helpers, imported by the tests).

Runs are laid out exactly as the runners leave them (run.json, timing.json, attn_calls.json,
stdout/stderr logs, a real H.264 + AAC output.mp4 written by harness.media.write_av), so the
tests exercise the same decoding and metric path as a real campaign.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.executors.process import emulated_backend
from harness.records import (
    AttnCallsRecord,
    DirectCheck,
    RankCalls,
    Role,
    RunRecord,
    RunSpec,
    RunStatus,
    StepTiming,
    TimingRecord,
)
from harness.run_keys import run_key
from harness.safe_write import atomic_write_text
from harness.store import (
    ATTN_CALLS_JSON,
    OUTPUT_LOSSLESS,
    TIMING_JSON,
    ArmStatus,
    CampaignDir,
    CampaignRecord,
    RunDir,
    sha256_file,
    utcnow,
    write_record,
)

H, W, FRAMES, RATE, FPS = 64, 96, 9, 32000, 24
ARTIFACTS = Path(__file__).parent / ".artifacts"  # git-ignored by its own .gitignore


def base_content(seed: int, frames: int = FRAMES) -> tuple[list[np.ndarray], np.ndarray]:
    """A moving gradient scene and a stereo chord, determined by the seed."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, 3)
    out = []
    for t in range(frames):
        rgb = np.stack(
            [
                128 + 100 * np.sin(xx / 9.0 + t * 0.4 + phase[0]),
                128 + 100 * np.sin(yy / 7.0 - t * 0.3 + phase[1]),
                128 + 90 * np.sin((xx + yy) / 11.0 + phase[2]),
            ],
            axis=-1,
        )
        x0 = 8 + 6 * t
        rgb[20:40, x0 : x0 + 16] = (250, 250, 30)
        out.append(np.clip(rgb, 0, 255).astype(np.uint8))
    n = int(RATE * frames / FPS)
    tt = np.arange(n) / RATE
    f0 = 220.0 * (1 + seed % 3)
    left = 0.3 * np.sin(2 * np.pi * f0 * tt) + 0.1 * np.sin(2 * np.pi * 3.1 * f0 * tt)
    right = 0.3 * np.sin(2 * np.pi * 1.5 * f0 * tt + 0.5)
    return out, np.stack([left, right]).astype(np.float32)


def perturb(
    frames: list[np.ndarray], audio: np.ndarray, level: float, salt: int, audio_level: float | None = None
):
    """Add noise of ``level`` grey levels to the video and ``audio_level`` (default level/1000) to the audio."""
    rng = np.random.default_rng(1000 + salt)
    if level > 0:
        frames = [
            np.clip(f.astype(np.float32) + rng.normal(0, level, f.shape), 0, 255).astype(np.uint8)
            for f in frames
        ]
    audio_level = level / 1000.0 if audio_level is None else audio_level
    if audio_level > 0:
        audio = np.clip(audio + rng.normal(0, audio_level, audio.shape).astype(np.float32), -1, 1).astype(
            np.float32
        )
    return frames, audio


@dataclass
class ArmSpec:
    name: str
    role: str = "candidate"
    attn_type: str | None = None
    kv_reversed: bool = False
    kv_chunks: int = 1
    status: str = "ok"
    reason: str | None = None
    log_tail: str = ""
    noise: float = 0.0  # grey levels of added noise (0: same content as the reference)
    audio_noise: float | None = None  # amplitude of added audio noise (default noise / 1000)
    steps: list[float] = field(default_factory=lambda: [2.0, 1.0, 1.0])
    pipeline_total_s: float | None = None
    fallbacks: int = 0
    latents: str | None = None  # "npy" or "pt": save per-step latents
    write_run_json: bool = True  # False: the arm never got a run folder (campaign.json only)
    write_output: bool = True
    lossless: bool = False  # also write output_lossless.mkv (the twin the builtin runner writes by default)
    repeats: int | None = None  # runs per seed (default: the campaign's)
    jitter: float = 0.0  # relative sd of the step times from one repeat to the next
    direct_check: DirectCheck | None = None  # every rank's first-call check (None: not checked)


def write_run(
    run_path: Path,
    arm: ArmSpec,
    *,
    seed: int = 42,
    scenario: str = "tiny",
    multi_seed: bool = False,
    content: tuple[list[np.ndarray], np.ndarray] | None = None,
    salt: int = 0,
    copy_output_from: RunDir | None = None,
    repeat: int = 1,
    steps: list[float] | None = None,
) -> RunDir:
    """One run directory as a runner leaves it.

    ``copy_output_from``: reuse another run's output.mp4 byte for byte (what a deterministic
    pipeline gives for the same arm); encoding tiny frames twice with x264 is not always
    bit-identical, so the tests that need identical outputs copy the file.
    """
    run = RunDir(run_path)
    run.path.mkdir(parents=True, exist_ok=True)
    attn_type = arm.attn_type or ("torch_sdpa" if arm.role != "candidate" else arm.name)
    spec = RunSpec(
        scenario=scenario,
        runner="builtin",
        arm=arm.name,
        seed=seed,
        attn_type=attn_type,
        kv_reversed=arm.kv_reversed,
        kv_chunks=arm.kv_chunks,
        role=Role(arm.role),
        multi_seed=multi_seed,
        repeat=repeat,
    )
    steps = steps if steps is not None else arm.steps
    outputs = {}
    if arm.status == "ok":
        frames, audio = content if content is not None else base_content(seed)
        frames, audio = perturb(frames, audio, arm.noise, salt, arm.audio_noise)
        if copy_output_from is not None:
            shutil.copyfile(copy_output_from.output, run.output)
        elif arm.write_output:
            from harness.media import write_av

            twin = run.file(OUTPUT_LOSSLESS) if arm.lossless else None
            # ultrafast: x264's lookahead (mbtree) is not bit-reproducible on tiny frames; ultrafast is
            write_av(
                run.output, frames, audio, fps=FPS, sample_rate=RATE, preset="ultrafast", lossless_copy=twin
            )
        if run.output.exists():
            outputs["output.mp4"] = sha256_file(run.output)
        total = arm.pipeline_total_s if arm.pipeline_total_s is not None else sum(steps) + 0.5
        timing = TimingRecord(
            source="builtin",
            steps=[StepTiming(index=i + 1, seconds=s) for i, s in enumerate(steps)],
            stages={"dit": sum(steps), "vae_decode": 0.3},
            pipeline_total_s=total,
            ranks=["0", "1"],
        )
        write_record(run.file(TIMING_JSON), timing)
        ranks = {
            str(r): RankCalls(
                calls={
                    attn_type: 60 - (arm.fallbacks if r == 1 else 0),
                    **({"torch_sdpa": arm.fallbacks} if r == 1 and arm.fallbacks else {}),
                },
                fallbacks={"torch_sdpa": arm.fallbacks} if r == 1 and arm.fallbacks else {},
                direct_check=arm.direct_check,
            )
            for r in (0, 1)
        }
        calls = AttnCallsRecord(requested=attn_type, kv_reversed=arm.kv_reversed, ranks=ranks)
        write_record(run.file(ATTN_CALLS_JSON), calls)
        outputs |= {
            name: sha256_file(run.file(name)) for name in (TIMING_JSON, ATTN_CALLS_JSON)
        }  # as recorded
        if arm.latents:
            save_latents(run.path, seed, arm.noise, salt, arm.latents, len(arm.steps))
    valid = None
    reasons: list[str] = []
    if arm.status == "ok":
        valid, reasons = calls.validity()
    record = RunRecord(
        spec=spec,
        spec_hash=spec.spec_hash(),
        status=RunStatus(arm.status),
        reason=arm.reason,
        log_tail=arm.log_tail,
        exit_code=0 if arm.status == "ok" else (1 if arm.status == "failed" else None),
        started_at=utcnow(),
        ended_at=utcnow(),
        outputs=outputs,
        valid=valid,
        invalid_reasons=reasons,
        emulated=emulated_backend(attn_type),  # as the executor records it
    )
    atomic_write_text(run.file("stdout.log"), f"running {arm.name}\n")
    atomic_write_text(run.file("stderr.log"), arm.log_tail)
    run.write(record)
    return run


def latent_array(seed: int, step: int, noise: float, salt: int) -> np.ndarray:
    rng = np.random.default_rng(seed * 100 + step)
    base = rng.normal(0, 1, (4, 3, 8, 12)).astype(np.float32)
    if noise > 0:
        base = base + np.random.default_rng(7000 + salt * 10 + step).normal(
            0, noise * 1e-3 * step, base.shape
        ).astype(np.float32)
    return base


def save_latents(run_path: Path, seed: int, noise: float, salt: int, kind: str, steps: int) -> None:
    folder = run_path / "latents"
    folder.mkdir(exist_ok=True)
    for step in range(1, steps + 1):
        arr = latent_array(seed, step, noise, salt)
        if kind == "npy":
            np.save(folder / f"step_{step:03d}.npy", arr)
        elif kind == "npz":  # the builtin pipeline's layout: video and audio latents plus the sigmas
            audio = arr[0, 0].reshape(-1, 4) * 0.5
            sigma = np.float64(1.0 / step)
            np.savez(
                folder / f"step_{step:03d}.npz", video=arr, audio=audio, sigma_video=sigma, sigma_audio=sigma
            )
        else:
            import torch

            torch.save(torch.from_numpy(arr), folder / f"step_{step:03d}.pt")


def make_campaign(
    root: Path,
    arms: list[ArmSpec],
    *,
    seeds: tuple[int, ...] = (42,),
    scenario: str = "tiny",
    env: dict | None = None,
    repeats: int = 1,
    verdict: dict | None = None,
) -> CampaignDir:
    """Runs in the executor's order (repeats interleaved); repeats 2.. copy repeat 1's output
    byte for byte (a deterministic pipeline) and jitter the step times by ``arm.jitter``."""
    camp = CampaignDir(root / scenario / "c1")
    multi = len(seeds) > 1
    statuses = []
    contents = {seed: base_content(seed) for seed in seeds}
    for repeat in range(1, repeats + 1):
        for seed in seeds:
            for salt, arm in enumerate(arms):
                if repeat > (arm.repeats or repeats):
                    continue
                key = run_key(arm.name, seed if multi else None, repeat)
                attn_type = arm.attn_type or ("torch_sdpa" if arm.role != "candidate" else arm.name)
                steps = list(arm.steps)
                first = None
                if repeat > 1:
                    rng = np.random.default_rng(seed * 1000 + salt * 10 + repeat)
                    steps = [x * (1 + arm.jitter * rng.standard_normal()) for x in steps]
                    first = camp.run(run_key(arm.name, seed if multi else None, 1))
                    first = first if first.output.exists() else None
                if arm.write_run_json:
                    write_run(camp.run(key).path, arm, seed=seed, scenario=scenario, multi_seed=multi,
                              content=contents[seed], salt=salt + 10 * seed, copy_output_from=first,
                              repeat=repeat, steps=steps)  # fmt: skip
                statuses.append(
                    ArmStatus(
                        key=key,
                        arm=arm.name,
                        seed=seed,
                        role=arm.role,
                        attn_type=attn_type,
                        kv_reversed=arm.kv_reversed,
                        status=RunStatus(arm.status),
                        reason=arm.reason,
                        repeat=repeat,
                    )  # fmt: skip
                )
    rec = CampaignRecord(
        campaign_id="c1",
        scenario_name=scenario,
        scenario_file=f"scenarios/{scenario}.yaml",
        scenario={
            "name": scenario,
            "runner": "builtin",
            "seeds": list(seeds),
            "arms": [a.name for a in arms],
            **({"verdict": verdict} if verdict else {}),
        },
        profile="3step",
        runner="builtin",
        created_at=utcnow(),
        harness_version="0.1.0",
        env=env
        if env is not None
        else {"hostname": "test-host", "python": "3.11", "torch": {"version": "2.x"}},
        arms=statuses,
    )
    camp.write(rec)
    return camp


def copy_campaign(camp: CampaignDir, root: Path) -> CampaignDir:
    """A copy of ``camp`` (its runs, records, report and cache) at the same place under ``root``: a
    campaign built once for a module, handed to each test that changes it."""
    copy = CampaignDir(root / camp.path.relative_to(camp.path.parents[1]))
    shutil.copytree(camp.path, copy.path)
    return copy


def standard_arms(bad_text: str = "") -> list[ArmSpec]:
    """Reference, noise floor, a close and a far candidate, a failed and a skipped arm."""
    return [
        ArmSpec("torch_sdpa", role="reference", steps=[2.0, 1.0, 1.0]),
        ArmSpec("torch_sdpa_kv_reversed", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=3.0,
                steps=[2.0, 1.02, 1.0]),
        ArmSpec("sage_close", noise=0.3, audio_noise=0.0, steps=[1.8, 0.8, 0.82],
                direct_check=DirectCheck(q_shape=[1, 24, 4096, 128], identical=True)),
        ArmSpec("sage_far", noise=12.0, steps=[1.5, 0.5, 0.5], fallbacks=3,
                direct_check=DirectCheck(q_shape=[1, 24, 4096, 128], identical=False, max_abs_diff=0.0039,
                                         op_repeatable=True)),
        ArmSpec("broken", status="failed", reason=f"exit code 1 {bad_text}".strip(),
                log_tail=f"Traceback ...\nRuntimeError: kernel failed {bad_text}\n"),
        ArmSpec("sage_triton", status="skipped", reason="backend unavailable: no GPU here", write_run_json=False),
    ]  # fmt: skip


def near_and_far_arms() -> list[ArmSpec]:
    """Reference, its K/V-reversed floor, a candidate near it and one far off (their worst frames
    fall where the noise puts them, not on the evenly spaced rows)."""
    return [
        ArmSpec("torch_sdpa", role="reference"),
        ArmSpec("nf", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=1.0),
        ArmSpec("near", noise=4.0),
        ArmSpec("far", noise=12.0),
    ]


def keep_artifact(src: Path, name: str) -> Path:
    """Copy a test output (a screenshot) to tests/report/.artifacts/ for people and CI to look at."""
    ARTIFACTS.mkdir(exist_ok=True)
    ignore = ARTIFACTS / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    dest = ARTIFACTS / name
    shutil.copyfile(src, dest)
    return dest


def report_digest(folder: Path) -> dict[str, str]:
    """Every report file (and asset) of a campaign by content."""
    import hashlib

    from harness.report import REPORT_FILES

    out = {}
    for name in REPORT_FILES:
        p = folder / name
        for f in [p] if p.is_file() else sorted(p.rglob("*")) if p.is_dir() else []:
            if f.is_file():
                out[str(f.relative_to(folder))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out
