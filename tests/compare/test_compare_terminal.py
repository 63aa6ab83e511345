"""`harness compare` on a hostile run folder: what its records say reaches the terminal as text,
never as a control sequence (a campaign from a CI artifact or an ingest is anyone's)."""

from __future__ import annotations

from campaign_factory import ArmSpec, write_run
from cli_testutil import harness

HOSTILE = "kernel failed\x1b[2J\x1b]0;pwned\x07 \x1b]8;;https://x\x1b\\here\u202eevil"
UNSEEN = set("\x1b\x07\u202e")


def test_a_runs_reason_and_log_reach_the_terminal_as_text(ref_run, tmp_path):
    bad = write_run(
        tmp_path / "a" / "broken",
        ArmSpec(
            "broken", status="failed", reason=f"exit code 1: {HOSTILE}", log_tail=f"RuntimeError: {HOSTILE}\n"
        ),
    )
    done = harness("compare", str(ref_run.path), str(bad.path))
    shown = done.stdout + done.stderr
    assert "kernel failed" in shown, shown
    assert not UNSEEN & set(shown), [c for c in shown if c in UNSEEN]
    assert "\\x1b[2J" in shown and "\\u202e" in shown
