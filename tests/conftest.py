"""Test-session rules shared by every test module."""

from __future__ import annotations

import os
import signal

import pytest

# A suite started in the background (`make test &`, nohup) inherits SIGINT ignored, and so would
# every child it starts: the Ctrl-C tests (exit 130, quiet handler) need Python's own handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With LIGHTX2V_ROOT set (CI sets it), a skipped real-LightX2V test is a failure: it did not run."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and item.get_closest_marker("lightx2v") and os.environ.get("LIGHTX2V_ROOT"):
        report.outcome = "failed"
        report.longrepr = f"LIGHTX2V_ROOT is set, yet this LightX2V test skipped: {report.longrepr}"


@pytest.fixture(scope="session")
def shadowed_campaign(tmp_path_factory):
    """The in-situ campaign of insitu_testutil, run and reported once (tests only read it)."""
    from insitu_testutil import run_shadowed_campaign

    return run_shadowed_campaign(tmp_path_factory.mktemp("insitu"))
