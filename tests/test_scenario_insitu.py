"""The scenario fields of in-situ measurement and schedules: what they resolve to in a run spec,
and one located line for each way of getting them wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ScenarioError
from harness.plan import build_plan
from harness.scenario.insitu import insitu_settings, schedule_spec, shadow_specs
from harness.scenario.load import parse_scenario
from harness.scenario.verdict import accepted_baseline

BASE = """\
name: demo
runner: builtin
seed: 7
{top}
arms:
  - {{name: ref, attn_type: torch_sdpa, role: reference}}
  - {{name: floor, attn_type: torch_sdpa, kv_reversed: true, role: noise_floor}}
  - {{name: cand, attn_type: sage_emul_thuml, attn_options: {{granularity: per_thread}}}}
{arms}"""


def scenario(arms: str = "", top: str = ""):
    return parse_scenario(BASE.format(arms=arms, top=top), "s.yaml", {})


def bad(arms: str = "", top: str = "") -> str:
    with pytest.raises(ScenarioError) as info:
        scenario(arms, top)
    msg = str(info.value)
    assert info.value.exit_code == 2 and "\n" not in msg
    return msg


SHADOWED = "  - {name: ref_insitu, attn_type: torch_sdpa, shadows: [floor, cand, sage_emul_aiter]}\n"


def test_shadows_resolve_to_arms_or_backends_and_reach_the_run_spec():
    s = scenario(SHADOWED, "accepted_baseline: cand")
    arm = s.arm("ref_insitu")
    specs = shadow_specs({a.name: a for a in s.arms}, arm)
    assert [(x.name, x.attn_type, x.kv_reversed) for x in specs] == [
        ("floor", "torch_sdpa", True),
        ("cand", "sage_emul_thuml", False),
        ("sage_emul_aiter", "sage_emul_aiter", False),
    ]
    assert specs[1].attn_options == {"granularity": "per_thread"}
    assert insitu_settings(arm).sample_rows == 256  # defaults when only shadows are given
    assert (
        insitu_settings(s.arm("ref")) is None
        and shadow_specs({a.name: a for a in s.arms}, s.arm("ref")) == []
    )
    spec = next(x for x in build_plan(s) if x.arm == "ref_insitu")
    assert [x.name for x in spec.shadows] == ["floor", "cand", "sage_emul_aiter"] and spec.insitu is not None
    assert s.accepted_baseline == "cand" and s.insitu_tolerance.floor_ratio == 2.0


def test_insitu_and_schedule_blocks():
    s = scenario(
        "  - {name: r2, attn_type: torch_sdpa, shadows: [cand],\n"
        "     insitu: {sample_rows: 64, seed: 3, yardstick: float64, capture: {steps: [1, -1], heads: 2}}}\n"
        "  - {name: hybrid, attn_type: sage_emul_thuml, schedule: {exact_first: 2, exact_steps: [5]}}\n",
        "insitu_tolerance: {max_rel_l1: 0.05, min_cosine: 0.999}",
    )
    ins = insitu_settings(s.arm("r2"))
    assert (ins.sample_rows, ins.seed, ins.yardstick, ins.capture.heads) == (64, 3, "float64", 2)
    sched = schedule_spec(s.arm("hybrid"))
    assert (sched.exact, sched.exact_first, sched.exact_last, sched.exact_steps) == ("torch_sdpa", 2, 0, [5])
    assert s.insitu_tolerance.min_cosine == 0.999


@pytest.mark.parametrize(
    "arms, top, where, what",
    [
        ("  - {name: x, attn_type: torch_sdpa, shadows: [x]}\n", "", "arms[3].shadows", "cannot shadow itself"),
        ("  - {name: x, attn_type: torch_sdpa, shadows: [cand, cand]}\n", "", "arms[3].shadows",
         "named more than once: cand"),
        ("  - {name: x, attn_type: torch_sdpa, shadows: [sage_emul_thum]}\n", "", "arms[3].shadows",
         "unknown attention backend 'sage_emul_thum'; did you mean 'sage_emul_thuml'?"),
        ("  - {name: h, attn_type: sage_emul_thuml, schedule: {exact_first: 1}}\n"
         "  - {name: x, attn_type: torch_sdpa, shadows: [h]}\n", "", "arms[4].shadows", "cannot be a shadow"),
        ("  - {name: h, attn_type: sage_emul_thuml, schedule: {exact: torch_sdpa}}\n", "", "arms[3].schedule",
         "the schedule names no exact step"),
        ("  - {name: h, attn_type: sage_emul_thuml, schedule: {exact_steps: [0]}}\n", "", "arms[3].schedule",
         "exact_steps count from 1"),
        ("  - {name: h, attn_type: sage_emul_thuml, schedule: {exact: sdpa, exact_first: 1}}\n", "",
         "arms[3].schedule.exact", "unknown attention backend 'sdpa'"),
        ("  - {name: x, attn_type: torch_sdpa, insitu: {sample_row: 8}}\n", "", "arms[3].insitu.sample_row",
         "did you mean 'sample_rows'?"),
        ("", "accepted_baseline: sage_attn2", "accepted_baseline", "neither an arm nor a shadow of one"),
        ("", "verdict: {accepted_baseline: sage_attn2}", "verdict.accepted_baseline",
         "'sage_attn2' is neither an arm nor a shadow of one"),
        ("", "accepted_baseline: cand\nverdict: {accepted_baseline: floor}", "accepted_baseline",
         "'cand' and verdict.accepted_baseline 'floor' differ: name one baseline"),
        ("", "insitu_tolerance: {floor: 2}", "insitu_tolerance.floor", "unknown key"),
    ],
)  # fmt: skip
def test_bad_fields_are_one_located_line(arms, top, where, what):
    msg = bad(arms, top)
    assert f": {where}: " in msg and what in msg, msg
    assert msg.startswith("s.yaml:")


def test_either_key_names_the_one_accepted_baseline():
    for top in ("accepted_baseline: cand", "verdict: {accepted_baseline: cand}",
                "accepted_baseline: cand\nverdict: {accepted_baseline: cand}"):  # fmt: skip
        assert accepted_baseline(scenario(SHADOWED, top)) == "cand"
        assert accepted_baseline(scenario(SHADOWED, top).model_dump()) == "cand"  # as campaign.json keeps it
    assert accepted_baseline(scenario(SHADOWED)) is None


def test_the_reference_takes_no_schedule():
    text = BASE.format(arms="", top="").replace(
        "{name: ref, attn_type: torch_sdpa, role: reference}",
        "{name: ref, attn_type: torch_sdpa, role: reference, schedule: {exact_first: 1}}",
    )
    with pytest.raises(ScenarioError, match=r"arms\[0\]\.schedule: the reference runs one backend"):
        parse_scenario(text, "s.yaml", {})


def test_a_runner_that_does_not_measure_shadows_refuses_them():
    import yaml

    from harness.scenario.load import validate_scenario

    shipped = Path(__file__).resolve().parents[1] / "scenarios" / "diffusers_wan_tiny.yaml"
    data = yaml.safe_load(shipped.read_text())
    validate_scenario(data)  # as shipped: fine
    data["arms"][1]["shadows"] = [data["arms"][0]["name"]]
    with pytest.raises(ScenarioError, match=r"arms\[1\]\.shadows: runner diffusers does not measure shadows"):
        validate_scenario(data)
