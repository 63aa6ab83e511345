"""Test-session rules shared by every test module."""

from __future__ import annotations

import os
import signal

import pytest
from hypothesis import settings

# torch on one OpenMP thread in the test processes and every process they start (arms, probes,
# ranks, commands inherit it), unless the developer set a count. `make test` runs two workers on
# two cores: a second thread per process only spins, waiting for a core the other worker holds
# (a tiny LTX-2 arm: 7 s of generation instead of 0.2). Set before any test module imports torch,
# which reads it once.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# `make test CPU_TIME=1`: CPU seconds per test and module at the end of the run (tests/cpu_time.py).
pytest_plugins = ("cpu_time",)

# A suite started in the background (`make test &`, nohup) inherits SIGINT ignored, and so would
# every child it starts: the Ctrl-C tests (exit 130, quiet handler) need Python's own handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Property tests: random examples where a developer runs them (they find new cases), a fixed set
# in CI (HYPOTHESIS_PROFILE=ci, set by .ci/run): a landing is judged on the same examples each time,
# and a case found locally is added to the test's explicit examples.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# Under pytest-xdist (`make test` runs two workers, --dist loadgroup) a test module is one unit of
# work, so its module fixtures are built once. A session fixture is built once per worker that
# needs it: the ones that cost minutes keep every test that reads them on one worker (a group
# each). Those groups start first, then modules with slow tests: the longest work is not left
# for the end.
SHARED_ON_ONE_WORKER = ("cpu_campaign", "shadowed_campaign")
# Tests that share something outside the process (the one local Slurm cluster) run one at a time.
SERIAL_MARKERS = ("slurm",)


def xdist_group_of(item: pytest.Item) -> tuple[int, str]:
    """(rank, group): rank 0 for the shared campaigns, 1 for serial resources, 2 for a module."""
    for name in SHARED_ON_ONE_WORKER:
        if name in getattr(item, "fixturenames", ()):
            return 0, name
    for marker in SERIAL_MARKERS:
        if item.get_closest_marker(marker):
            return 1, marker
    module = item.nodeid.split("::", 1)[0]
    return 2, module.removeprefix("tests/").removesuffix(".py")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(config, items):
    group_of = {}
    first: dict[str, int] = {}
    has_slow: set[str] = set()
    for index, item in enumerate(items):
        rank, group = xdist_group_of(item)
        item.add_marker(pytest.mark.xdist_group(group))
        group_of[item.nodeid] = (rank, group)
        first.setdefault(group, index)
        if item.get_closest_marker("slow"):
            has_slow.add(group)

    def order(item: pytest.Item) -> tuple[int, bool, int]:
        rank, group = group_of[item.nodeid]
        return rank, group not in has_slow, first[group]

    items.sort(key=order)  # stable: each group keeps its own order and stays together


@pytest.fixture(autouse=True, scope="session")
def terminal_size_as_in_one_process():
    """An xdist worker runs with COLUMNS=80 and LINES=24 set, a run in one process with neither
    (text then laid out for 100 columns): tests, and the commands they start, see the same."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for name in ("COLUMNS", "LINES"):
            os.environ.pop(name, None)


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


@pytest.fixture
def no_plugin_left():
    """A test that imports plugins in this process starts and ends with the harness's own entries."""
    from harness.attention.registry import BACKENDS
    from harness.scenario.plugins import unload_all

    unload_all()
    before = set(BACKENDS.names())
    yield
    unload_all()
    assert set(BACKENDS.names()) == before
