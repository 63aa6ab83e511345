"""Fault injection: `harness run` killed at random moments (SIGINT, SIGTERM, SIGKILL), then resumed.

The campaign that results equals one made without faults (statuses, spec hashes, the output
bytes of the deterministic arms), no process of the campaign is left running after any kill,
and no file outside the campaign folder changes. The seed of the random schedule is printed
on failure (HARNESS_FAULT_SEED replays one).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest
from cli_testutil import harness, harness_popen, processes_mentioning, tiny_scenario, tree_digest

pytestmark = pytest.mark.slow

ATTEMPTS = 5  # faulted runs
MAX_DELAY_S = 14.0  # a kill lands somewhere in the first seconds of a run (a clean run: ~15-25 s)
ORPHAN_WAIT_S = 4.0  # after a kill, every process of the campaign is gone within this (an arm: 5+ s)


def summary(camp: Path) -> dict[str, tuple]:
    """What must not depend on faults: status, spec hash and output bytes of every run."""
    out = {}
    for run in sorted((camp / "runs").iterdir()):
        rec = json.loads((run / "run.json").read_text())
        out[run.name] = (rec["status"], rec["spec_hash"], rec["valid"], rec["outputs"].get("output.mp4"))
    camp_rec = json.loads((camp / "campaign.json").read_text())
    out["campaign.json"] = tuple((a["key"], a["status"]) for a in camp_rec["arms"])
    return out


def any_running(camp: Path) -> bool:
    for p in camp.glob("runs/*/run.json"):
        try:
            if json.loads(p.read_text())["status"] == "running":
                return True
        except (OSError, ValueError, KeyError):
            pass
    return False


def wait_no_process(text: str, timeout: float) -> list:
    deadline = time.monotonic() + timeout
    while (left := processes_mentioning(text)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def test_killed_at_random_moments_then_resumed_equals_a_clean_campaign(tmp_path):
    seed = int(os.environ.get("HARNESS_FAULT_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    path = tiny_scenario(tmp_path)
    clean_out, faulty_out = tmp_path / "clean", tmp_path / "faulty"
    res = harness("run", path, "--profile", "3step", "--out", clean_out)
    assert res.returncode == 0, res.stderr
    clean = summary(clean_out / "tiny" / "3step")
    assert {k: v[0] for k, v in clean.items() if k != "campaign.json"} == {"floor": "ok", "torch_sdpa": "ok"}

    camp = faulty_out / "tiny" / "3step"
    camp.parent.mkdir(parents=True)  # its parents are the campaign's to make, not "outside" it
    outside = tree_digest(tmp_path, skip=camp)
    log = []
    for attempt in range(ATTEMPTS):
        # The first kill is a SIGKILL while an arm runs (the case that once left orphans); the
        # others: a random signal at a random moment, some of them during a --force re-run.
        sig = signal.SIGKILL if attempt == 0 else rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
        force = attempt > 0 and rng.random() < 0.4
        proc = harness_popen("run", path, "--profile", "3step", "--out", faulty_out, *(["--force"] * force))
        if attempt == 0:
            deadline = time.monotonic() + 120
            while not any_running(camp) and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            delay = rng.uniform(0.2, 1.0)
        else:
            delay = rng.uniform(1.0, MAX_DELAY_S)  # past the interpreter's own start-up
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        log.append(f"attempt {attempt}: {sig.name} after {delay:.1f}s force={force} -> rc {proc.returncode}")
        assert "Traceback" not in err, f"seed {seed}: {log}\n{err}"
        left = wait_no_process(str(camp), timeout=ORPHAN_WAIT_S)
        assert not left, f"seed {seed}: {log}: processes of the campaign still running: {left}"

    res = harness("run", path, "--profile", "3step", "--out", faulty_out)
    assert res.returncode == 0, f"seed {seed}: {log}\n{res.stderr}"
    assert summary(camp) == clean, f"seed {seed}: {log}"
    assert not processes_mentioning(str(camp))
    assert tree_digest(tmp_path, skip=camp) == outside, f"seed {seed}: files outside the campaign changed"
