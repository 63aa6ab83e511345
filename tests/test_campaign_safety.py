"""A campaign is hard to break: one runner per campaign, no orphans, damaged records never block,
names stay inside --out, files follow the umask. Real `harness run` processes, real signals."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cli_testutil import (
    harness,
    harness_popen,
    processes_mentioning,
    statuses,
    the_error_line,
    tiny_scenario,
    tree_digest,
    wait_for,
)
from rich.console import Console
from safety_scenarios import quick_scenario, small_scenario

from harness.errors import Exit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[Path, Path]:
    """(scenario, out root) of a finished two-arm campaign, made once; tests work on copies."""
    root = tmp_path_factory.mktemp("clean")
    path = small_scenario(root)
    res = harness("run", path, "--profile", "3step", "--out", root / "out", umask=0o022)
    assert res.returncode == 0, res.stderr
    return path, root / "out"


def copy_of(clean, tmp_path: Path) -> tuple[Path, Path, Path]:
    path, out = clean
    shutil.copytree(out, tmp_path / "out")
    return path, tmp_path / "out", tmp_path / "out" / "tiny" / "3step"


def run_json(camp: Path, key: str) -> dict:
    return json.loads((camp / "runs" / key / "run.json").read_text())


def running_pid(camp: Path, key: str):
    p = camp / "runs" / key / "run.json"
    try:
        rec = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return rec.get("pid") if rec.get("status") == "running" else None


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_files_follow_the_umask(clean):
    _, out = clean
    camp = out / "tiny" / "3step"
    files = [camp / n for n in ("campaign.json", "report.md", "index.html", "results.json")]
    files += [camp / "runs" / "torch_sdpa" / n for n in ("run.json", "timing.json", "output.mp4")]
    files += sorted((camp / "assets").rglob("*.png"))[:3]
    assert len(files) > 8
    for f in files:
        assert f.stat().st_mode & 0o777 == 0o644, f


@pytest.mark.concurrency
def test_second_run_on_the_same_campaign_exits_2_naming_the_holder(clean, tmp_path):
    path, out, camp = copy_of(clean, tmp_path)
    # One arm re-run under the lock is all the contention needs; the floor stays as the copy has it.
    first = harness_popen(
        "run", path, "--profile", "3step", "--out", out, "--force", "--no-report", "--arms", "torch_sdpa"
    )
    try:
        wait_for(lambda: running_pid(camp, "torch_sdpa"), proc=first, what="the first arm to start")
        # The first run is stopped (SIGSTOP) while the others look at the lock: it holds it and
        # cannot end before they get there, however slow the machine is. Its arm runs on.
        first.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            res = harness("run", path, "--profile", "3step", "--out", out, "--no-report")
            line = the_error_line(res)
            assert res.returncode == Exit.BAD_INPUT
            assert f"another harness run holds this campaign (pid {first.pid} on " in line
            assert "started 20" in line
            assert time.monotonic() - t0 < 30
            dry = harness("run", path, "--profile", "3step", "--out", out, "--dry-run")  # needs no lock
            assert dry.returncode == 0 and f"holds this campaign (pid {first.pid}" in dry.stdout
        finally:
            first.send_signal(signal.SIGCONT)
        assert harness("report", out / "tiny" / "3step").returncode == 0  # nor does report (it waits)
    finally:
        stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    assert statuses(camp) == {"floor": "ok", "torch_sdpa": "ok"}
    for key in ("torch_sdpa", "floor"):  # one process wrote each folder
        rec = run_json(camp, key)
        assert rec["status"] == "ok" and rec["pid"]
        assert (camp / "runs" / key / "stdout.log").read_text().count("done:") == 1


@pytest.mark.concurrency
def test_sigkill_of_harness_run_takes_the_runner_with_it_and_the_rerun_marks_it_stale(clean, tmp_path):
    path, out, camp = copy_of(clean, tmp_path)
    victim = harness_popen("run", path, "--profile", "3step", "--out", out, "--force", "--no-report")
    wait_for(lambda: running_pid(camp, "torch_sdpa"), proc=victim, what="the first arm to start")
    pgid = running_pid(camp, "torch_sdpa")
    assert group_alive(pgid)
    victim.send_signal(signal.SIGKILL)
    victim.communicate()
    wait_for(lambda: not group_alive(pgid), timeout=15, what="the runner to die with its harness")
    assert run_json(camp, "torch_sdpa")["status"] == "running"  # as the killed harness left it

    dry = harness("run", path, "--profile", "3step", "--out", out, "--dry-run")
    assert (
        "# torch_sdpa: rerun (interrupted (stale): left running by a harness run that is gone" in dry.stdout
    )
    res = harness("run", path, "--profile", "3step", "--out", out, "--no-report")
    assert res.returncode == 0, res.stderr
    assert "note: the campaign lock was left by pid" in res.stderr
    assert "note: torch_sdpa: interrupted (stale)" in res.stderr
    assert statuses(camp) == {"floor": "ok", "torch_sdpa": "ok"}
    assert not processes_mentioning(str(camp))


def test_a_live_orphan_is_stopped_before_its_arm_is_run_again(clean, tmp_path):
    """A runner that outlived its harness (here: a process group recorded as the arm's runner) is
    stopped by the next run, which holds the lock, before that arm runs again."""
    path, out, camp = copy_of(clean, tmp_path)
    orphan = subprocess.Popen(
        [sys.executable, "-c", f"import time; time.sleep(120)  # {camp}"], start_new_session=True
    )
    # Reaped the moment it dies, as an orphan's new parent (init) would: a dead child left a zombie
    # here still reads as running to the harness, which would wait out its SIGTERM and SIGKILL
    # graces (10 s) on a process that is already gone.
    reaper = threading.Thread(target=orphan.wait, daemon=True)
    reaper.start()
    try:
        rec = run_json(camp, "floor")
        stat = Path(f"/proc/{orphan.pid}/stat").read_text()
        rec.update(status="running", pid=orphan.pid, pid_start=int(stat.rsplit(")", 1)[1].split()[19]))
        (camp / "runs" / "floor" / "run.json").write_text(json.dumps(rec))
        res = harness("run", path, "--profile", "3step", "--out", out, "--no-report")
        assert res.returncode == 0, res.stderr
        assert "its runner was still running and has been stopped" in res.stderr
        reaper.join(timeout=5)
        assert orphan.returncode == -signal.SIGTERM  # stopped by the harness, not gone by itself
    finally:
        if orphan.poll() is None:
            orphan.kill()
    assert statuses(camp) == {"floor": "ok", "torch_sdpa": "ok"}


def test_damaged_run_json_is_moved_aside_and_only_that_arm_reruns(clean, tmp_path):
    path, out, camp = copy_of(clean, tmp_path)
    ref = camp / "runs" / "torch_sdpa"
    kept = {p: p.stat().st_mtime_ns for p in ref.iterdir()}
    (camp / "runs" / "floor" / "run.json").write_text('{"spec": ')

    res = harness("report", camp)  # renders every other arm and lists the damaged one
    assert res.returncode == Exit.RUN_FAILED
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "floor: run.json unreadable" in errors[0]
    report = (camp / "report.md").read_text()
    assert "torch_sdpa" in report and "damaged" in report

    dry = harness("run", path, "--profile", "3step", "--out", out, "--dry-run")
    planned = [ln for ln in dry.stdout.splitlines() if ln.startswith("# ")]
    assert planned[0] == "# torch_sdpa: skip-ok (already ok, same spec)"
    assert planned[1].startswith("# floor: rerun (run.json unreadable, to be moved aside")
    res = harness("run", path, "--profile", "3step", "--out", out, "--no-report")
    assert res.returncode == 0, res.stderr
    assert "note: floor: run.json unreadable" in res.stderr and "moved to run.json.corrupt-" in res.stderr
    aside = list((camp / "runs" / "floor").glob("run.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text() == '{"spec": '
    assert statuses(camp) == {"floor": "ok", "torch_sdpa": "ok"}
    assert {p: p.stat().st_mtime_ns for p in ref.iterdir()} == kept, "the ok arm was not touched"

    (camp / "runs" / "floor" / "run.json").write_text("")  # damaged again: --force --arms works too
    res = harness(
        "run", path, "--profile", "3step", "--out", out, "--no-report", "--force", "--arms", "floor"
    )
    assert res.returncode == 0, res.stderr
    assert statuses(camp)["floor"] == "ok"


def test_a_run_json_of_a_schema_this_harness_does_not_read_is_refused_then_rerun(clean, tmp_path):
    """A newer run.json (or an older one: none is migrated) reads as damaged: one line naming the
    file and both schema ids, exit 3 from the report; `harness run` moves it aside and re-runs the arm."""
    path, out, camp = copy_of(clean, tmp_path)
    floor = camp / "runs" / "floor" / "run.json"
    newer = floor.read_text().replace('"schema": "harness.run/1"', '"schema": "harness.run/7"')
    assert newer != floor.read_text()
    floor.write_text(newer)

    res = harness("report", camp)
    assert res.returncode == Exit.RUN_FAILED
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, res.stderr
    assert f"{floor}: schema harness.run/7 is newer than this harness reads (harness.run/1)" in errors[0]

    res = harness("run", path, "--profile", "3step", "--out", out, "--no-report")
    assert res.returncode == 0, res.stderr
    assert "note: floor: run.json unreadable" in res.stderr and "harness.run/7 is newer" in res.stderr
    aside = list(floor.parent.glob("run.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text() == newer, "the newer record is kept, never read"
    assert statuses(camp) == {"floor": "ok", "torch_sdpa": "ok"}

    older = floor.read_text().replace('"schema": "harness.run/1"', '"schema": "harness.run/0"')
    floor.write_text(older)
    res = harness("report", camp)
    assert res.returncode == Exit.RUN_FAILED
    assert "schema harness.run/0 is older than this harness reads (harness.run/1)" in res.stderr


def test_damaged_campaign_json_blocks_nothing(clean, tmp_path):
    path, out, camp = copy_of(clean, tmp_path)
    (camp / "campaign.json").write_text("\x00garbage")
    res = harness("report", camp)
    assert res.returncode == Exit.RUN_FAILED
    assert "campaign.json" in the_error_line(res) and (camp / "report.md").exists()
    assert "floor" in (camp / "report.md").read_text()
    res = harness("run", path, "--profile", "3step", "--out", out)
    assert res.returncode == 0, res.stderr
    assert "note: campaign.json unreadable" in res.stderr
    assert json.loads((camp / "campaign.json").read_text())["campaign_id"] == "3step"
    assert list(camp.glob("campaign.json.corrupt-*"))


def test_unknown_backend_stops_the_campaign_before_any_arm_runs(tmp_path):
    path = tiny_scenario(tmp_path, "  - {name: cand, attn_type: no_such_backend}\n")
    res = harness("run", path, "--profile", "3step", "--out", tmp_path / "out")
    assert res.returncode == Exit.BAD_INPUT
    assert "arms[2].attn_type: unknown attention backend 'no_such_backend'" in the_error_line(res)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "edit, flag",
    [
        (("name: tiny", "name: ../../escape"), None),
        (
            ("{3step: {infer_steps: 4}}", "{../../../escape: {infer_steps: 4}}"),
            ["--profile", "../../../escape"],
        ),
        (("{name: floor,", "{name: ../../../escape,"), None),
        (("seed: 3", "seed: 3\ndefault_profile: ../escape"), None),
        (None, ["--campaign", "../../../escape"]),
        (None, ["--campaign", "{tmp}/escape"]),  # an absolute path: inside tmp_path, outside --out
        (None, ["--seeds", "../1"]),
    ],
)
def test_nothing_is_written_outside_out(tmp_path, edit, flag):
    work = tmp_path / "work"
    work.mkdir()
    path = quick_scenario(work)
    if edit:
        path.write_text(path.read_text().replace(*edit))
    out = work / "a" / "b" / "out"
    before = tree_digest(tmp_path)
    flag = [f.replace("{tmp}", str(tmp_path)) for f in flag or []]
    res = harness("run", path, "--profile", "3step", "--out", out, *flag)
    assert res.returncode == Exit.BAD_INPUT, res.stderr
    the_error_line(res)
    assert tree_digest(tmp_path) == before
    assert not (tmp_path / "escape").exists()
    if flag is None:
        assert harness("scenarios", "validate", path).returncode == Exit.BAD_INPUT


def test_duplicate_seeds_run_once_with_a_note(tmp_path):
    path = quick_scenario(tmp_path)
    res = harness(
        "run", path, "--profile", "3step", "--out", tmp_path / "out", "--seeds", "5,5,6", "--dry-run"
    )
    assert res.returncode == 0, res.stderr
    assert "note: --seeds: 5 given more than once; each seed runs once" in res.stdout
    heads = [ln for ln in res.stdout.splitlines() if ln.startswith("# ")]
    assert [h.split(":")[0] for h in heads] == ["# torch_sdpa@5", "# floor@5", "# torch_sdpa@6", "# floor@6"]


def test_summary_says_which_rows_ran_now():
    """After an interrupted --force some rows are fresh and some are from before: the table says so."""
    from harness.campaign import CampaignOutcome
    from harness.cli.run import summary_table
    from harness.executors.base import PlannedRun
    from harness.records import RunRecord, RunSpec, RunStatus
    from harness.store import CampaignDir

    specs = [RunSpec(scenario="s", runner="builtin", arm=a, seed=1, attn_type="torch_sdpa") for a in "abc"]
    recs = [RunRecord(spec=s, spec_hash="h", status=RunStatus.ok) for s in specs]
    outcome = CampaignOutcome(CampaignDir(Path("/nonexistent")), records=recs, interrupted=True)
    outcome.planned = [PlannedRun(specs[0], "rerun", "--force"), PlannedRun(specs[1], "rerun", "--force"),
                       PlannedRun(specs[2], "skip-ok", "ok")]  # fmt: skip
    outcome.ran = {"a"}
    console = Console(width=200, record=True)
    console.print(summary_table(outcome))
    rows = {ln.split("│")[1].strip(): ln.split("│")[-2].strip() for ln in console.export_text().splitlines()
            if ln.startswith("│")}  # fmt: skip
    assert rows == {"a": "now", "b": "earlier", "c": "kept"}
    outcome.ran = {"a", "b", "c"}
    console = Console(width=200, record=True)
    console.print(summary_table(outcome))
    assert "from" not in console.export_text(), "a fresh campaign keeps the plain table"
