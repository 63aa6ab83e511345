"""``harness lightx2v overhead``: DiT s/step of one arm with the launcher's instrumentation against
without (``--bare``), 2N runs in ABBA order so that drift falls on both sides, compared through
``compare.significance``; ``wrapper_cost`` bounds the counting wrapper's per-step cost in process."""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

from pydantic import Field

from harness.compare.significance import SpeedTest, compare_samples
from harness.errors import HarnessError
from harness.executors.process import execute_run
from harness.plan import build_plan
from harness.records import Record, RunSpec
from harness.runners.base import get_runner
from harness.runners.lightx2v.counting import CallBook, instrument_registry
from harness.runners.lightx2v.params import params_of
from harness.safe_write import atomic_write_json
from harness.scenario.load import load_scenario
from harness.store import RunDir

MODES = ("launcher", "bare")
WHAT = "DiT s/step, bare -> launcher"


class OverheadRun(Record):
    mode: str
    repeat: int
    s_per_step: float | None
    step_seconds: list[float] = Field(default_factory=list)
    exit_code: int | None
    status: str = "ok"  # the run's status in its run.json
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
        counted, plain = (f"{statistics.fmean(x) * 1e6:.2f} ± {statistics.stdev(x) * 1e6:.2f} µs"
                          for x in (self.counted_s, self.plain_s))  # fmt: skip
        text = (
            f"counting wrapper, in process: {counted} per call against {plain} unwrapped (n={len(self.plain_s)} "
            f"samples of {self.calls_per_sample} calls each): +{self.added_s * 1e6:.2f} µs per call"
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
    speed: SpeedTest | None = None  # bare (A) against launcher (B)
    verdict: str = ""
    calls_per_step: int | None = None  # attention calls of the model under test, per DiT step and rank
    wrapper: WrapperCost | None = None

    def values(self, mode: str) -> list[float]:
        return [r.s_per_step for r in self.runs if r.mode == mode and r.s_per_step is not None]

    def markdown(self) -> str:
        lines = [
            f"LightX2V overhead of the harness: {self.scenario} / {self.profile} / arm {self.arm} "
            f"({self.attn_type}, {self.nproc} rank(s)), {self.repeats} interleaved pairs (ABBA)",
            "",
            "| mode | DiT s/step (mean of steps 2..N per run), mean ± sd | n runs | per run |",
            "|---|---|---|---|",
        ]
        for mode in MODES:
            each = ", ".join(f"{v:.5f}" for v in self.values(mode))
            spread = (
                f"{self.mean[mode]:.5f} ± {self.sd[mode]:.5f} | {self.n[mode]}"
                if mode in self.mean
                else "n/a | 0"
            )
            lines.append(f"| {mode} | {spread} | {each} |")
        lines += ["", self.verdict]
        if self.wrapper is not None:
            lines += ["", self.wrapper.line(self.calls_per_step, self.mean.get("bare"))]
        return "\n".join(lines) + "\n"


def summarize(result: OverheadResult) -> OverheadResult:
    """Means, spreads and the significance test of the runs, and the line that says what they show."""
    for mode in MODES:
        vals = result.values(mode)
        if vals:
            result.mean[mode] = statistics.fmean(vals)
            result.sd[mode] = statistics.stdev(vals) if len(vals) > 1 else 0.0
            result.n[mode] = len(vals)
    test = compare_samples(result.values("bare"), result.values("launcher"), what=WHAT, samples="runs")
    result.speed = test
    if not test.measured:
        result.verdict = "not measured: a mode has no timed run (see the runs' logs)"
        return result
    ratio = test.mean_arm / test.mean_ref if test.mean_ref and test.mean_arm is not None else None
    result.ratio, result.p_value = ratio, test.p
    figure = f"launcher / bare = {ratio:.4f} ({(ratio - 1) * 100:+.2f}%)" if ratio else ""
    result.verdict = "; ".join(x for x in (test.line, figure) if x)
    return result


def wrapper_cost(samples: int = 7, calls: int = 20000) -> WrapperCost:
    """Time ``apply`` through the launcher's counting subclass and through the plain class, interleaved."""

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


def timed_run(spec: RunSpec, mode: str, repeat: int, run_dir: RunDir) -> OverheadRun:
    """One run through the executor; its s/step counts when it exited 0 with two timed steps or more."""
    rec = execute_run(spec, run_dir)
    try:
        timing = run_dir.timing()
    except HarnessError:  # a damaged timing.json: the run is not timed
        timing = None
    seconds = timing.step_seconds() if timing is not None else []
    ok = rec.exit_code == 0 and len(seconds) > 1 and all(math.isfinite(s) for s in seconds)
    return OverheadRun(
        mode=mode,
        repeat=repeat,
        s_per_step=timing.s_per_step if ok and timing is not None else None,
        step_seconds=seconds,
        exit_code=rec.exit_code,
        status=rec.status.value,
        run_dir=str(run_dir.path),
    )


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
    spec = build_plan(scenario, profile=profile, arms=[arm])[0]
    if spec.kv_reversed:
        raise HarnessError(
            f"--arm {arm}: K/V-reversed arms compute something else; pick a plain arm", exit_code=2
        )
    if reason := get_runner("lightx2v").preflight(spec):
        raise HarnessError(f"arm {arm} cannot run here: {reason}", exit_code=3)
    params = params_of(spec)
    specs = {
        "launcher": spec,
        "bare": spec.model_copy(
            update={"params": params.model_copy(update={"bare": True}).model_dump(mode="json")}
        ),
    }
    root = Path(out_root) / scenario.name / "overhead" / (profile or "default") / arm
    result = OverheadResult(
        scenario=scenario.name,
        profile=profile,
        arm=arm,
        attn_type=spec.attn_type,
        nproc=params.nproc_per_node,
        repeats=repeats,
    )
    for repeat in range(repeats):
        for mode in MODES if repeat % 2 == 0 else reversed(MODES):
            run_dir = RunDir((root / f"{repeat:02d}-{mode}").absolute())
            result.runs.append(timed_run(specs[mode], mode, repeat, run_dir))
    summarize(result)
    for run in result.runs:  # in-scope attention calls per DiT step on rank 0, from a launcher run
        steps = params.dit_steps
        record = RunDir(Path(run.run_dir)).attn_calls() if run.mode == "launcher" and steps else None
        if record is not None:
            calls = sum(rank0.calls.values()) if (rank0 := record.ranks.get("0")) else 0
            result.calls_per_step = calls // steps if calls and steps else None
            break
    result.wrapper = wrapper_cost()
    atomic_write_json(root / "overhead.json", result.model_dump(mode="json", by_alias=True))
    (root / "overhead.md").write_text(result.markdown())
    return result
