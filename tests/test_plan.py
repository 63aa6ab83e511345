"""harness.plan: repeats in interleaved rounds of alternating order, run keys, spec hashes, floor perturbations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import HarnessError, ScenarioError
from harness.plan import build_plan
from harness.records import RunSpec
from harness.run_keys import run_key
from harness.scenario.load import parse_scenario

SCENARIO = """\
name: demo
runner: builtin
seeds: [1, 2]
builtin: {preset: tiny, save_latents: false}
repeats: 2
arms:
  - {name: cand, attn_type: sage_emul_aiter}
  - {name: ref, attn_type: torch_sdpa, role: reference}
  - {name: rev, attn_type: torch_sdpa, kv_reversed: true, role: noise_floor, repeats: 1}
  - {name: chunks, attn_type: torch_sdpa, kv_chunks: 2, role: noise_floor, repeats: 1}
  - {name: math, attn_type: torch_sdpa, attn_options: {sdpa_backend: math}, role: noise_floor, repeats: 1}
"""


def test_repeats_are_interleaved_and_keyed():
    specs = build_plan(parse_scenario(SCENARIO, "s.yaml", {}))
    assert [s.key for s in specs] == [
        "ref@1", "rev@1", "chunks@1", "math@1", "cand@1",
        "ref@2", "rev@2", "chunks@2", "math@2", "cand@2",
        "cand@1~r2", "ref@1~r2", "cand@2~r2", "ref@2~r2",
    ]  # fmt: skip
    # round 2 runs in the reverse order (the reference last), round 3 as round 1: every plan the same
    three = [s.key for s in build_plan(parse_scenario(SCENARIO, "s.yaml", {}), repeats=3, seeds=[1])]
    assert [k for k in three if k in ("ref@1~r3", "cand@1~r3")] == ["ref@1~r3", "cand@1~r3"]
    assert three == [s.key for s in build_plan(parse_scenario(SCENARIO, "s.yaml", {}), repeats=3, seeds=[1])]
    by_key = {s.key: s for s in specs}
    assert by_key["chunks@1"].kv_chunks == 2 and by_key["math@2"].attn_options == {"sdpa_backend": "math"}
    # a repeat computes the same thing: same spec hash, another run directory
    assert by_key["ref@1~r2"].spec_hash() == by_key["ref@1"].spec_hash()
    assert by_key["ref@1~r2"].repeat == 2


def test_cli_repeats_replace_the_scenarios_but_not_an_arms_own():
    specs = build_plan(parse_scenario(SCENARIO, "s.yaml", {}), repeats=3, seeds=[1])
    keys = [s.key for s in specs]
    assert keys.count("rev@1") == 1 and "rev@1~r2" not in keys
    assert [k for k in keys if k.startswith("cand")] == ["cand@1", "cand@1~r2", "cand@1~r3"]
    with pytest.raises(ScenarioError, match="repeats must be 1 or more"):
        build_plan(parse_scenario(SCENARIO, "s.yaml", {}), repeats=0)


def test_run_keys_and_old_spec_hashes():
    assert run_key("a") == "a" and run_key("a", 42) == "a@42" and run_key("a", 42, 3) == "a@42~r3"
    assert run_key("a", None, 2) == "a~r2"
    spec = RunSpec(scenario="s", runner="builtin", arm="a", seed=1, attn_type="torch_sdpa")
    # fields at their defaults stay out of the hash: a campaign made before them still resumes
    later = {"kv_chunks", "attn_options", "shadows", "insitu", "schedule", "code"}
    # plugins are in no hash: an arm's code identity is the digest of each backend it calls (code)
    dumped = spec.model_dump(mode="json", exclude={"timeout_s", "repeat", "plugins", *later})
    from harness.records import InSituSettings, ShadowSpec, StepSchedule, canonical_hash

    assert spec.spec_hash() == canonical_hash(dumped)
    assert spec.model_copy(update={"kv_chunks": 2}).spec_hash() != spec.spec_hash()
    for changed in (
        {"shadows": [ShadowSpec(name="x", attn_type="sage_emul_thuml")]},
        {"insitu": InSituSettings()},
        {"schedule": StepSchedule(exact_first=1)},
        {"code": {"torch_sdpa": "0" * 64}},
    ):
        assert spec.model_copy(update=changed).spec_hash() != spec.spec_hash()


def test_verdict_rules_and_repeats_are_validated():
    s = parse_scenario(SCENARIO + "verdict: {tolerance: 1.5, chaotic_below_db: 18}\n", "s.yaml", {})
    assert s.verdict.tolerance == 1.5 and s.verdict.chaotic_below_db == 18 and s.verdict.alpha == 0.05
    for bad, match in (
        ("verdict: {tolerance: 0.9}\n", "verdict.tolerance"),
        ("verdict: {tolerence: 2}\n", "did you mean 'tolerance'"),
    ):
        with pytest.raises(ScenarioError, match=match):
            parse_scenario(SCENARIO + bad, "s.yaml", {})
    with pytest.raises(ScenarioError, match="repeats"):
        parse_scenario(SCENARIO.replace("repeats: 2", "repeats: 0"), "s.yaml", {})


def test_the_new_verdict_keys_and_repeats_auto():
    rules = parse_scenario(SCENARIO + "verdict: {accepted_baseline: cand, baseline_margin: 1.1, min_effect: 0.02, "
                           "floor_log_sd: {video_mse: 0.1}, floor_log_sd_source: 'H200, 3 x 3 runs'}\n", "s.yaml",
                           {}).verdict  # fmt: skip
    assert rules.accepted_baseline == "cand" and rules.min_effect == 0.02
    # a stated spread is only what the scenario states, with its source; no kind is assumed
    assert rules.floor_log_sd == {"video_mse": 0.1} and rules.stated_sd("audio_error") == (None, "")
    assert rules.stated_sd("video_mse") == (0.1, "source: H200, 3 x 3 runs")
    for bad, match in (
        ("verdict: {stats_rel_tol: 0.02}\n", "stats_rel_tol: unknown key"),  # the min..max rule is gone
        ("verdict: {floor_log_sd: {latent: 0.1}}\n", "unknown kind 'latent'"),
        ("verdict: {floor_log_sd: {video_mse: 0.1}}\n", "floor_log_sd_source is required"),
        ("verdict: {baseline_margin: 1.0}\n", "baseline_margin"),
        ("repeats_auto: {min: 5, max: 3}\n", "max \\(3\\) must be at least min \\(5\\)"),
    ):
        with pytest.raises(ScenarioError, match=match):
            parse_scenario(SCENARIO + bad, "s.yaml", {})
    auto = parse_scenario(SCENARIO.replace("repeats: 2", "repeats: auto"), "s.yaml", {})
    assert auto.repeats == "auto" and auto.repeats_auto.max == 10
    with pytest.raises(ScenarioError, match="repeats"):
        parse_scenario(SCENARIO.replace("repeats: 2", "repeats: many"), "s.yaml", {})
    from harness.analysis.analyze import scenario_rules
    from harness.errors import HarnessError

    assert scenario_rules({"verdict": {"tolerance": 3}}, "c/campaign.json").tolerance == 3
    # a campaign.json's verdict block is read as a scenario's: a key of an older harness is unknown
    for block, said in (
        ({"tolerance": 3, "stats_rel_tol": 0.02}, "scenario.verdict.stats_rel_tol: unknown key"),
        ({"tolerance": 1.0}, "scenario.verdict.tolerance: Input should be greater than 1"),
        ([1], "scenario.verdict: not a mapping (got list)"),
    ):
        with pytest.raises(HarnessError) as err:
            scenario_rules({"verdict": block}, "c/campaign.json")
        assert str(err.value).startswith(f"c/campaign.json: {said}") and "\n" not in str(err.value)
    # one accepted baseline: the top-level key feeds the verdict's reading; two that differ are refused
    assert scenario_rules({"accepted_baseline": "cand"}, "c/campaign.json").accepted_baseline == "cand"
    both = {"accepted_baseline": "cand", "verdict": {"accepted_baseline": "rev"}}
    with pytest.raises(HarnessError) as err:
        scenario_rules(both, "c/campaign.json")
    said = "c/campaign.json: scenario.accepted_baseline: 'cand' and verdict.accepted_baseline 'rev' differ"
    assert str(err.value).startswith(said) and err.value.exit_code == 2


def test_lightx2v_refuses_perturbations_it_cannot_apply():
    text = """\
name: l
runner: lightx2v
lightx2v: {root: /nowhere, model_path: /nowhere, model_cls: minimax_h3, task: ref2av, config_json: c.json,
           prompt: a dancer}
arms:
  - {name: ref, attn_type: torch_sdpa, role: reference}
  - {name: chunks, attn_type: torch_sdpa, kv_chunks: 2, role: noise_floor}
"""
    with pytest.raises(ScenarioError) as err:
        parse_scenario(text, "l.yaml", {})
    assert str(err.value) == (
        "l.yaml:7: arms[1].kv_chunks: arm chunks: kv_chunks needs a harness backend run by the harness "
        "(K/V chunks merged by log-sum-exp weights); the LightX2V launcher takes none (it applies "
        "kv_reversed alone)"
    )


class CountingList(list):
    """A list that counts the walks over it (a plan that walks every arm once per arm is quadratic)."""

    walks = 0

    def __iter__(self):
        CountingList.walks += 1
        return super().__iter__()


@pytest.mark.parametrize("arms", [20, 400])
def test_planning_walks_the_arms_a_fixed_number_of_times(arms):
    """The shadows of every arm are resolved against one map of the arms, and --arms looks each name
    up in it: the walks over the scenario's arms do not grow with their number."""
    lines = [
        "name: many",
        "runner: builtin",
        "seed: 1",
        "arms:",
        "  - {name: ref, attn_type: torch_sdpa, role: reference}",
        "  - {name: floor, attn_type: torch_sdpa, kv_reversed: true, role: noise_floor}",
        *(f"  - {{name: c{i}, attn_type: torch_sdpa, shadows: [floor]}}" for i in range(arms)),
    ]
    scenario = parse_scenario("\n".join(lines) + "\n", "many.yaml", {})
    object.__setattr__(scenario, "arms", CountingList(scenario.arms))
    for chosen in (None, [f"c{i}" for i in range(arms)] + ["ref", "floor"]):
        CountingList.walks = 0
        specs = build_plan(scenario, arms=chosen)
        assert len(specs) == arms + 2 and all(
            s.shadows[0].kv_reversed for s in specs if s.arm != "ref" and s.arm != "floor"
        )
        assert CountingList.walks <= 5, CountingList.walks


INPUTS = """\
name: demo
runner: builtin
seeds: [1, 2]
builtin: {preset: tiny, save_latents: false, prompt: long prompt, params: {heads: 2}}
inputs:
  long: {}
  short: {prompt: rain, params: {text_tokens: 7}}
arms:
  - {name: ref, attn_type: torch_sdpa, role: reference}
  - {name: cand, attn_type: sage_emul_aiter}
"""


def test_inputs_multiply_the_runs_and_each_input_changes_only_its_fields():
    scenario = parse_scenario(INPUTS, "s.yaml", {})
    specs = build_plan(scenario)
    assert [s.key for s in specs] == [
        "ref@long@1", "cand@long@1", "ref@long@2", "cand@long@2",
        "ref@short@1", "cand@short@1", "ref@short@2", "cand@short@2",
    ]  # fmt: skip
    by_key = {s.key: s for s in specs}
    long, short = by_key["ref@long@1"], by_key["ref@short@1"]
    assert (long.input, long.params["prompt"]) == ("long", "long prompt")
    assert (short.input, short.params["prompt"]) == ("short", "rain")
    # a mapping is merged key by key: the block's heads stay, the input's text_tokens join them
    assert short.params["pipeline"]["heads"] == 2 and short.params["pipeline"]["text_tokens"] == 7
    assert long.params["pipeline"]["text_tokens"] != 7
    assert long.spec_hash() != short.spec_hash()
    assert [s.key for s in build_plan(scenario, inputs=["short"], seeds=[2])] == [
        "ref@short@2",
        "cand@short@2",
    ]
    assert (
        "input" in short.model_dump()
        and "input" not in by_key["ref@long@1"].model_copy(update={"input": None}).model_dump()
    )  # run.json of a scenario without inputs says nothing of them


def test_an_unknown_input_is_one_line():
    from harness.errors import UsageError
    from harness.plan import plan_campaign

    with pytest.raises(UsageError, match=r"^--inputs: no input named 'rainy' \(inputs: long, short\)$"):
        plan_campaign(parse_scenario(INPUTS, "s.yaml", {}), inputs=["rainy"])


@pytest.mark.parametrize(
    ("change", "msg"),
    [
        (
            "  short: {promt: rain}\n",
            r"s\.yaml:\d+: inputs\.short\.promt: unknown key; did you mean 'prompt'\?",
        ),
        ("  short: {prompt: [1]}\n", r"s\.yaml:\d+: inputs\.short\.prompt: .*"),
        ("", r"'inputs' must name at least one input"),
    ],
)
def test_an_input_is_checked_as_the_runners_block(change, msg):
    text = INPUTS.split("inputs:\n")[0] + "inputs:" + (f"\n{change}" if change else " {}\n")
    text += INPUTS.split("  short: {prompt: rain, params: {text_tokens: 7}}\n")[1]
    with pytest.raises(ScenarioError, match=msg):
        parse_scenario(text, "s.yaml", {})


def test_run_keys_with_an_input_parse_back():
    from harness.compare.inputs import parse_run_key

    assert run_key("a", 42, 1, "short") == "a@short@42" and run_key("a", 42, 2, "x.1") == "a@x.1@42~r2"
    assert parse_run_key("a@short@42~r2") == ("a", "42 (short)", 2)
    assert parse_run_key("a@42") == ("a", 42, 1) and parse_run_key("a@1x@42") == ("a", "42 (1x)", 1)


def test_a_single_input_applies_its_fields_and_names_nothing():
    one = INPUTS.replace("  long: {}\n", "")
    specs = build_plan(parse_scenario(one, "s.yaml", {}))
    assert [s.key for s in specs] == ["ref@1", "cand@1", "ref@2", "cand@2"]
    assert specs[0].input is None and specs[0].params["prompt"] == "rain"


NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(arm=NAMES, seed=st.integers(0, 2**32 - 1), repeat=st.integers(1, 50), inp=st.none() | NAMES)
def test_every_run_key_parses_back_to_its_sample(arm, seed, repeat, inp):
    from harness.compare.inputs import parse_run_key
    from harness.run_keys import sample_key, sample_label

    assert parse_run_key(run_key(arm, seed, repeat, inp)) == (arm, sample_label(seed, inp), repeat)
    # samples sort by seed, then input; a campaign's plain seeds and labelled ones together too
    assert sample_key(sample_label(seed, inp)) == (seed, inp or "")


def test_a_bad_parameter_an_input_brings_names_the_input_and_no_other():
    bad = INPUTS.replace("text_tokens: 7", "text_tokenz: 7")
    with pytest.raises(
        ScenarioError, match=r"^scenario demo: inputs\.short: pipeline config: unknown key 'text_tokenz'"
    ):
        build_plan(parse_scenario(bad, "s.yaml", {}))
    # a bad parameter of every input's (the block's) names none
    block = INPUTS.replace("params: {heads: 2}", "params: {headz: 2}")
    with pytest.raises(HarnessError, match=r"^pipeline config: unknown key 'headz'"):
        build_plan(parse_scenario(block, "s.yaml", {}))
