import os

import pytest

from harness.errors import HarnessError
from harness.records import RunRecord, RunSpec, RunStatus
from harness.store import (
    CampaignDir,
    atomic_write_bytes,
    atomic_write_json,
    find_campaign,
    read_record,
    resolve_run_dir,
    tail_text,
    write_record,
)


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


def test_atomic_write_interrupted_process_leaves_old_file(tmp_path):
    """A writer killed mid-write (here: SIGKILL in a child) never leaves a half-written target."""
    import subprocess
    import sys

    p = tmp_path / "big.bin"
    atomic_write_bytes(p, b"complete")
    code = (
        "import os,signal,harness.store as s\n"
        "def kill(*a): os.kill(os.getpid(), signal.SIGKILL)\n"
        "os.replace=kill\n"
        f"s.atomic_write_bytes({str(p)!r}, b'x'*10_000_000)\n"
    )
    res = subprocess.run([sys.executable, "-c", code])
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
