"""Fault injection: `harness run` killed at random moments (SIGINT, SIGTERM, SIGKILL), then resumed;
a full disk (the harness's ENOSPC fault hook everywhere, a small tmpfs where root may mount one),
a read-only campaign, a report interrupted midway, hostile command lines and manifests.

The campaign that results equals one made without faults (statuses, spec hashes, the output
bytes of the deterministic arms), no process of the campaign is left running after any kill,
and no file outside the campaign folder changes. The seed of the random schedule is printed
on failure (HARNESS_FAULT_SEED replays one). A write that fails is one line (exit 3, or 2 for a
place the user named), with no temporary file and no arm left `running`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_testutil import (
    harness,
    harness_popen,
    processes_mentioning,
    tiny_scenario,
    tree_digest,
    wait_for,
)
from safety_scenarios import quick_scenario, small_scenario

pytestmark = pytest.mark.slow

ATTEMPTS = 5  # faulted runs
ORPHAN_WAIT_S = 4.0  # after a kill, every process of the campaign is gone within this


@pytest.fixture(scope="module")
def clean_campaign(tmp_path_factory) -> tuple[Path, float]:
    """(campaign, wall seconds its run took) of the small two-arm scenario run once without faults
    and without a report; tests copy it."""
    root = tmp_path_factory.mktemp("clean")
    t0 = time.monotonic()
    res = harness("run", small_scenario(root), "--profile", "3step", "--out", root / "out", "--no-report")
    assert res.returncode == 0, res.stderr
    return root / "out" / "tiny" / "3step", time.monotonic() - t0


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


def test_killed_at_random_moments_then_resumed_equals_a_clean_campaign(tmp_path, clean_campaign):
    seed = int(os.environ.get("HARNESS_FAULT_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    path = small_scenario(tmp_path)
    clean_camp, clean_wall_s = clean_campaign
    clean_out, faulty_out = tmp_path / "clean", tmp_path / "faulty"
    # The clean campaign, run once for the module, is copied in: the faulted runs must leave it as
    # they leave every file outside their campaign. Its report is never compared (summary: runs and
    # campaign.json); the faulted campaign builds its own, killed or not, and must end with one.
    shutil.copytree(clean_camp, clean_out / "tiny" / "3step")
    clean = summary(clean_out / "tiny" / "3step")
    assert {k: v[0] for k, v in clean.items() if k != "campaign.json"} == {"floor": "ok", "torch_sdpa": "ok"}
    # A kill lands anywhere from past the interpreter's start-up to as long as the clean run took
    # here (the machine's pace, load included).
    max_delay_s = max(2.0, clean_wall_s)

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
            wait_for(lambda: any_running(camp), f"seed {seed}: an arm to run", proc=proc)
            delay = rng.uniform(0.2, 1.0)
        else:
            delay = rng.uniform(1.0, max_delay_s)  # past the interpreter's own start-up
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        log.append(f"attempt {attempt}: {sig.name} after {delay:.1f}s force={force} -> rc {proc.returncode}")
        assert "Traceback" not in err, f"seed {seed}: {log}\n{err}"
        left = wait_no_process(str(camp), timeout=ORPHAN_WAIT_S)
        assert not left, f"seed {seed}: {log}: processes of the campaign still running: {left}"
        if attempt == 0:  # nor did an orphan finish within that wait: the runner writes timing.json last
            cut = [
                p.parent
                for p in camp.glob("runs/*/run.json")
                if json.loads(p.read_text())["status"] == "running"
            ]
            finished = [run.name for run in cut if (run / "timing.json").exists()]
            assert not finished, f"seed {seed}: {log}: the runner of {finished} ran on after its harness died"

    res = harness("run", path, "--profile", "3step", "--out", faulty_out)
    assert res.returncode == 0, f"seed {seed}: {log}\n{res.stderr}"
    assert (camp / "report.md").is_file() and (camp / "results.json").is_file()
    assert summary(camp) == clean, f"seed {seed}: {log}"
    assert not processes_mentioning(str(camp))
    assert tree_digest(tmp_path, skip=camp) == outside, f"seed {seed}: files outside the campaign changed"


# --- round 2: a full disk, a read-only campaign, a report interrupted, hostile command lines ------

sys.path.insert(0, str(Path(__file__).resolve().parent / "report"))
from campaign_factory import ArmSpec, make_campaign  # noqa: E402

from harness.report import REPORT_FILES, build_report  # noqa: E402


def no_temp_files(root: Path) -> list[Path]:
    return [
        p
        for p in root.rglob("*")
        if p.name.endswith(".tmp") or ".tmp." in p.name or p.name.startswith(".backup-")
    ]


def run_json_statuses(camp: Path) -> dict[str, str]:
    return {p.parent.name: json.loads(p.read_text())["status"] for p in sorted(camp.glob("runs/*/run.json"))}


def error_line(res) -> str:
    """The one error line (asserts there is one, and no traceback); progress bars are left out."""
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, res.stderr
    return lines[0]


def test_a_full_disk_while_a_run_writes_its_record_is_one_line_and_a_rerun_works(tmp_path):
    """The write of the run's final record fails with ENOSPC (the harness's fault hook: it runs
    everywhere, root or not). Main: exit 4, a traceback, the arm left `running`, a stray temp file."""
    path = small_scenario(tmp_path)
    out = tmp_path / "out"
    camp = out / "tiny" / "3step"
    full = {**os.environ, "HARNESS_FAULT_WRITE": "ENOSPC:run.json:3"}  # 1: running, 2: its pid, 3: the end
    res = harness("run", path, "--profile", "3step", "--out", out, "--arms", "torch_sdpa", env=full)
    assert res.returncode == 3, res.stderr
    line = error_line(res)
    assert line.startswith(f"error: {camp}/runs/torch_sdpa/run.json: cannot write (No space left on device")
    assert "which still said running, was removed" in line
    assert not no_temp_files(out), no_temp_files(out)
    assert "running" not in run_json_statuses(camp).values()
    assert all(a["status"] != "running" for a in json.loads((camp / "campaign.json").read_text())["arms"])
    res = harness("run", path, "--profile", "3step", "--out", out, "--arms", "torch_sdpa", "--no-report")
    assert res.returncode == 0, res.stderr
    assert run_json_statuses(camp) == {"torch_sdpa": "ok"}


@contextlib.contextmanager
def small_tmpfs(folder: Path, size: str = "24m"):
    folder.mkdir(parents=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (the ENOSPC fault-hook test covers a full disk here)")
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
    )
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """A file that takes every free byte of ``folder``'s file system."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as fh:
        for block in (1 << 20, 4096, 1):
            try:
                while True:
                    fh.write(b"\0" * block)
            except OSError as err:
                assert err.errno == errno.ENOSPC
    return filler


def test_a_really_full_disk_is_one_line_keeps_every_record_and_frees_up(tmp_path, clean_campaign):
    path = small_scenario(tmp_path)
    with small_tmpfs(tmp_path / "disk") as disk:
        camp = disk / "tiny" / "3step"
        shutil.copytree(clean_campaign[0], camp)  # a finished campaign; its report is made here
        res = harness("report", camp)
        assert res.returncode == 0, res.stderr
        before = tree_digest(camp)
        filler = fill(disk)
        for args in (("run", path, "--profile", "3step", "--out", disk, "--arms", "torch_sdpa", "--force"),
                     ("report", camp)):  # fmt: skip
            res = harness(*args)
            assert res.returncode == 3, res.stderr
            assert "No space left on device" in error_line(res)
            assert tree_digest(camp) == before, f"{args[0]}: a record or the report changed on a full disk"
            assert not no_temp_files(disk)
        filler.unlink()
        # The report is left as it was (checked above): the run that follows writes its records.
        res = harness("run", path, "--profile", "3step", "--out", disk, "--arms", "torch_sdpa", "--force",
                      "--no-report")  # fmt: skip
        assert res.returncode == 0, res.stderr


@contextlib.contextmanager
def read_only(folder: Path):
    """``folder`` made read-only: a read-only bind mount as root (permission bits do not stop root),
    else the write bits taken off; skips with the reason when neither works."""
    if os.geteuid() == 0:
        res = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
        if res.returncode != 0:
            pytest.skip(
                f"as root, a read-only bind mount is needed and failed: {res.stderr.decode().strip()}"
            )
        try:
            subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], check=True, capture_output=True)
            yield "read-only bind mount"
        finally:
            subprocess.run(["umount", "-l", str(folder)], check=False)
        return
    modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")]}
    for p in modes:
        p.chmod(modes[p] & ~0o222)
    try:
        yield "write bits off"
    finally:
        for p, mode in modes.items():
            p.chmod(mode)


def test_a_read_only_campaign_reads_and_refuses_writes_in_one_line(tmp_path):
    arms = [ArmSpec("torch_sdpa", role="reference"), ArmSpec("cand", noise=2.0)]
    camp = make_campaign(tmp_path, arms)
    build_report(camp)
    shutil.rmtree(camp.metrics_dir)  # compare would fill this cache: it must do without it
    c, elsewhere = camp.path, tmp_path / "elsewhere"
    before = tree_digest(c)
    mp4 = c / "runs" / "cand" / "output.mp4"
    with read_only(c):
        assert harness("compare", f"{c}:torch_sdpa", f"{c}:cand").returncode == 0  # main: exit 4
        res = harness("report", "--from-results", c / "results.json", "--out", elsewhere)
        assert res.returncode == 0 and (elsewhere / "index.html").is_file(), res.stderr
        res = harness("report", "--from-results", c / "results.json")
        assert res.returncode == 2 and error_line(res).startswith(f"error: --out: {c}: cannot write there")
        res = harness("report", c)
        assert res.returncode == 3 and "cannot write" in error_line(res)  # main: exit 4, a traceback
        res = harness("history", c, "--out", elsewhere / "h")
        assert res.returncode == 0, res.stderr
        res = harness("history", c, "--out", c / "h")
        assert res.returncode == 2 and error_line(res).startswith(
            f"error: --out: {c / 'h'}: cannot write there"
        )
        res = harness("ingest", c, "--arm", "x", "--mp4", mp4, "--attn-type", "torch_sdpa", "--seed", "42")
        assert res.returncode == 2 and error_line(res).startswith(f"error: campaign: {c}: cannot write there")
        res = harness("run", quick_scenario(tmp_path), "--profile", "3step", "--out", c)
        assert res.returncode == 2 and error_line(res).startswith("error: --out: ")
    assert tree_digest(c) == before


@pytest.mark.concurrency
def test_sigterm_during_a_report_says_interrupted_and_keeps_the_old_report(tmp_path):
    arms = [ArmSpec("torch_sdpa", role="reference"), ArmSpec("floor", role="noise_floor", attn_type="torch_sdpa",
            kv_reversed=True, noise=2.0), ArmSpec("cand", noise=3.0)]  # fmt: skip
    camp = make_campaign(tmp_path, arms)
    build_report(camp)
    shutil.rmtree(camp.metrics_dir)  # the next report measures everything again: seconds of work
    (camp.path / "runs" / "cand" / "stderr.log").write_text("changed\n")
    report = {n: tree_digest(camp.path / n) if (camp.path / n).is_dir() else (camp.path / n).read_bytes()
              for n in REPORT_FILES}  # fmt: skip
    proc = harness_popen("report", camp.path)
    # The signal lands mid-analysis, not at a guessed moment: once the first measurement is in
    # metrics/ (the old report is set aside by then, and seconds of measuring are left).
    wait_for(lambda: any(camp.metrics_dir.glob("*.json")), "the report's first measurement",
             timeout=300, proc=proc, poll_s=0.02)  # fmt: skip
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the report finished before the signal (a fast machine)")
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "interrupted", err  # main: silent
    now = {n: tree_digest(camp.path / n) if (camp.path / n).is_dir() else (camp.path / n).read_bytes()
           for n in REPORT_FILES}  # fmt: skip
    assert now == report, "assets/ or a page half rewritten"
    assert not no_temp_files(camp.path)


@pytest.mark.parametrize(
    "arms, expect",
    [
        ("", "--arms: no name given in ''"),
        (",", "--arms: no name given in ','"),
        ("torch_sdpa,torch_sdpa", "--arms: 'torch_sdpa' given twice"),
    ],
)
def test_an_arms_flag_without_a_name_or_with_one_twice_is_refused(tmp_path, arms, expect):
    res = harness("run", tiny_scenario(tmp_path), "--profile", "3step", "--out", tmp_path, "--arms", arms,
                  "--dry-run")  # fmt: skip
    assert res.returncode == 2 and error_line(res).startswith(f"error: {expect}"), (
        res.stderr
    )  # main: every arm


def test_a_manifest_may_not_write_outside_the_folder_harness_runs_in(tmp_path):
    work, away = tmp_path / "work", tmp_path / "away"
    work.mkdir()
    mp4 = make_campaign(tmp_path / "src", [ArmSpec("torch_sdpa", role="reference")]).run("torch_sdpa").output
    man = work / "manifest.yaml"
    man.write_text(f"campaign: ../away/c1\narms:\n  - {{name: a, mp4: {mp4}, attn_type: torch_sdpa}}\n")
    res = harness("ingest", man, cwd=work)
    assert res.returncode == 2 and error_line(res).startswith(
        f"error: {man}:1: campaign: {away / 'c1'} is outside"
    )
    assert not away.exists()


def test_an_ingested_log_with_a_stray_rank_is_refused_naming_the_line(tmp_path):
    logs = Path(__file__).resolve().parent / "fixtures" / "lightx2v_logs"
    rank0 = tmp_path / "rank0.log"
    lines = (logs / "h3_tp2_rank0.log").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if "Run Dit every step" in ln) + 1
    lines.insert(at, lines[at - 1].replace("Rank 0", "Rank 5"))
    rank0.write_text("\n".join(lines) + "\n")
    mp4 = make_campaign(tmp_path / "src", [ArmSpec("torch_sdpa", role="reference")]).run("torch_sdpa").output
    camp = tmp_path / "h3" / "pr"
    res = harness("ingest", camp, "--arm", "a", "--mp4", mp4, "--attn-type", "torch_sdpa", "--log", rank0,
                  "--log", logs / "h3_tp2_rank1.log")  # fmt: skip
    assert res.returncode == 2, res.stderr  # main: exit 0 with s/step from one step, the warm-up's
    assert (
        error_line(res)
        == f"error: {rank0}:{at + 1}: rank 5 in a profile line, but the logs are of rank(s) 0, 1"
    )
    assert not camp.exists()
