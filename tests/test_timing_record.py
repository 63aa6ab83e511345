"""timing.json is held to the rules ingest holds a LightX2V log to: a step or total that is not
finite, negative or zero, a time beyond any run, or a step count beyond any schedule is one line
naming the file and the field, and `harness report` and `harness compare` exit 3 (main: a
traceback and exit 4 for NaN/Infinity; "-0.500 s" in pr.md for a negative step)."""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent / "report"))  # campaign_factory
from campaign_factory import ArmSpec, make_campaign  # noqa: E402
from cli_testutil import harness  # noqa: E402

from harness.errors import HarnessError  # noqa: E402
from harness.records import MAX_DIT_STEPS, MAX_SECONDS, TimingRecord  # noqa: E402
from harness.store import TIMING_JSON, CampaignDir, read_record  # noqa: E402

ARMS = [ArmSpec("torch_sdpa", role="reference"), ArmSpec("cand", noise=4.0)]


def timing_text(steps: list, **totals) -> str:
    data = {"schema": "harness.timing/1", "source": "builtin", "stages": {"dit": 3.0},
            "steps": [{"index": i + 1, "seconds": s} for i, s in enumerate(steps)], **totals}  # fmt: skip
    return json.dumps(data)  # NaN and Infinity as JSON's readers (Python's) write them


BAD = {
    "nan step": (timing_text([2.0, float("nan"), 1.0]), "steps.1.seconds"),
    "infinite step": (timing_text([2.0, float("inf"), 1.0]), "steps.1.seconds"),
    "negative step": (timing_text([2.0, -0.5, -0.5]), "steps.1.seconds"),
    "zero step": (timing_text([2.0, 0.0, 1.0]), "steps.1.seconds"),
    "1e308 step": (timing_text([1e308, 1e308, 1.0]), "steps.0.seconds"),
    "infinite total": (timing_text([2.0, 1.0], pipeline_total_s=float("inf")), "pipeline_total_s"),
    "steps beyond any schedule": (timing_text([1.0] * (MAX_DIT_STEPS + 1)), "steps"),
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> CampaignDir:
    return make_campaign(tmp_path_factory.mktemp("timing"), ARMS)


@pytest.fixture
def camp(pristine: CampaignDir, tmp_path: Path) -> CampaignDir:
    shutil.copytree(pristine.path, tmp_path / "c1")
    return CampaignDir(tmp_path / "c1")


def error_lines(res) -> list[str]:
    assert "Traceback" not in res.stderr, res.stderr
    return [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_timing_is_one_line_naming_file_and_field(tmp_path, case):
    text, field = BAD[case]
    path = tmp_path / TIMING_JSON
    path.write_text(text)
    with pytest.raises(HarnessError) as err:
        read_record(path, TimingRecord)
    line = str(err.value)
    assert "\n" not in line and str(path) in line and f" at {field}:" in line, line


def test_a_million_steps_are_refused():
    text = timing_text([1.0] * 10**6)
    with pytest.raises(ValueError, match="more than"):
        TimingRecord.model_validate_json(text)


@pytest.mark.parametrize("case", ["nan step", "negative step", "1e308 step"])
def test_report_names_the_timing_and_exits_3(camp, case):
    path = camp.run("torch_sdpa").file(TIMING_JSON)
    path.write_text(BAD[case][0])
    res = harness("report", camp.path)
    assert res.returncode == 3, res.stderr  # main: exit 4 (NaN), or 0 with "-0.500 s" in pr.md
    named = [e for e in error_lines(res) if str(path) in e]
    assert len(named) == 1 and BAD[case][1] in named[0], res.stderr
    assert "-0.500" not in (camp.path / "pr.md").read_text()


@pytest.mark.parametrize("case", ["infinite step", "zero step", "steps beyond any schedule"])
def test_compare_names_the_timing_and_exits_3(camp, case):
    path = camp.run("cand").file(TIMING_JSON)
    path.write_text(BAD[case][0])
    res = harness("compare", f"{camp.path}:torch_sdpa", f"{camp.path}:cand", "--format", "json")
    assert res.returncode == 3, res.stderr
    named = [e for e in error_lines(res) if str(path) in e]
    assert len(named) == 1 and BAD[case][1] in named[0], res.stderr


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_a_step_time_is_taken_exactly_when_it_is_a_measurement(seconds):
    text = timing_text([2.0, seconds])
    plausible = math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS
    try:
        rec = TimingRecord.model_validate_json(text)
    except ValueError:
        assert not plausible
    else:
        assert plausible and rec.s_per_step == seconds


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["pipeline_total_s", "wall_total_s"]))
def test_a_total_is_taken_exactly_when_it_is_a_measurement(seconds, field):
    plausible = math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS
    try:
        TimingRecord.model_validate_json(timing_text([1.0], **{field: seconds}))
    except ValueError:
        assert not plausible
    else:
        assert plausible
