"""The speed words against the run order and a busy machine: an exact twin timed under a drift along
the run order reads no speed word once rounds alternate (and the drift is named), a busy machine is
named beside the word, and run.json records from before the machine's load still read."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.analysis.speed import campaign_speed_tests
from harness.compare.significance import DIFFERENCE_WORDS, Word
from harness.compare.summary import RunSummary
from harness.plan import build_plan
from harness.records import MachineLoad, RunRecord, RunSpec
from harness.scenario.load import parse_scenario
from harness.scenario.verdict import VerdictRules

TWIN = """\
name: twin
runner: builtin
seeds: [1, 2]
builtin: {preset: tiny, save_latents: false}
repeats: 4
arms:
  - {name: twin, attn_type: torch_sdpa}
  - {name: ref, attn_type: torch_sdpa, role: reference}
"""


def timed(order: list[tuple[str, str, int, int]], drift: float, noise: float = 0.001,
          load: MachineLoad | None = None) -> list[RunSummary]:  # fmt: skip
    """Runs in the order given, each ``drift`` slower than the one before (the machine warms, a cache
    fills), the same computation otherwise."""
    rng = np.random.default_rng(0)
    out = []
    for i, (key, arm, seed, repeat) in enumerate(order):
        s = (1 + drift) ** i * (1 + noise * rng.standard_normal())
        role = "reference" if arm == "ref" else "candidate"
        out.append(RunSummary(key=key, path="", arm=arm, seed=seed, repeat=repeat, role=role, status="ok",
                              s_per_step=s, pipeline_total_s=10 * s, load=load))  # fmt: skip
    return out


def planned(repeats: int) -> list[tuple[str, str, int, int]]:
    specs = build_plan(parse_scenario(TWIN, "twin.yaml", {}), repeats=repeats)
    return [(s.key, s.arm, s.seed, s.repeat) for s in specs]


def twin_test(order, drift: float, **kw):
    return campaign_speed_tests(timed(order, drift, **kw), "ref", VerdictRules())["twin"]["s_per_step"]


def test_a_drift_along_the_run_order_reads_no_speed_word_for_an_exact_twin_and_is_named():
    # the reference first in every round (the order before): the drift reads as the twin's
    before = sorted(planned(4), key=lambda x: (x[3], x[2], x[1] != "ref"))
    old = twin_test(before, 0.01)
    assert old.word in DIFFERENCE_WORDS and old.words.endswith(
        "run order unchecked: the reference ran first in every pair"
    )
    new = twin_test(planned(4), 0.01)
    assert new.word not in DIFFERENCE_WORDS, new.words
    assert "run order: a run one place later in its round took 1 % longer" in new.words


@settings(max_examples=40, deadline=None)
@given(drift=st.floats(0.002, 0.05), repeats=st.integers(2, 7))
def test_whatever_the_drift_and_rounds_a_twin_is_never_faster_or_slower_by_the_order(drift, repeats):
    t = twin_test(planned(repeats), drift)
    if t.word in DIFFERENCE_WORDS:  # an odd number of rounds leaves part of the drift on one side
        assert "the order explains the difference" in t.words, t.words
    if repeats % 2 == 0:
        assert t.word not in DIFFERENCE_WORDS, t.words


def test_a_busy_machine_is_named_beside_the_speed_word():
    busy = MachineLoad(cpu_count=2, loadavg_1m=[3.1, 3.4], other_cpu_percent=80.0)
    t = twin_test(planned(4), 0.0, load=busy)
    assert t.words.endswith(
        "machine busy during 16 of 16 runs (other processes used 1.6 of 2 cores): timings noisy"
    )
    assert "machine busy" in t.line
    calm = MachineLoad(cpu_count=2, loadavg_1m=[3.1, 3.4], other_cpu_percent=5.0, gpu_util_percent=0.0)
    assert "machine busy" not in twin_test(planned(4), 0.0, load=calm).words
    unmeasured = MachineLoad(cpu_count=2, loadavg_1m=[3.1, 1.0])  # no /proc/stat: the load at the start
    assert "(load 3.1 on 2 cores)" in twin_test(planned(4), 0.0, load=unmeasured).words


@given(cores=st.integers(1, 256), share=st.floats(0, 1), gpu=st.none() | st.floats(0, 100))
def test_busy_is_other_processes_using_a_quarter_of_the_cores_or_the_gpu(cores, share, gpu):
    load = MachineLoad(
        cpu_count=cores, loadavg_1m=[0.0, 0.0], other_cpu_percent=100 * share, gpu_util_percent=gpu
    )
    assert (load.busy() is not None) == (share >= 0.25 or (gpu or 0) >= 50)


def test_a_run_json_without_the_load_still_reads():
    spec = RunSpec(scenario="s", runner="builtin", arm="a", seed=1, attn_type="torch_sdpa")
    old = RunRecord(spec=spec, spec_hash=spec.spec_hash()).model_dump_json(by_alias=True, exclude={"load"})
    assert '"load"' not in old and RunRecord.model_validate_json(old).load is None


def test_every_word_the_speed_test_prints_is_in_the_docs():
    from pathlib import Path
    from typing import get_args

    speed = Path(__file__).parents[2].joinpath("docs", "verdicts.md").read_text().split("## Speed")[1]
    speed = speed.split("\n## ")[0]
    missing = [w for w in get_args(Word) if f"`{w}`" not in speed]
    assert not missing, f"docs/verdicts.md's Speed section does not list {missing}"
    for phrase in ("run order unchecked", "run order:", "the order explains the difference", "machine busy"):
        assert phrase in speed, phrase


@pytest.mark.parametrize("repeats", [2, 3])
def test_round_one_keeps_the_reference_first(repeats):
    order = planned(repeats)
    assert [k for k, _, _, r in order if r == 1] == ["ref@1", "twin@1", "ref@2", "twin@2"]


def test_two_pairs_in_two_orders_say_nothing_of_the_order():
    order = [
        ("ref@1", "ref", 1, 1),
        ("twin@1", "twin", 1, 1),
        ("twin@1~r2", "twin", 1, 2),
        ("ref@1~r2", "ref", 1, 2),
    ]
    t = twin_test(order, 0.3, noise=0.0)
    assert t.offsets == [1, -1] and "run order" not in t.words


def test_a_campaign_on_disk_names_its_busy_runs_and_reads_its_records_without_load(tmp_path):
    from campaign_factory import ArmSpec, make_campaign

    from harness.analysis.analyze import analyze_campaign

    arms = [
        ArmSpec("torch_sdpa", role="reference", jitter=0.01),
        ArmSpec("twin", attn_type="torch_sdpa", jitter=0.01),
    ]
    camp = make_campaign(tmp_path, arms, seeds=(1, 2), repeats=3)
    plain = analyze_campaign(camp).arm("twin")  # the factory's run.json files have no load
    assert plain is not None and "machine busy" not in plain.speed["s_per_step"].words
    busy = MachineLoad(cpu_count=2, loadavg_1m=[3.1, 3.3], other_cpu_percent=75.0)
    for n, run_json in enumerate(sorted(camp.path.glob("runs/twin*/run.json"))):
        rec = RunRecord.model_validate_json(run_json.read_text())
        rec.load = busy if n < 4 else busy.model_copy(update={"other_cpu_percent": 3.0})
        run_json.write_text(rec.model_dump_json(by_alias=True))
    words = analyze_campaign(camp).arm("twin").speed["s_per_step"].words
    assert words.endswith(
        "; machine busy during 4 of 6 runs (other processes used 1.5 of 2 cores): timings noisy"
    )
