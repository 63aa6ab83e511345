"""What the harness costs on a real LightX2V run: DiT s/step with the launcher's instrumentation vs without.

``harness lightx2v overhead SCENARIO --profile P --arm A --repeats N`` runs one arm 2N times, each
a torchrun process of its own with the same config and seed, alternating in ABBA order so that
drift (clocks, caches) falls on both sides:

* ``launcher``: the command the harness runs for the arm (counting every attention call per rank,
  rank logs, the registry wrapped; K/V reversal is refused here, it is a different computation);
* ``bare``: the same launcher module with ``--bare``: LightX2V runs uninstrumented, with only what
  it needs to run at all here (the CPU platform when ``PLATFORM=cpu``; for a synthetic checkpoint,
  the relaxed released-size checks). For real weights that is ``torchrun -m lightx2v.infer``.

s/step per run is the mean of DiT steps 2..N from LightX2V's own profiler lines. The two sets of
per-run values are compared with Welch's t-test; "costs" is only said when it is significant.

Where run-to-run noise hides a small cost, ``wrapper_cost`` times the one thing the launcher adds
to every attention call (the counting subclass's ``apply``) against the plain class, in process,
interleaved; multiplied by the calls per DiT step it bounds the per-step cost (a derived figure,
labelled as such).
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import time
from pathlib import Path

from pydantic import Field

from harness.errors import HarnessError
from harness.plan import build_plan
from harness.records import Record
from harness.runners import get_runner
from harness.runners.lightx2v.runner import (
    LAUNCH_MODULE,
    infer_args,
    synthetic_args,
    timing_from_run_dir,
    torchrun_prefix,
)
from harness.scenario import load_scenario

MODES = ("launcher", "bare")
SIGNIFICANCE = 0.05


class OverheadRun(Record):
    mode: str
    repeat: int
    s_per_step: float | None
    step_seconds: list[float] = Field(default_factory=list)
    exit_code: int
    run_dir: str


class WrapperCost(Record):
    """Seconds per attention call: the counting subclass against the plain backend (a no-op apply)."""

    plain_s: list[float] = Field(default_factory=list)
    counted_s: list[float] = Field(default_factory=list)
    calls_per_sample: int = 0

    @property
    def added_s(self) -> float:
        return statistics.fmean(self.counted_s) - statistics.fmean(self.plain_s)

    def line(self, calls_per_step: int | None = None, s_per_step: float | None = None) -> str:
        n = len(self.plain_s)
        text = (
            f"counting wrapper, in process: {statistics.fmean(self.counted_s) * 1e6:.2f} ± "
            f"{statistics.stdev(self.counted_s) * 1e6:.2f} µs per call against {statistics.fmean(self.plain_s) * 1e6:.2f} ± "
            f"{statistics.stdev(self.plain_s) * 1e6:.2f} µs unwrapped (n={n} samples of {self.calls_per_sample} calls each): "
            f"+{self.added_s * 1e6:.2f} µs per call"
        )
        if calls_per_step and s_per_step:
            share = self.added_s * calls_per_step / s_per_step * 100
            text += (
                f"; x {calls_per_step} calls per DiT step per rank / {s_per_step:.4f} s per step = "
                f"{share:.4f}% of a step (derived from the per-call cost, not a timing of the run)"
            )
        return text


class OverheadResult(Record):
    schema_version: str = Field("harness.lightx2v_overhead/1", alias="schema")
    scenario: str
    profile: str | None
    arm: str
    attn_type: str
    nproc: int
    repeats: int
    runs: list[OverheadRun] = Field(default_factory=list)
    mean: dict[str, float] = Field(default_factory=dict)
    sd: dict[str, float] = Field(default_factory=dict)
    n: dict[str, int] = Field(default_factory=dict)
    ratio: float | None = None  # launcher / bare
    p_value: float | None = None  # Welch's t-test on per-run s/step
    verdict: str = ""
    calls_per_step: int | None = None  # attention calls of the model under test, per DiT step and rank
    wrapper: WrapperCost | None = None

    def markdown(self) -> str:
        lines = [
            f"LightX2V overhead of the harness: {self.scenario} / {self.profile} / arm {self.arm} "
            f"({self.attn_type}, {self.nproc} rank(s)), {self.repeats} interleaved pairs (ABBA)",
            "",
            "| mode | DiT s/step (mean of steps 2..N per run), mean ± sd | n runs | per run |",
            "|---|---|---|---|",
        ]
        for mode in MODES:
            values = [r.s_per_step for r in self.runs if r.mode == mode and r.s_per_step is not None]
            each = ", ".join(f"{v:.5f}" for v in values)
            if mode in self.mean:
                lines.append(
                    f"| {mode} | {self.mean[mode]:.5f} ± {self.sd[mode]:.5f} | {self.n[mode]} | {each} |"
                )
            else:
                lines.append(f"| {mode} | n/a | 0 | {each} |")
        lines += ["", self.verdict]
        if self.wrapper is not None:
            lines += ["", self.wrapper.line(self.calls_per_step, self.mean.get("bare"))]
        return "\n".join(lines) + "\n"


def welch_p(a: list[float], b: list[float]) -> float | None:
    """Two-sided Welch t-test p-value; None with fewer than two values a side."""
    from harness.compare.significance import welch_p_value

    return welch_p_value(a, b) if len(a) >= 2 and len(b) >= 2 else None


def summarize(result: OverheadResult) -> OverheadResult:
    values = {
        m: [r.s_per_step for r in result.runs if r.mode == m and r.s_per_step is not None] for m in MODES
    }
    for mode, vals in values.items():
        if vals:
            result.mean[mode] = statistics.fmean(vals)
            result.sd[mode] = statistics.stdev(vals) if len(vals) > 1 else 0.0
            result.n[mode] = len(vals)
    if len(result.mean) < 2:
        result.verdict = "not measured: a mode has no timed run (see the runs' logs)"
        return result
    result.ratio = result.mean["launcher"] / result.mean["bare"]
    result.p_value = welch_p(values["launcher"], values["bare"])
    pct = (result.ratio - 1) * 100
    sizes = f"n={result.n['launcher']}+{result.n['bare']}"
    if result.p_value is None:
        result.verdict = (
            f"launcher / bare = {result.ratio:.4f} ({pct:+.2f}%): too few runs for a test ({sizes})"
        )
    elif result.p_value < SIGNIFICANCE:
        word = "costs" if pct > 0 else "saves"
        result.verdict = (
            f"the harness {word} {abs(pct):.2f}% of DiT s/step (launcher / bare = {result.ratio:.4f}; "
            f"Welch t-test p={result.p_value:.3g} < {SIGNIFICANCE}, {sizes})"
        )
    else:
        result.verdict = (
            f"no significant difference: launcher / bare = {result.ratio:.4f} ({pct:+.2f}%), "
            f"Welch t-test p={result.p_value:.3g} >= {SIGNIFICANCE} ({sizes})"
        )
    return result


def wrapper_cost(samples: int = 7, calls: int = 20000) -> WrapperCost:
    """Time ``apply`` through the launcher's counting subclass and through the plain class, interleaved."""
    from harness.runners.lightx2v.launch import CallBook, instrument_registry

    class Backend:
        def apply(
            self, q, k, v, cu_seqlens_q=None, cu_seqlens_kv=None, max_seqlen_q=None, max_seqlen_kv=None, **kw
        ):
            return q

    class Registry(dict):
        pass

    registry = Registry(backend=Backend)
    plain = Backend()
    instrument_registry(registry, CallBook("0", "backend", False, [], []))
    counted = registry["backend"]()
    args = {"cu_seqlens_q": None, "cu_seqlens_kv": None, "max_seqlen_q": 1, "max_seqlen_kv": 1}
    result = WrapperCost(calls_per_sample=calls)
    for _ in range(samples):
        for obj, into in ((plain, result.plain_s), (counted, result.counted_s)):
            apply = obj.apply
            t0 = time.perf_counter()
            for _ in range(calls):
                apply(1, 2, 3, **args)
            into.append((time.perf_counter() - t0) / calls)
    return result


def _calls_per_step(result: OverheadResult, dit_steps: int | None) -> int | None:
    """In-scope attention calls per DiT step on rank 0, from a launcher run's attn_calls.json."""
    from harness.store import RunDir

    for run in result.runs:
        record = RunDir(Path(run.run_dir)).attn_calls() if run.mode == "launcher" and dit_steps else None
        if record is not None:
            rank0 = record.ranks.get("0")
            calls = sum(rank0.calls.values()) if rank0 else 0
            return calls // dit_steps if calls else None
    return None


def measure_overhead(
    scenario_ref: str | Path,
    *,
    profile: str | None = None,
    arm: str,
    repeats: int = 4,
    out_root: Path = Path("reports"),
) -> OverheadResult:
    if repeats < 1:
        raise HarnessError(f"--repeats {repeats}: expected at least 1", exit_code=2)
    scenario = load_scenario(scenario_ref)
    if scenario.runner != "lightx2v":
        raise HarnessError(f"{scenario_ref}: runner {scenario.runner!r}, not lightx2v", exit_code=2)
    specs = build_plan(scenario, profile=profile, arms=[arm])
    spec = specs[0]
    if spec.kv_reversed:
        raise HarnessError(
            f"--arm {arm}: K/V-reversed arms compute something else; pick a plain arm", exit_code=2
        )
    runner = get_runner("lightx2v")
    reason = runner.preflight(spec)
    if reason:
        raise HarnessError(f"arm {arm} cannot run here: {reason}", exit_code=3)
    root = Path(out_root) / scenario.name / "overhead" / (profile or "default") / arm
    result = OverheadResult(
        scenario=scenario.name,
        profile=profile,
        arm=arm,
        attn_type=spec.attn_type,
        nproc=int(spec.params["nproc_per_node"]),
        repeats=repeats,
    )
    params = spec.params
    for repeat in range(repeats):
        for mode in MODES if repeat % 2 == 0 else reversed(MODES):
            run_dir = (root / f"{repeat:02d}-{mode}").absolute()
            launch = runner.prepare(spec, run_dir)
            if mode == "bare":
                command = [
                    *torchrun_prefix(params),
                    "-m", LAUNCH_MODULE, "--bare", "--run-dir", str(run_dir), "--attn-type", spec.attn_type,
                    *synthetic_args(params), "--", *infer_args(params, spec, run_dir),
                ]  # fmt: skip
            else:
                command = launch.command
            with open(run_dir / "stdout.log", "wb") as out, open(run_dir / "stderr.log", "wb") as err:
                done = subprocess.run(
                    command,
                    stdout=out,
                    stderr=err,
                    env={**os.environ, **spec.env, **launch.env},
                    cwd=launch.cwd,
                    timeout=spec.timeout_s,
                )
            timing = timing_from_run_dir(run_dir, params.get("dit_steps"), params.get("infer_steps"))
            seconds = timing.step_seconds()
            ok = done.returncode == 0 and len(seconds) > 1 and all(math.isfinite(s) for s in seconds)
            result.runs.append(
                OverheadRun(
                    mode=mode,
                    repeat=repeat,
                    s_per_step=timing.s_per_step if ok else None,
                    step_seconds=seconds,
                    exit_code=done.returncode,
                    run_dir=str(run_dir),
                )
            )
    summarize(result)
    result.calls_per_step = _calls_per_step(result, params.get("dit_steps"))
    result.wrapper = wrapper_cost()
    from harness.store import atomic_write_json

    atomic_write_json(root / "overhead.json", result.model_dump(mode="json", by_alias=True))
    (root / "overhead.md").write_text(result.markdown())
    return result
