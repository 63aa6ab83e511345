import os

import pytest

from harness.errors import HarnessError
from harness.records import RunRecord, RunSpec, RunStatus
from harness.safe_write import atomic_write_bytes, atomic_write_json
from harness.store import CampaignDir, find_campaign, read_record, resolve_run_dir, tail_text, write_record


def _spec(**kw):
    base = dict(scenario="s", runner="builtin", arm="a", seed=1, attn_type="torch_sdpa")
    return RunSpec(**{**base, **kw})


def test_atomic_write_replaces_whole_file(tmp_path):
    p = tmp_path / "x.json"
    atomic_write_json(p, {"a": 1})
    atomic_write_json(p, {"a": 2})
    assert p.read_text().strip().endswith("}") and '"a": 2' in p.read_text()
    assert [f.name for f in tmp_path.iterdir()] == ["x.json"], "no temp files left behind"


def test_atomic_write_failure_keeps_old_content(tmp_path):
    p = tmp_path / "x.bin"
    atomic_write_bytes(p, b"old")

    with pytest.raises(TypeError):
        atomic_write_bytes(p, "not bytes")  # fails inside the write
    assert p.read_bytes() == b"old"
    assert [f.name for f in tmp_path.iterdir()] == ["x.bin"]


@pytest.mark.concurrency  # a child process killed mid-write; .ci/flake-hunt
def test_atomic_write_interrupted_process_leaves_old_file(tmp_path):
    """A writer killed mid-write (here: SIGKILL in a child) never leaves a half-written target."""
    import subprocess
    import sys

    p = tmp_path / "big.bin"
    atomic_write_bytes(p, b"complete")
    code = (
        "import os,signal,harness.safe_write as s\n"
        "def kill(*a): os.kill(os.getpid(), signal.SIGKILL)\n"
        "os.replace=kill\n"
        f"s.atomic_write_bytes({str(p)!r}, b'x'*10_000_000)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], timeout=300)
    assert res.returncode == -9
    assert p.read_bytes() == b"complete"


def test_record_roundtrip_with_infinity(tmp_path):
    rec = RunRecord(spec=_spec(), spec_hash=_spec().spec_hash(), status=RunStatus.ok)
    write_record(tmp_path / "run.json", rec)
    back = read_record(tmp_path / "run.json", RunRecord)
    assert back.status == RunStatus.ok and back.spec == rec.spec
    assert '"schema": "harness.run/1"' in (tmp_path / "run.json").read_text()


def test_read_record_errors_name_the_file(tmp_path):
    with pytest.raises(HarnessError, match="missing.json: file not found"):
        read_record(tmp_path / "missing.json", RunRecord)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(HarnessError, match="bad.json"):
        read_record(tmp_path / "bad.json", RunRecord)
    (tmp_path / "wrong.json").write_text('{"spec": 3}')
    with pytest.raises(HarnessError, match=r"wrong.json: invalid RunRecord at spec"):
        read_record(tmp_path / "wrong.json", RunRecord)


def test_spec_hash_changes_with_params_not_timeout():
    a = _spec(params={"x": 1})
    assert a.spec_hash() == _spec(params={"x": 1}, timeout_s=5).spec_hash()
    assert a.spec_hash() != _spec(params={"x": 2}).spec_hash()


def test_run_key_has_seed_only_for_multi_seed():
    assert _spec().key == "a"
    assert _spec(multi_seed=True, seed=43).key == "a@43"


def test_resolve_run_dir_forms(tmp_path):
    camp = CampaignDir(tmp_path / "camp")
    run = camp.run("arm")
    run.path.mkdir(parents=True)
    run.write(RunRecord(spec=_spec(), spec_hash="x"))
    assert resolve_run_dir(str(run.path)).path == run.path
    assert resolve_run_dir(f"{camp.path}:arm").path == run.path
    with pytest.raises(HarnessError, match="no run 'other'"):
        resolve_run_dir(f"{camp.path}:other")
    with pytest.raises(HarnessError, match="no such run directory"):
        resolve_run_dir(str(tmp_path / "nothing"))
    with pytest.raises(HarnessError, match="not a campaign directory"):
        find_campaign(tmp_path)


def test_tail_text_reads_end(tmp_path):
    p = tmp_path / "log"
    p.write_text("".join(f"line {i}\n" for i in range(1000)))
    assert tail_text(p, lines=2) == "line 998\nline 999"
    assert tail_text(tmp_path / "none") == ""
    assert os.path.getsize(p) > 0


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_follow_the_umask(tmp_path, mask, mode):
    import subprocess
    import sys

    p = tmp_path / "x.json"
    code = f"import harness.safe_write as s; s.atomic_write_json({str(p)!r}, {{'a': 1}})"
    res = subprocess.run([sys.executable, "-c", code], preexec_fn=lambda: os.umask(mask))
    assert res.returncode == 0
    assert p.stat().st_mode & 0o777 == mode


def test_move_aside_keeps_the_damaged_file(tmp_path):
    from harness.store import move_aside

    p = tmp_path / "run.json"
    p.write_text("{broken")
    first = move_aside(p)
    p.write_text("{broken again")
    second = move_aside(p)
    assert not p.exists() and first != second
    assert first.name.startswith("run.json.corrupt-") and first.read_text() == "{broken"
    assert second.read_text() == "{broken again"


def _hold_lock(path, ready):
    """A child that takes the campaign lock and waits (the parent kills it)."""
    import subprocess
    import sys

    code = (
        "import sys, time, pathlib\n"
        "from harness.store import CampaignDir\nfrom harness.writer_lock import CampaignLock\n"
        f"lock = CampaignLock(CampaignDir({str(path)!r})).acquire()\n"
        f"pathlib.Path({str(ready)!r}).write_text('1')\n"
        "time.sleep(60)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code])


@pytest.mark.concurrency  # the lock of a live, then killed, process; .ci/flake-hunt
def test_campaign_lock_names_its_holder_and_is_taken_over_after_it_dies(tmp_path):
    import signal
    import time

    from cli_testutil import wait_for

    from harness.errors import CampaignLocked
    from harness.writer_lock import CampaignLock, lock_holder

    camp = CampaignDir(tmp_path / "camp")
    camp.path.mkdir()
    ready = tmp_path / "ready"
    holder = _hold_lock(camp.path, ready)
    try:
        wait_for(ready.exists, "the child to take the lock", timeout=60, proc=holder)
        seen = lock_holder(camp)
        assert seen is not None and seen.pid == holder.pid
        t0 = time.monotonic()
        with pytest.raises(CampaignLocked) as info:
            CampaignLock(camp).acquire()
        assert time.monotonic() - t0 < 5, "a second run is refused at once"
        assert info.value.exit_code == 2
        assert f"pid {holder.pid} on " in str(info.value) and "started 20" in str(info.value)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert lock_holder(camp) is None, "the kernel dropped the dead holder's lock"
    with CampaignLock(camp) as lock:
        assert lock.took_over is not None and lock.took_over.pid == holder.pid
        assert lock_holder(camp) is not None
    with CampaignLock(camp) as lock:
        assert lock.took_over is None, "a clean release leaves no holder behind"


def test_damaged_campaign_json_is_rebuilt_from_the_runs(tmp_path):
    camp = CampaignDir(tmp_path / "camp")
    run = camp.run("a")
    run.path.mkdir(parents=True)
    run.write(RunRecord(spec=_spec(), spec_hash="x", status=RunStatus.ok))
    bad = camp.run("b")
    bad.path.mkdir(parents=True)
    bad.run_json.write_text("{")
    camp.campaign_json.write_text("not json")
    rec, problem = camp.record_or_rebuilt()
    assert "campaign.json" in problem and "built from the run folders" in problem
    assert [a.key for a in rec.arms] == ["a"] and rec.scenario_name == "s"
    assert bad.record_or_none() is None and run.record_or_none() is not None


def test_read_record_refuses_a_newer_schema_and_names_the_file(tmp_path):
    p = tmp_path / "run.json"
    write_record(p, RunRecord(spec=_spec(), spec_hash="h"))
    assert read_record(p, RunRecord).schema_version == "harness.run/1"
    p.write_text(p.read_text().replace('"harness.run/1"', '"harness.run/2"'))
    with pytest.raises(HarnessError) as info:
        read_record(p, RunRecord)
    assert str(info.value) == (
        f"{p}: schema harness.run/2 is newer than this harness reads (harness.run/1); read it with a newer harness"
    )
    camp = CampaignDir(tmp_path / "c")
    run = camp.run("a")
    run.path.mkdir(parents=True)
    os.replace(p, run.run_json)
    assert run.record_or_none() is None
    with pytest.raises(HarnessError, match="harness.run/2 is newer"):
        run.record()


def test_read_record_refuses_an_older_schema_and_reads_the_current_one(tmp_path):
    from test_records import Widget

    p = tmp_path / "w.json"
    p.write_text('{"schema": "harness.widget/1", "size": 1.5, "label": "Infinity"}')
    with pytest.raises(HarnessError) as info:
        read_record(p, Widget)
    assert str(info.value) == (
        f"{p}: schema harness.widget/1 is older than this harness reads (harness.widget/3); "
        "read it with the harness that wrote it"
    )
    p.write_text('{"schema": "harness.widget/3", "size_mm": "Infinity"}')  # JSON mode: "Infinity" reads
    assert read_record(p, Widget).size_mm == float("inf")
    p.write_text('{"schema": "harness.widget/3", "size_mm": [')
    with pytest.raises(HarnessError, match="not valid JSON"):
        read_record(p, Widget)
