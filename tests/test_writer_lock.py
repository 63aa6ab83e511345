"""One lock for every writer of a campaign (run, ingest, report): an ingest or a report waits for
the writer in progress (naming it), a run waits for a report or an ingest and refuses a second
run; the next writer removes what killed writers left (the harness's own temporary files and
ingest's staging folders), never a live writer's. Holders are stopped (SIGSTOP) or killed at
known moments, and the waiter is seen blocked in flock() by the kernel: events, not sleeps."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_testutil import ROOT, blocked_on_flock, harness, harness_popen, wait_for
from safety_scenarios import small_scenario

from harness.errors import CampaignLocked
from harness.store import CampaignDir
from harness.writer_lock import CampaignLock, lock_holder

sys.path.insert(0, str(Path(__file__).resolve().parent / "report"))
from campaign_factory import ArmSpec, make_campaign  # noqa: E402

pytestmark = pytest.mark.concurrency  # locks held by other processes; .ci/flake-hunt


def hold_lock(camp: Path, writer: str, ready: Path, live_temp: Path | None = None) -> subprocess.Popen:
    """A child that takes the campaign's lock as ``writer``, starts writing ``live_temp`` (a
    temporary file of the harness's own pattern, as a writer midway leaves it), says ready, and
    holds on until the test ends it."""
    code = (
        "import pathlib, time\n"
        "from harness.store import CampaignDir\nfrom harness.writer_lock import CampaignLock\n"
        f"lock = CampaignLock(CampaignDir({str(camp)!r}), {writer!r}).acquire()\n"
        + (f"pathlib.Path({str(live_temp)!r}).write_text('half a file')\n" if live_temp else "")
        + f"pathlib.Path({str(ready)!r}).write_text('1')\n"
        "time.sleep(600)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)


def popen_logged(log: Path, *args) -> subprocess.Popen:
    with open(log, "w") as err:
        return subprocess.Popen([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=err, text=True)  # fmt: skip


def arm_keys(camp: Path) -> list[str]:
    return [a["key"] for a in json.loads((camp / "campaign.json").read_text())["arms"]]


def kill_left(*procs) -> None:
    """Kill (and reap) the processes a failed test left running."""
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_run_refuses_a_run_and_waits_for_a_report_or_an_ingest(tmp_path):
    camp = CampaignDir(tmp_path / "camp")
    camp.path.mkdir()
    for holder_kind, waiter in (("run", "run"), ("report", "run"), ("run", "ingest"), ("ingest", "report")):
        ready = tmp_path / f"ready-{holder_kind}-{waiter}"
        holder = hold_lock(camp.path, holder_kind, ready)
        try:
            wait_for(ready.exists, "the child to take the lock", timeout=60, proc=holder)
            seen = []

            def end_the_holder(who, holder=holder, seen=seen):
                seen.append(who)
                holder.send_signal(signal.SIGKILL)  # the waiter gets the lock when the kernel drops it

            lock = CampaignLock(camp, waiter, on_wait=end_the_holder)
            if (holder_kind, waiter) == ("run", "run"):
                with pytest.raises(
                    CampaignLocked, match=f"another harness run holds this campaign .pid {holder.pid} "
                ):
                    lock.acquire()
                assert not seen, "a second run is refused, not made to wait"
                continue
            with lock:
                assert [(w.pid, w.writer) for w in seen] == [(holder.pid, holder_kind)]
                assert lock_holder(camp).pid == os.getpid()
        finally:
            holder.kill()
            holder.wait()


def test_a_report_inside_the_run_that_holds_the_lock_does_not_wait_for_itself(tmp_path):
    camp = CampaignDir(tmp_path / "camp")
    camp.path.mkdir()
    with CampaignLock(camp) as outer:
        inner = CampaignLock(camp, "report", on_wait=lambda who: pytest.fail(f"waited for itself: {who}"))
        with inner:
            assert inner.nested and inner.fd is None
        assert outer.fd is not None and lock_holder(camp).writer == "run", "the run still holds it"
    assert lock_holder(camp) is None


def test_ingest_waits_for_the_run_and_campaign_json_keeps_both_writers_arms(tmp_path):
    path, out = small_scenario(tmp_path), tmp_path / "out"
    camp = out / "tiny" / "3step"
    first = harness("run", path, "--profile", "3step", "--out", out, "--arms", "torch_sdpa", "--no-report")
    assert first.returncode == 0, first.stderr
    mp4 = tmp_path / "elsewhere.mp4"  # an output made elsewhere, of the reference's size and length
    shutil.copyfile(camp / "runs" / "torch_sdpa" / "output.mp4", mp4)
    run = harness_popen("run", path, "--profile", "3step", "--out", out, "--arms", "floor", "--no-report")
    log = tmp_path / "ingest.stderr"
    ingest = None
    try:
        wait_for(lambda: getattr(lock_holder(CampaignDir(camp)), "pid", None) == run.pid,
                 "the run to take the lock", proc=run)  # fmt: skip
        run.send_signal(signal.SIGSTOP)  # it holds the lock and cannot end before the ingest comes
        try:
            ingest = popen_logged(log, "ingest", camp, "--arm", "extra", "--mp4", mp4, "--attn-type",
                                  "torch_sdpa", "--seed", "3")  # fmt: skip
            wait_for(lambda: "waiting: " in log.read_text(), "the ingest to say it waits", proc=ingest)
            wait_for(lambda: blocked_on_flock(ingest.pid, camp / "campaign.lock"), "the ingest to block",
                     proc=ingest)  # fmt: skip
            assert not (camp / "runs" / "extra").exists(), "ingested while the run held the campaign"
        finally:
            run.send_signal(signal.SIGCONT)
        _, run_err = run.communicate(timeout=600)
        assert run.returncode == 0, run_err
        ingest.communicate(timeout=300)
    finally:
        kill_left(run, ingest)
    err = log.read_text()
    assert ingest.returncode == 0, err  # main: ingested at once; the run then dropped the arm
    assert err.startswith(f"waiting: a harness run holds {camp} (pid {run.pid} on "), err
    assert sorted(arm_keys(camp)) == ["extra", "floor", "torch_sdpa"]
    again = harness("run", path, "--profile", "3step", "--out", out, "--arms", "floor", "--no-report")
    assert again.returncode == 0, again.stderr  # main: campaign.json then lists floor alone
    assert sorted(arm_keys(camp)) == ["extra", "floor", "torch_sdpa"]


def test_two_reports_at_once_are_serialised(tmp_path):
    camp = make_campaign(tmp_path, [ArmSpec("torch_sdpa", role="reference"), ArmSpec("cand", noise=2.0)])
    log = tmp_path / "second.stderr"
    first = harness_popen("report", camp.path)
    second = None
    try:
        wait_for(lambda: getattr(lock_holder(camp), "pid", None) == first.pid, "the first report's lock",
                 proc=first)  # fmt: skip
        first.send_signal(signal.SIGSTOP)
        try:
            second = popen_logged(log, "report", camp.path)
            wait_for(lambda: "waiting: " in log.read_text(), "the second report to say it waits", proc=second)
            wait_for(lambda: blocked_on_flock(second.pid, camp.lock_file), "the second report to block",
                     proc=second)  # fmt: skip
            assert second.poll() is None  # main: both wrote at once, pages of one over the other's results
        finally:
            first.send_signal(signal.SIGCONT)
        out1, err1 = first.communicate(timeout=600)
        out2, _ = second.communicate(timeout=600)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert first.returncode == 0, err1
    assert second.returncode == 0, log.read_text()
    assert log.read_text().startswith(f"waiting: a harness report holds {camp.path} (pid {first.pid} on ")
    assert "report.md:" in out1 and "report.md:" in out2


def test_the_next_writer_removes_what_killed_writers_left_never_a_live_writers(tmp_path):
    camp = make_campaign(
        tmp_path, [ArmSpec("torch_sdpa", role="reference"), ArmSpec("live", status="running")]
    )
    c = camp.path
    (c / "assets").mkdir()
    stale = [
        c / ".results.json.0123456789ab.tmp",  # safe_write's temporary files, anywhere in the campaign
        c / "assets" / ".speed.png.abcdef012345.tmp",
        c / "runs" / "torch_sdpa" / ".run.json.00ff00ff00ff.tmp",
        c / "runs" / "torch_sdpa" / ".output.mp4.0a1b2c3d4e5f.tmp",  # media's
        c / "runs" / ".extra.ab12cd_4" / "run.json",  # ingest's staging folders
        c / "runs" / ".torch_sdpa.old" / "output.mp4",
    ]
    kept = [
        c / "runs" / "live" / ".run.json.0123456789ab.tmp",  # a run folder whose runner may live on
        c / "runs" / "torch_sdpa" / "notes.tmp",  # not the harness's own names
        c / ".results.json.tmp",
        c / ".keep",
        c / "runs" / "torch_sdpa" / ".output.mp4.0123456789ab.tmp.bak",
    ]
    ready, live_temp = tmp_path / "ready", c / ".report.md.fedcba987654.tmp"
    holder = hold_lock(c, "report", ready, live_temp)
    log = tmp_path / "ingest.stderr"
    ingest = None
    try:
        wait_for(ready.exists, "the holder to take the lock and start writing", timeout=60, proc=holder)
        for p in stale + kept:  # as killed writers left them (after the holder took the lock)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("left behind\n")
        mp4 = tmp_path / "elsewhere.mp4"
        shutil.copyfile(c / "runs" / "torch_sdpa" / "output.mp4", mp4)
        ingest = popen_logged(log, "ingest", c, "--arm", "extra", "--mp4", mp4, "--attn-type", "torch_sdpa",
                              "--seed", "42")  # fmt: skip
        wait_for(lambda: blocked_on_flock(ingest.pid, camp.lock_file), "the ingest to block", proc=ingest)
        assert live_temp.exists() and all(p.exists() for p in stale), "removed under a live writer"
        holder.send_signal(signal.SIGKILL)  # killed midway: its temporary file is stale from now on
        holder.wait()
        ingest.communicate(timeout=300)
    finally:
        kill_left(holder, ingest)
    assert ingest.returncode == 0, log.read_text()
    assert log.read_text().startswith(f"waiting: a harness report holds {c} (pid {holder.pid} on ")
    left = [p for p in [*stale, live_temp, *(p.parent for p in stale[-2:])] if p.exists()]
    assert left == [], left  # main: every one of them stays forever
    assert all(p.read_text() == "left behind\n" for p in kept)
    assert (c / "runs" / "extra" / "run.json").is_file() and "extra" in arm_keys(c)
