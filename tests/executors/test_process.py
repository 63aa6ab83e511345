"""The shared run step: real child processes that succeed, crash, hang, fall back or get interrupted."""

import json
import sys
import textwrap
from pathlib import Path

import pytest

from harness.executors.base import Reporter
from harness.executors.local import LocalExecutor
from harness.executors.process import execute_run
from harness.plan import PlannedRun
from harness.records import RunSpec, RunStatus
from harness.runners.base import Launch, Runner, register_runner
from harness.store import CampaignDir, RunDir


@register_runner("script")
class ScriptRunner(Runner):
    """Runs the Python code in spec.params['code'] with the run directory as argv[1]."""

    def resolve_params(self, scenario, arm, profile):
        return {}

    def preflight(self, spec):
        return spec.params.get("skip")

    def prepare(self, spec, run_dir: Path, *, dry_run=False):
        return Launch([sys.executable, "-c", textwrap.dedent(spec.params["code"]), str(run_dir)])


WRITE_OK = """
import json, sys, pathlib
d = pathlib.Path(sys.argv[1])
(d / "output.mp4").write_bytes(b"video")
fallbacks = {FALLBACKS}
(d / "attn_calls.json").write_text(json.dumps({"requested": "torch_sdpa",
    "ranks": {"0": {"calls": {"torch_sdpa": 12}, "fallbacks": fallbacks}}}))
print("HARNESS_STEP 1/1")
"""


def spec(code: str, name="arm", **kw) -> RunSpec:
    return RunSpec(scenario="t", runner="script", arm=name, seed=1, attn_type="torch_sdpa",
                   params={"code": code, **kw.pop("params", {})}, **kw)  # fmt: skip


def run(tmp_path, s: RunSpec, **kw):
    return execute_run(s, RunDir(tmp_path / s.key), **kw)


def test_ok_run_is_valid_and_hashed(tmp_path):
    rec = run(tmp_path, spec(WRITE_OK.replace("{FALLBACKS}", "{}")))
    assert rec.status == RunStatus.ok, rec.reason
    assert rec.valid is True and rec.exit_code == 0
    assert set(rec.outputs) == {"output.mp4", "attn_calls.json"}
    assert rec.command[0] == sys.executable
    on_disk = json.loads((tmp_path / "arm" / "run.json").read_text())
    assert on_disk["status"] == "ok" and on_disk["spec_hash"] == rec.spec_hash


def test_fallback_marks_run_invalid(tmp_path):
    rec = run(tmp_path, spec(WRITE_OK.replace("{FALLBACKS}", "{'torch_sdpa_math': 2}")))
    assert rec.status == RunStatus.ok
    assert rec.valid is False
    assert rec.reason == "invalid: rank 0: 2 call(s) fell back to 'torch_sdpa_math'"


def test_missing_attn_calls_is_invalid(tmp_path):
    rec = run(
        tmp_path, spec("import sys,pathlib; (pathlib.Path(sys.argv[1])/'output.mp4').write_bytes(b'v')")
    )
    assert rec.status == RunStatus.ok and rec.valid is False
    assert "no attn_calls.json" in rec.reason


def test_crash_is_recorded_with_log_tail(tmp_path):
    rec = run(
        tmp_path, spec("import sys; print('loading'); sys.stderr.write('RuntimeError: boom\\n'); sys.exit(3)")
    )
    assert rec.status == RunStatus.failed
    assert rec.exit_code == 3
    assert rec.reason == "exit code 3: RuntimeError: boom"
    assert "boom" in rec.log_tail


def test_exit_zero_without_output_fails(tmp_path):
    rec = run(tmp_path, spec("pass"))
    assert rec.status == RunStatus.failed
    assert "wrote no output.mp4" in rec.reason


def test_timeout_kills_and_records(tmp_path):
    rec = run(tmp_path, spec("import time; time.sleep(60)", timeout_s=1.0))
    assert rec.status == RunStatus.timeout
    assert rec.duration_s < 30
    assert "time limit of 1 s" in rec.reason


def test_preflight_refusal_is_skipped(tmp_path):
    rec = run(tmp_path, spec("pass", params={"skip": "backend x unavailable here: no GPU"}))
    assert rec.status == RunStatus.skipped
    assert rec.reason == "backend x unavailable here: no GPU"
    assert rec.command == []


def test_interrupt_stops_child_and_records(tmp_path):
    code = "import time; print('HARNESS_STEP 1/3', flush=True); time.sleep(60)"

    def interrupt(step, steps):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, spec(code), on_progress=interrupt)
    rec = RunDir(tmp_path / "arm").record()
    assert rec.status == RunStatus.interrupted
    assert rec.ended_at is not None and rec.exit_code is not None


def test_a_crashing_arm_does_not_stop_the_others(tmp_path):
    camp = CampaignDir(tmp_path / "camp")
    good = WRITE_OK.replace("{FALLBACKS}", "{}")
    specs = [spec(good, "first"), spec("import sys; sys.exit(1)", "crash"), spec(good, "last")]
    seen = []
    LocalExecutor().run(camp, [PlannedRun(s, "run", "new") for s in specs], Reporter(), seen.append)
    assert [r.status for r in seen] == [RunStatus.ok, RunStatus.failed, RunStatus.ok]
    assert all(camp.run(k).exists() for k in ("first", "crash", "last"))
