"""A report never passes on missing data: a run folder, a run.json or an output.mp4 that is gone
(before or while the report is built) is named and the exit is 3, never 0 and never a traceback;
a report interrupted midway leaves the old one whole; a report waits for a `harness run` that
holds the campaign."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from campaign_factory import ArmSpec, report_digest
from cli_testutil import blocked_on_flock, wait_for

from harness.report import build_report
from harness.writer_lock import CampaignLock

ROOT = Path(__file__).resolve().parents[2]
ARMS = [
    ArmSpec("torch_sdpa", role="reference"),
    ArmSpec("floor", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=2.0),
    ArmSpec("cand", noise=4.0),
]


def harness(*args, **kw):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, **kw)  # fmt: skip


def error_lines(res) -> list[str]:
    assert "Traceback" not in res.stderr, res.stderr
    return [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]


@pytest.mark.parametrize(
    "remove, named",
    [
        ("runs/torch_sdpa", "run folder"),
        ("runs/torch_sdpa/run.json", "run.json is missing"),
        ("runs/torch_sdpa/output.mp4", "output.mp4 is missing"),
        ("runs/cand/output.mp4", "output.mp4 is missing"),
        ("runs", "run folder"),
    ],
)
def test_missing_data_is_named_and_exits_3(campaign_factory, remove, named):
    camp = campaign_factory(ARMS)
    target = camp.path / remove
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    res = harness("report", camp.path)
    assert res.returncode == 3, res.stderr  # main: 0, a CI job would pass
    errors = error_lines(res)
    assert any(named in e and str(target) in e for e in errors), errors
    pr, md = (camp.path / "pr.md").read_text(), (camp.path / "report.md").read_text()
    assert "INCOMPLETE" in pr.splitlines()[2] and "INCOMPLETE" in md  # said first, not only in the exit code


@pytest.mark.parametrize(
    "when, remove",
    [
        ("codec floor", "runs/torch_sdpa"),  # main: exit 4, a traceback from the codec floor
        ("compare cand", "runs/torch_sdpa/output.mp4"),
        ("frames", "runs/cand"),
    ],
)
def test_data_removed_while_the_report_is_built_is_named(campaign_factory, when, remove):
    camp = campaign_factory(ARMS)
    removed = []

    def progress(message: str) -> None:
        if message.startswith(when) and not removed:
            p = camp.path / remove
            shutil.rmtree(p) if p.is_dir() else p.unlink()
            removed.append(message)

    paths = build_report(camp, progress=progress)
    assert removed, "the stage was reached"
    assert paths.errors and any(str(camp.path / remove) in e for e in paths.errors), paths.errors
    assert "INCOMPLETE" in (camp.path / "pr.md").read_text()


def test_an_interrupted_report_leaves_the_old_one_whole(campaign_factory):
    camp = campaign_factory(ARMS)
    build_report(camp)
    before = report_digest(camp.path)
    (camp.path / "runs" / "cand" / "stderr.log").write_text("changed: the analysis runs again\n")
    for stage in ("frames", "figures", "write report"):

        def progress(message: str, stage=stage) -> None:
            if message.startswith(stage):
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            build_report(camp, progress=progress)
        assert report_digest(camp.path) == before, (
            f"interrupted at {stage!r}: the old report was not put back"
        )
        assert not list(camp.path.glob(".backup-*"))
    build_report(camp)
    assert report_digest(camp.path) != before  # not interrupted: replaced


@pytest.mark.concurrency  # a lock held by another process; .ci/flake-hunt
def test_report_waits_for_the_run_that_holds_the_campaign(campaign_factory):
    camp = campaign_factory(ARMS)
    build_report(camp)
    stamp = (camp.path / "report.md").stat().st_mtime_ns
    lock = CampaignLock(camp).acquire()
    err_log = camp.path.parent / "report.stderr"
    try:
        with open(err_log, "w") as err_file:
            proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "report", str(camp.path)], cwd=ROOT,
                                    stdout=subprocess.PIPE, stderr=err_file, text=True)  # fmt: skip
        # Not a fixed sleep: the report says it waits, then the kernel shows it blocked on the lock.
        wait_for(lambda: "waiting: " in err_log.read_text(), "the report to say it waits", proc=proc)
        wait_for(lambda: blocked_on_flock(proc.pid, camp.lock_file), "the report to block on the lock",
                 proc=proc)  # fmt: skip
        assert proc.poll() is None, "report did not wait for the lock"
        assert (camp.path / "report.md").stat().st_mtime_ns == stamp, "written while the run held the lock"
    finally:
        lock.release()
    out, _ = proc.communicate(timeout=300)
    err = err_log.read_text()
    assert proc.returncode == 0, err
    assert err.startswith(f"waiting: a harness run holds {camp.path} (pid "), err
    assert "report.md:" in out
