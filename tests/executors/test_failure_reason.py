"""harness.executors.process.failure_reason: one line saying how a runner's process ended."""

import signal

from hypothesis import given
from hypothesis import strategies as st

from harness.executors.process import failure_reason, signal_text

# What torchrun prints when a rank dies of a signal (torch.distributed.elastic's ChildFailedError).
TORCHRUN_TAIL = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
========================================================
harness.runners.lightx2v.launch FAILED
--------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-04_09:00:00
  host      : node
  rank      : 0 (local_rank: 0)
  exitcode  : -11 (pid: 1234)
  error_file: <N/A>
  traceback : Signal 11 (SIGSEGV) received by PID 1234
========================================================
"""


def test_a_signal_is_named_and_step_markers_are_no_log_line():
    tail = "loading weights\nMiniMax-H3 step: 1 / 4\nHARNESS_STEP 2/4\n"
    assert failure_reason(-9, tail) == "killed by SIGKILL (signal 9): loading weights"
    assert failure_reason(3, "RuntimeError: boom\n") == "exit code 3: RuntimeError: boom"
    assert failure_reason(-11, "") == "killed by SIGSEGV (signal 11)"


def test_a_rank_killed_under_torchrun_is_named():
    assert failure_reason(1, TORCHRUN_TAIL) == (
        "exit code 1 (a rank killed by SIGSEGV (signal 11)): traceback : Signal 11 (SIGSEGV) received by PID 1234"
    )


@given(st.integers(min_value=-70, max_value=255), st.text(max_size=400))
def test_any_ending_reads_as_one_line_that_names_a_signal_death(code, tail):
    reason = failure_reason(code, tail)
    assert "\n" not in reason and "\r" not in reason
    assert len(reason) <= 400
    if code < 0:
        assert reason.startswith(f"killed by {signal_text(-code)}")
    else:
        assert reason.startswith(f"exit code {code}")
    if code < 0 and -code in {s.value for s in signal.Signals}:
        assert f"(signal {-code})" in reason
