"""`harness report` exits 3 whenever the report is not whole: an arm that did not end ok (a
killed run's `running`, a failed one) is named and the pages open with INCOMPLETE; a write
that fails (any errno, even one the analysis rides over: a PNG, results.json) is one line and
the previous report stays byte for byte. A skipped arm (backend unavailable here) is by design."""

from __future__ import annotations

import os
import shutil

import pytest
from campaign_factory import ArmSpec, copy_campaign, make_campaign, report_digest
from cli_testutil import harness, the_error_line

from harness.report import build_report


@pytest.mark.parametrize(
    "status, rc, named",
    [
        ("running", 3, "cand: left running by a harness run that is gone"),  # main: exit 0
        ("failed", 3, "cand: ended failed, not ok"),  # main: exit 0
        ("interrupted", 3, "cand: ended interrupted, not ok"),
        ("skipped", 0, None),  # a backend that cannot run here: by design, exit 0 in docs/exit-codes.md
    ],
)
def test_an_arm_that_did_not_end_ok_makes_the_report_incomplete(campaign_factory, status, rc, named):
    camp = campaign_factory([ArmSpec("torch_sdpa", role="reference"), ArmSpec("cand", status=status)])
    res = harness("report", camp.path)
    assert res.returncode == rc, res.stderr
    assert "Traceback" not in res.stderr
    pr, md = (camp.path / "pr.md").read_text(), (camp.path / "report.md").read_text()
    if named is None:
        assert res.stderr == "" and "INCOMPLETE" not in pr + md
        return
    line = the_error_line(res)
    assert line.startswith(f"error: {named}") and line.endswith(": not measured"), line
    assert "INCOMPLETE" in pr.splitlines()[2] and named in md  # the report is written, and says so first


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """A reference and a candidate, reported once; each case of a failing write reports a copy."""
    camp = make_campaign(
        tmp_path_factory.mktemp("reported"),
        [ArmSpec("torch_sdpa", role="reference"), ArmSpec("cand", noise=2.0)],
    )
    build_report(camp)
    return camp


@pytest.mark.parametrize("name", ["*.png", "results.json"])
@pytest.mark.parametrize("code", ["ENOSPC", "EIO", "EMFILE"])
def test_a_write_that_fails_exits_3_and_keeps_the_previous_report(reported, tmp_path, code, name):
    camp = copy_campaign(reported, tmp_path)
    before = report_digest(camp.path)
    assert "results.json" in before and any(k.endswith(".png") for k in before)
    # Measured again from scratch: every figure and results.json are written anew.
    shutil.rmtree(camp.metrics_dir)
    (camp.path / "runs" / "cand" / "stderr.log").write_text("changed: the analysis runs again\n")
    res = harness("report", camp.path, env={**os.environ, "HARNESS_FAULT_WRITE": f"{code}:{name}"})
    line = the_error_line(res)  # main: exit 0, a degraded report ("read-only campaign")
    assert res.returncode == 3, res.stderr
    assert os.strerror(getattr(__import__("errno"), code)) in line and str(camp.path) in line
    assert line.endswith("the report is left as it was before")
    assert report_digest(camp.path) == before
    assert not [p for p in camp.path.rglob("*.tmp")] and not list(camp.path.glob(".backup-*"))


def test_a_read_only_campaign_is_one_line_before_anything_is_read(campaign_factory, tmp_path):
    """No degraded report: a campaign that cannot be written is exit 3 naming --from-results."""
    camp = campaign_factory([ArmSpec("torch_sdpa", role="reference")])
    if os.geteuid() == 0:
        pytest.skip("permission bits do not stop root (test_fault_injection covers a read-only mount)")
    camp.path.chmod(0o555)
    try:
        res = harness("report", camp.path)
    finally:
        camp.path.chmod(0o755)
    line = the_error_line(res)
    assert res.returncode == 3 and "cannot write the report there" in line and "--from-results" in line
