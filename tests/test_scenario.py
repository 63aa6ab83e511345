import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import ScenarioError
from harness.registry import RUNNERS
from harness.scenario.load import expand_vars, json_schema, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]

GOOD = """\
name: demo
runner: builtin
seed: 7
env: {ROCM_DETERMINISTIC_FP32_BLAS: 1, FLAG: true}
profiles:
  3step: {infer_steps: 4}
arms:
  - {name: ref, attn_type: torch_sdpa, role: reference}
  - {name: floor, attn_type: torch_sdpa, kv_reversed: true, role: noise_floor}
  - {name: cand, attn_type: sage_emul_aiter}
"""


def bad(text: str, environ=None) -> str:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "s.yaml", environ or {})
    assert info.value.exit_code == 2
    msg = str(info.value)
    assert "\n" not in msg, "errors are one line"
    return msg


def test_good_scenario_parses():
    s = parse_scenario(GOOD, "s.yaml", {})
    assert s.reference.name == "ref"
    assert s.seed_list == [7]
    assert s.env == {"ROCM_DETERMINISTIC_FP32_BLAS": "1", "FLAG": "1"}
    assert [a.role.value for a in s.arms] == ["reference", "noise_floor", "candidate"]


def test_typo_key_names_file_line_field_and_suggests():
    msg = bad(GOOD.replace("{name: cand, attn_type:", "{name: cand, atn_type:"))
    assert msg.startswith("s.yaml:10: arms[2].atn_type: unknown key; did you mean 'attn_type'?")
    assert "expected one of: name, attn_type" in msg


def test_typo_top_level_key():
    msg = bad(GOOD.replace("seed: 7", "sede: 7"))
    assert msg.startswith("s.yaml:3: sede: unknown key; did you mean 'seed'?")


def test_missing_reference_arm():
    msg = bad(GOOD.replace("role: reference", "role: candidate"))
    assert "exactly one arm must have role: reference (found none)" in msg
    assert msg.startswith("s.yaml:1:")


def test_two_reference_arms():
    msg = bad(GOOD.replace("kv_reversed: true, role: noise_floor", "role: reference"))
    assert "found ref, floor" in msg


def test_wrong_type_names_line_and_value():
    msg = bad(GOOD.replace("seed: 7", "seed: seven"))
    assert msg.startswith("s.yaml:3: seed: ")
    assert "integer" in msg and "'seven'" in msg


def test_wrong_enum():
    msg = bad(GOOD.replace("role: noise_floor", "role: floor"))
    assert msg.startswith("s.yaml:9: arms[1].role:")
    assert "reference" in msg and "noise_floor" in msg


def test_unset_variable_names_variable_and_line():
    text = GOOD.replace("runner: builtin", "runner: builtin\ndescription: ${HARNESS_TEST_UNSET}")
    msg = bad(text)
    assert msg.startswith("s.yaml:3: description: environment variable HARNESS_TEST_UNSET is not set")


def test_variable_expansion_and_default():
    assert expand_vars("${A}/x/${B:-dflt}", {"A": "root"}) == "root/x/dflt"
    text = GOOD.replace("runner: builtin", "runner: builtin\ndescription: ${WHO}-${MISSING:-x}")
    assert parse_scenario(text, "s.yaml", {"WHO": "me"}).description == "me-x"


def test_duplicate_arm_names():
    msg = bad(GOOD.replace("name: cand", "name: ref"))
    assert "repeated: ref" in msg


def test_seed_and_seeds_exclusive():
    msg = bad(GOOD.replace("seed: 7", "seed: 7\nseeds: [1, 2]"))
    assert "give 'seed' or 'seeds', not both" in msg


def test_yaml_syntax_error_has_line():
    msg = bad("name: x\narms: [\n")
    assert msg.startswith("s.yaml:") and "not valid YAML" in msg


def test_top_level_not_mapping():
    assert "expected a mapping" in bad("- a\n- b\n")


def test_missing_file():
    with pytest.raises(ScenarioError, match="nope.yaml: scenario file not found"):
        load_scenario("nope.yaml")


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_scenarios_validate(path):
    environ = {"LIGHTX2V_ROOT": "/opt/lightx2v", "MINIMAX_H3_MODEL": "/models/h3"}
    s = load_scenario(path, environ)
    assert s.name


def test_json_schema_lists_fields():
    schema = json_schema()
    assert {"name", "runner", "arms", "profiles"} <= set(schema["properties"])
    json.dumps(schema)


def _cli(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=cwd
    )


def test_cli_validate_bad_file_exits_2_without_traceback(tmp_path):
    f = tmp_path / "typo.yaml"
    f.write_text(GOOD.replace("kv_reversed: true", "kv_reversd: true"))
    res = _cli("scenarios", "validate", str(f))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert f"{f}:9: arms[1].kv_reversd: unknown key; did you mean 'kv_reversed'?" in res.stderr


def test_cli_validate_says_what_a_kernels_scenario_measures(tmp_path):
    """Backends x shapes, not '0 arms'; a shape that names its own backends leaves pairs out."""
    f = tmp_path / "k.yaml"
    shapes = "[{name: a, heads: 1, seq_q: 8, head_dim: 8}, {name: b, heads: 1, seq_q: 8, head_dim: 8}]"
    f.write_text(
        f"name: k\nkind: kernels\nkernels:\n  shapes: {shapes}\n  backends: [torch_sdpa, sage_emul_thuml]\n"
    )
    res = _cli("scenarios", "validate", str(f), str(ROOT / "scenarios" / "e2e_3step.yaml"))
    assert res.returncode == 0, res.stderr
    kernels, e2e = res.stdout.splitlines()
    assert kernels == f"{f}: ok (kernels, 2 backends x 2 shapes, profiles: -)"
    assert e2e.endswith(
        f"(e2e, {len(load_scenario(ROOT / 'scenarios' / 'e2e_3step.yaml').arms)} arms, profiles: 3step, full)"
    )
    f.write_text(f.read_text().replace("head_dim: 8}]", "head_dim: 8, backends: [torch_sdpa]}]"))
    res = _cli("scenarios", "validate", str(f))
    assert res.stdout == f"{f}: ok (kernels, 2 backends x 2 shapes, 3 of the 4 pairs measured, profiles: -)\n"
    two = tmp_path / "two.yaml"
    two.write_text(
        "name: two\nrunner: builtin\ninputs: {a: {}, b: {prompt: rain}}\n"
        "arms: [{name: ref, attn_type: torch_sdpa, role: reference}]\n"
    )
    assert (
        _cli("scenarios", "validate", str(two)).stdout == f"{two}: ok (e2e, 1 arms x 2 inputs, profiles: -)\n"
    )


def test_cli_schema_is_json():
    res = _cli("scenarios", "schema")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["title"] == "harness scenario"


# --- names, seeds, duplicate keys, backends: checked before anything runs ----------------------


@pytest.mark.parametrize(
    "edit, where",
    [
        (("name: demo", "name: ../../etc/x"), "s.yaml:1: name: '../../etc/x' is not a valid name"),
        (("3step: {", "../../../x: {"), "s.yaml:6: profiles['../../../x']: '../../../x' is not a valid name"),
        (("3step: {", "/tmp/x: {"), "profiles['/tmp/x']: '/tmp/x' is not a valid name"),
        (("name: cand", "name: ../cand"), "s.yaml:10: arms[2].name: '../cand' is not a valid name"),
        (("name: cand", "name: .hidden"), "arms[2].name: '.hidden' is not a valid name"),
        (("seed: 7", "seed: 7\ndefault_profile: ../x"), "default_profile: '../x' is not a valid name"),
    ],
)
def test_names_that_are_paths_are_refused(edit, where):
    assert where in bad(GOOD.replace(*edit))


@pytest.mark.parametrize(
    "seed, why",
    [
        ('"42"', "valid integer"),
        ("42.0", "valid integer"),
        ("1.2e+29", "valid integer"),
        ("true", "valid integer"),
        ("-1", "greater than or equal to 0"),
        (str(2**32), "less than 4294967296"),
        (str(10**40), "less than"),
    ],
)
def test_seed_must_be_an_integer_in_0_to_2_pow_32(seed, why):
    msg = bad(GOOD.replace("seed: 7", f"seed: {seed}"))
    assert msg.startswith("s.yaml:3: seed: ") and why in msg
    msg = bad(GOOD.replace("seed: 7", f"seeds: [1, {seed}]"))
    assert msg.startswith("s.yaml:3: seeds[1]: ") and why in msg


def test_largest_seed_is_accepted():
    assert parse_scenario(GOOD.replace("seed: 7", f"seed: {2**32 - 1}"), "s.yaml", {}).seed == 2**32 - 1


@pytest.mark.parametrize(
    "text, msg",
    [
        (
            GOOD.replace("seed: 7", "seed: 7\nseed: 8"),
            "s.yaml:4: duplicate key 'seed' (first given on line 3)",
        ),
        (
            GOOD.replace(
                "{name: cand, attn_type: sage_emul_aiter}", "{name: cand, attn_type: x, attn_type: y}"
            ),
            "s.yaml:10: duplicate key 'attn_type' (first given on line 10)",
        ),
        (
            GOOD.replace("  3step: {infer_steps: 4}", "  3step: {infer_steps: 4}\n  3step: {infer_steps: 9}"),
            "s.yaml:7: duplicate key '3step' (first given on line 6)",
        ),
    ],
)
def test_duplicate_yaml_keys_name_both_lines(text, msg):
    assert bad(text) == msg


def test_yaml_merge_keys_still_override():
    text = "base: &b {attn_type: torch_sdpa, role: reference}\n" + GOOD.replace(
        "{name: ref, attn_type: torch_sdpa, role: reference}", "{<<: *b, name: ref}"
    )
    with pytest.raises(ScenarioError, match="base: unknown key"):
        parse_scenario(text, "s.yaml", {})  # merged fine; only the extra top-level key is refused


def test_unknown_builtin_backend_is_refused_with_its_line():
    msg = bad(GOOD.replace("attn_type: sage_emul_aiter", "attn_type: sage_emul_aitr"))
    assert msg.startswith("s.yaml:10: arms[2].attn_type: unknown attention backend 'sage_emul_aitr'")
    assert "did you mean 'sage_emul_aiter'?" in msg


LX = """\
name: lx
runner: lightx2v
lightx2v: {root: /opt/lx, model_path: /m, model_cls: minimax_h3, task: ref2av, config_json: c.json, prompt: p}
arms:
  - {name: ref, attn_type: torch_sdpa, role: reference}
  - {name: cand, attn_type: ATTN}
"""


def test_lightx2v_backends_are_lightx2v_names_checked_only_for_form():
    s = parse_scenario(LX.replace("ATTN", "some_lightx2v_only_attn"), "s.yaml", {})
    assert s.arms[1].attn_type == "some_lightx2v_only_attn"  # LightX2V's probe checks it, not us
    msg = bad(LX.replace("ATTN", '"../x"'))
    assert msg.startswith("s.yaml:6: arms[1].attn_type: '../x' is not a valid name")


def test_cli_validate_refuses_an_unknown_backend(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(GOOD.replace("attn_type: sage_emul_aiter", "attn_type: nosuch"))
    res = _cli("scenarios", "validate", str(f))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith(f"{f}:10: arms[2].attn_type: unknown attention backend 'nosuch'")


def test_unknown_kernels_backend_is_refused_with_its_line():
    text = (
        (ROOT / "scenarios" / "kernels_smoke.yaml")
        .read_text()
        .replace("    - sage_attn2\n", "    - sage_atn2\n")
    )
    msg = bad(text)
    assert "kernels.backends[5]: unknown attention backend 'sage_atn2'; did you mean 'sage_attn2'?" in msg


# --- the core names no runner: runners, kinds and executors come from the registries ----------


def test_an_unknown_runner_is_named_with_a_did_you_mean():
    msg = bad(GOOD.replace("runner: builtin", "runner: builtn"))
    # Other test modules register runners of their own (tests/executors: "script"): the list is the
    # registry's at this moment, the harness's own three always among it.
    known = RUNNERS.names()
    assert {"builtin", "diffusers", "lightx2v"} <= set(known)
    assert (
        msg
        == f"s.yaml:2: runner: unknown runner 'builtn'; did you mean 'builtin'? (known: {', '.join(known)})"
    )
    assert bad(GOOD.replace("runner: builtin\n", "")).startswith(
        f"s.yaml:1: (top level): 'runner' is required (one of: {', '.join(known)})"
    )


def test_an_unknown_kind_and_executor_are_named_with_a_did_you_mean():
    msg = bad(GOOD.replace("seed: 7", "seed: 7\nkind: kernel"))
    assert (
        msg == "s.yaml:4: kind: unknown scenario kind 'kernel'; did you mean 'kernels'? (known: e2e, kernels)"
    )
    msg = bad(GOOD.replace("seed: 7", "seed: 7\nexecutor: {kind: slurn}"))
    assert msg.startswith("s.yaml:4: executor.kind: unknown executor 'slurn'; did you mean 'slurm'?")


def test_a_runners_arm_fields_exist_only_in_its_scenarios():
    s = parse_scenario(
        LX.replace("attn_type: ATTN}", "attn_type: sage_attn2, sageattention: aiter_shim}"), "s.yaml", {}
    )
    assert s.arms[1].sageattention == "aiter_shim" and s.arms[0].count_ops == {}
    msg = bad(LX.replace("attn_type: ATTN}", "attn_type: x, count_ops: {op: no_colon}}"))
    assert msg.startswith("s.yaml:6: arms[1].count_ops: count_ops.op: expected 'module:function'")
    msg = bad(
        GOOD.replace(
            "{name: cand, attn_type: sage_emul_aiter}",
            "{name: cand, attn_type: sage_emul_aiter, count_ops: {}}",
        )
    )
    assert msg.startswith("s.yaml:10: arms[2].count_ops: unknown key (expected one of: name, attn_type,")
    assert "sageattention" not in msg


def test_a_runners_block_is_its_own():
    assert bad(LX.replace("lightx2v: {", "other: {")).startswith("s.yaml:3: other: unknown key")
    assert "runner 'lightx2v' needs a 'lightx2v' block" in bad(
        LX.replace("lightx2v: {", "x: {").replace("x: {", "#")
    )
    msg = bad(GOOD + "lightx2v: {root: /r}\n")  # the block of a runner this scenario does not name
    assert msg.startswith("s.yaml:11: lightx2v: unknown key") and "builtin" in msg
    assert parse_scenario(GOOD + "builtin: {preset: tiny}\n", "s.yaml", {}).runner_block().preset == "tiny"


def test_a_runner_registered_by_a_plug_in_brings_its_block_arm_fields_and_checks():
    """The same core validates a runner it has never heard of: the registries say everything."""
    from pydantic import Field

    from harness.registry import RUNNER_SCENARIO, RUNNERS
    from harness.runners.base import Runner
    from harness.scenario.model import Strict
    from harness.scenario.parts import FieldProblem, ScenarioPart

    class ToyBlock(Strict):
        size: int = Field(ge=1)

    class ToyArm(Strict):
        colour: str = "red"

    def no_blue_reference(scenario):
        for i, arm in enumerate(scenario.arms):
            if arm.role.value == "reference" and arm.colour == "blue":
                raise FieldProblem(("arms", i, "colour"), "a reference is never blue")

    class ToyRunner(Runner):
        def resolve_params(self, scenario, arm, profile):
            return {"size": scenario.toy.size, "colour": arm.colour}

        def prepare(self, spec, run_dir, *, dry_run=False):
            raise NotImplementedError

    part = ScenarioPart(
        block="toy", model=ToyBlock, required=True, arm_fields=ToyArm, check=no_blue_reference
    )
    RUNNERS.register("toy", ToyRunner)
    RUNNER_SCENARIO.register("toy", part)
    try:
        text = GOOD.replace("runner: builtin", "runner: toy\ntoy: {size: 2}").replace(
            "role: reference}", "role: reference, colour: COLOUR}"
        )
        s = parse_scenario(text.replace("COLOUR", "green"), "s.yaml", {})
        assert s.toy.size == 2 and s.arms[0].colour == "green" and s.arms[1].colour == "red"
        assert s.runner_block() is s.toy
        from harness.plan import build_plan

        assert build_plan(s)[0].params == {"size": 2, "colour": "green"}
        assert bad(text.replace("COLOUR", "blue")) == "s.yaml:9: arms[0].colour: a reference is never blue"
        assert bad(text.replace("size: 2", "size: 0").replace("COLOUR", "green")).startswith(
            "s.yaml:3: toy.size: Input should be greater than or equal to 1"
        )
        assert "runner 'toy' needs a 'toy' block" in bad(
            text.replace("toy: {size: 2}\n", "").replace("COLOUR", "x")
        )
        assert "toy" in json_schema()["properties"]
    finally:
        RUNNERS.unregister("toy")
        RUNNER_SCENARIO.unregister("toy")
    assert "unknown runner 'toy'" in bad(text.replace("COLOUR", "green"))


def test_the_json_schema_has_every_registered_block_and_arm_field():
    schema = json_schema()
    assert {"builtin", "lightx2v", "kernels", "verdict", "executor"} <= set(schema["properties"])
    arm = next(d for n, d in schema["$defs"].items() if n == "Arm")
    assert {"name", "attn_type", "sageattention", "count_ops"} <= set(arm["properties"])


def test_the_verdict_rules_use_the_speed_tests_default_level():
    from harness.compare.significance import DEFAULT_ALPHA
    from harness.scenario.verdict import VerdictRules

    assert VerdictRules().alpha == DEFAULT_ALPHA


def test_a_chaotic_comment_states_the_band_its_values_give():
    """A comment beside `chaotic_below_db:` names the bounds that value and chaotic_band_db make: the
    value is the band's centre, chaotic below its lower bound."""
    checked = 0
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        lines = [ln for ln in path.read_text().splitlines() if ln.strip().startswith("chaotic_below_db:")]
        for line in (ln for ln in lines if "#" in ln):
            rules = load_scenario(path).verdict
            low, high = (rules.chaotic_below_db + side * rules.chaotic_band_db / 2 for side in (-1, 1))
            comment = line.split("#", 1)[1]
            assert f"< {low:g} dB" in comment and f"{low:g}..{high:g} dB" in comment, (path.name, line)
            checked += 1
    assert checked


def test_further_problems_are_named_by_line_and_key_then_counted():
    from harness.scenario.load import MORE_NAMED

    msg = bad(GOOD.replace("{name: cand, attn_type:", "{name: cand, atn_type:"))
    assert msg.endswith("(also: line 10: arms[2].attn_type: required field is missing)")
    arms = "".join(f"  - {{name: c{i}, atn_type: torch_sdpa}}\n" for i in range(MORE_NAMED + 2))
    msg = bad(GOOD + arms)
    also = msg.split(" (also: ", 1)[1]
    named = [p for p in also.split("; ") if p.startswith("line ")]
    assert len(named) == MORE_NAMED and named[0].startswith("line 12: arms[4].atn_type: unknown key")
    total = 2 * (MORE_NAMED + 2)  # each typo and the attn_type it leaves missing
    assert also.endswith(f"; and {total - 1 - MORE_NAMED} more problem(s))")
