"""CPU seconds per test, where the suite's time goes on a CPU-bound machine (`make test CPU_TIME=1`).

Wall time under two xdist workers on two cores mixes a test's own work with its neighbour's;
CPU time does not. Each test's CPU is this process's plus that of the processes it started and
waited for (``RUSAGE_CHILDREN``: ranks, arms, reports, probes). Workers append one JSON line per
test to ``$TEST_CPU_TIME``; the controller prints the costliest tests and test modules at the end.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections import Counter
from pathlib import Path

import pytest

TOP = 15


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _target() -> Path | None:
    path = os.environ.get("TEST_CPU_TIME")
    return Path(path) if path else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    target = _target()
    if target is None:
        yield
        return
    start = (time.monotonic(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN))
    yield
    wall, own, children = (
        time.monotonic() - start[0],
        _cpu(resource.RUSAGE_SELF) - start[1],
        _cpu(resource.RUSAGE_CHILDREN) - start[2],
    )
    line = {
        "test": item.nodeid,
        "cpu": round(own + children, 2),
        "wall": round(wall, 2),
        # which worker ran it and when it ended: the timeline shows a worker left idle at the end
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "end": round(time.time(), 1),
    }
    with target.open("a") as f:  # one short line per write: workers' lines do not interleave
        f.write(json.dumps(line) + "\n")


def pytest_sessionstart(session):
    target = _target()
    if target is not None and not os.environ.get("PYTEST_XDIST_WORKER"):
        target.unlink(missing_ok=True)  # the controller starts the file afresh


def pytest_terminal_summary(terminalreporter):
    target = _target()
    if target is None or os.environ.get("PYTEST_XDIST_WORKER") or not target.is_file():
        return
    rows = [json.loads(line) for line in target.read_text().splitlines() if line.strip()]
    total = sum(r["cpu"] for r in rows)
    by_module: Counter[str] = Counter()
    for r in rows:
        by_module[r["test"].split("::", 1)[0]] += r["cpu"]
    write = terminalreporter.write_line
    terminalreporter.section(f"CPU time: {total:.0f} s over {len(rows)} tests ({target})")
    for test in sorted(rows, key=lambda r: -r["cpu"])[:TOP]:
        write(f"{test['cpu']:8.1f} s CPU {test['wall']:8.1f} s wall  {test['test']}")
    workers: dict[str, list[dict]] = {}
    for r in rows:
        if "end" in r:
            workers.setdefault(r.get("worker", "main"), []).append(r)
    if workers:  # a worker that ends long before the other leaves a core idle: order the groups
        start = min(r["end"] - r["wall"] for group in workers.values() for r in group)
        write(
            "workers: "
            + ", ".join(
                f"{w} {len(g)} tests, ended at {max(r['end'] for r in g) - start:.0f} s"
                for w, g in sorted(workers.items())
            )
        )
    write("by module:")
    for module, cpu in by_module.most_common(TOP):
        write(f"{cpu:8.1f} s CPU  {module}")
