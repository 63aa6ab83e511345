"""The GitHub Actions workflow (.github/workflows/ci.yml) and the CI scripts (.ci/).

actionlint (with shellcheck on the `run:` scripts; both from the `dev` extra) checks the workflow,
and a copy with one broken reference shows it really checks it. The rest parses the YAML for
what the workflow is for: its triggers, the test job, the one-file page uploaded unzipped, the
job summary from `harness report`, the campaign folder, and the speed figures fed to
github-action-benchmark on the default branch only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"
CI_SCRIPTS = [REPO / ".ci" / "run", *sorted((REPO / ".ci").glob("*.sh"))]
# actions/upload-artifact v7.0.0 added `archive` (false: one file uploaded as it is, unzipped).
ARCHIVE_SINCE_MAJOR = 7
BENCHMARK_ACTION = "benchmark-action/github-action-benchmark"


def find_tool(name: str) -> str:
    """The `dev` extra's binary beside this interpreter (a venv's bin/), else one on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} not installed (pip install -e '.[dev]' installs it)")
    return found


def run_tool(tool: str, *args: str) -> subprocess.CompletedProcess:
    # The tool's folder first on PATH: actionlint runs the shellcheck installed beside it.
    env = {**os.environ, "PATH": f"{Path(tool).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([tool, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def steps_of(job: dict) -> list[dict]:
    return job.get("steps", [])


def all_steps(workflow: dict) -> list[tuple[str, dict]]:
    return [(name, step) for name, job in workflow["jobs"].items() for step in steps_of(job)]


def uses(step: dict, action: str) -> bool:
    return step.get("uses", "").split("@")[0] == action


def major(step: dict) -> int:
    return int(step["uses"].split("@")[1].removeprefix("v"))


def makefile_default(name: str) -> str:
    match = re.search(rf"^{name} \?= (\S+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert match, f"Makefile: no default for {name}"
    return match.group(1)


def test_actionlint_passes_the_workflow():
    actionlint = find_tool("actionlint")
    result = run_tool(actionlint, str(WORKFLOW))
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_catches_a_broken_copy(tmp_path):
    actionlint = find_tool("actionlint")
    text = WORKFLOW.read_text()
    assert "needs: e2e-3step\n" in text
    broken = tmp_path / "ci.yml"
    broken.write_text(text.replace("needs: e2e-3step\n", "needs: e2e-3stepx\n"))
    result = run_tool(actionlint, str(broken))
    assert result.returncode == 1
    assert 'needs job "e2e-3stepx" which does not exist' in result.stdout


def test_ci_scripts_pass_shellcheck():
    shellcheck = find_tool("shellcheck")
    result = run_tool(shellcheck, *map(str, CI_SCRIPTS))
    assert result.returncode == 0, result.stdout + result.stderr


def test_triggers_are_pushes_and_pull_requests(workflow):
    # PyYAML reads the bare key `on` as True (YAML 1.1).
    triggers = workflow.get("on", workflow.get(True))
    assert {"push", "pull_request"} <= set(triggers)
    assert triggers["push"] is None, "every branch's pushes run CI"


def test_every_action_is_pinned_by_major_version(workflow):
    pinned = [step["uses"] for _, step in all_steps(workflow) if "uses" in step]
    assert pinned
    assert [u for u in pinned if not re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", u)] == []


def test_test_job_runs_the_ci_entry_point_and_caches_pip(workflow):
    runners = [name for name, step in all_steps(workflow) if step.get("run") == "bash .ci/run"]
    assert runners == ["test"]
    for name, step in all_steps(workflow):
        if uses(step, "actions/setup-python"):
            assert step["with"]["cache"] == "pip", name
            assert step["with"]["cache-dependency-path"] == "pyproject.toml", name


def test_main_job_publishes_the_page_unzipped_and_the_campaign(workflow):
    job = workflow["jobs"]["e2e-3step"]
    scenario = yaml.safe_load((REPO / makefile_default("SCENARIO")).read_text())
    expected = f"{makefile_default('OUT')}/{scenario['name']}/{makefile_default('PROFILE')}"
    assert job["env"]["CAMPAIGN"] == expected, "the folder `make e2e-3step` writes"

    steps = steps_of(job)
    runs = [step.get("run", "") for step in steps]
    main = next(i for i, run in enumerate(runs) if "make e2e-3step" in run)
    report = next(i for i, run in enumerate(runs) if "harness report" in run)
    assert main < report
    assert 'harness report "$CAMPAIGN" --single-file' in runs[report]
    assert 'cp "$CAMPAIGN/index.html" "$RUNNER_TEMP/$PAGE"' in runs[report]

    uploads = [(i, step) for i, step in enumerate(steps) if uses(step, "actions/upload-artifact")]
    pages = [(i, step) for i, step in uploads if step["with"].get("archive") is False]
    assert len(pages) == 1
    index, page = pages[0]
    assert index > report
    assert major(page) >= ARCHIVE_SINCE_MAJOR
    assert page["with"]["path"] == "${{ runner.temp }}/${{ env.PAGE }}"
    assert job["env"]["PAGE"].endswith(".html")
    folders = [step for _, step in uploads if step["with"]["path"] == "${{ env.CAMPAIGN }}"]
    assert [step["with"]["name"] for step in folders] == ["e2e_3step-campaign"]


def test_job_summary_comes_once_from_harness_report(workflow):
    steps = steps_of(workflow["jobs"]["e2e-3step"])
    summaries = [step for step in steps if "--github-summary" in step.get("run", "")]
    assert len(summaries) == 1
    assert "harness report" in summaries[0]["run"]
    main = next(step for step in steps if "make e2e-3step" in step.get("run", ""))
    assert main["run"].startswith("env -u GITHUB_STEP_SUMMARY "), "the run itself adds no summary"


def test_benchmark_step_charts_the_speed_figures_on_the_default_branch_only(workflow):
    jobs = workflow["jobs"]
    [(name, job)] = [
        (name, job) for name, job in jobs.items() if any(uses(s, BENCHMARK_ACTION) for s in steps_of(job))
    ]
    guard = job["if"]
    assert "github.event_name == 'push'" in guard
    assert "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)" in guard
    assert job["needs"] == "e2e-3step"
    assert job["permissions"] == {"contents": "write"}
    assert workflow["permissions"] == {"contents": "read"}, "only this job may write"
    assert job["env"]["CAMPAIGN"] == jobs["e2e-3step"]["env"]["CAMPAIGN"]

    steps = steps_of(job)
    download = next(s for s in steps if uses(s, "actions/download-artifact"))
    assert download["with"] == {"name": "e2e_3step-campaign", "path": "${{ env.CAMPAIGN }}"}
    bench = next(s for s in steps if uses(s, BENCHMARK_ACTION))
    assert bench["with"]["tool"] == "customSmallerIsBetter"
    assert bench["with"]["output-file-path"] == "${{ env.CAMPAIGN }}/benchmark.json"
    assert bench["with"]["auto-push"] is True
    assert steps.index(download) < steps.index(bench)
