"""Property-based tests of the scenario loader, the gate parser, the YAML loader and the LightX2V
log parser (hypothesis), and the inputs a hostile user tries: alias bombs, huge scenarios,
bytes that are not UTF-8, link loops, implausible log values.

Whatever the input, it either loads or is refused with exit 2 and one line that names the file
(and line and field where there is one); never a traceback, never another exception.
"""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.collect.lightx2v_log import LogProblem, parse_lightx2v_logs
from harness.compare.gates import Gate, load_gate, parse_gate
from harness.errors import HarnessError, ScenarioError
from harness.ingest import load_manifest
from harness.input_files import InputError, decode_utf8, read_input_text
from harness.scenario.load import load_scenario, parse_scenario
from harness.scenario.model import Scenario
from harness.strict_yaml import YamlProblem, line_map, load_yaml

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

GOOD = {
    "name": "demo",
    "runner": "builtin",
    "seed": 7,
    "builtin": {"preset": "tiny"},
    "profiles": {"3step": {"infer_steps": 4}},
    "arms": [
        {"name": "ref", "attn_type": "torch_sdpa", "role": "reference"},
        {"name": "floor", "attn_type": "torch_sdpa", "kv_reversed": True, "role": "noise_floor"},
        {"name": "cand", "attn_type": "sage_emul_aiter"},
    ],
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["../x", "/etc/passwd", "torch_sdpa", "reference", "${NOPE}", "a" * 120, "", "42"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
scenario_keys = st.sampled_from([*Scenario.model_fields, "sede", "arms", "seeds", "profiles"])
arm_keys = st.sampled_from(["name", "attn_type", "role", "kv_reversed", "env", "overrides", "atn_type"])


def check_refusal(err: HarnessError, source: str) -> None:
    msg = str(err)
    assert err.exit_code == 2
    assert "\n" not in msg and "\r" not in msg, msg
    assert msg.startswith(f"{source}"), msg


def load_or_refuse(text: str) -> Scenario | None:
    try:
        return parse_scenario(text, "s.yaml", {})
    except ScenarioError as err:
        check_refusal(err, "s.yaml")
        return None


@SETTINGS
@given(st.text(max_size=300))
def test_any_text_loads_or_is_one_line(text):
    load_or_refuse(text)


@SETTINGS
@given(scenario_keys, values)
def test_any_top_level_field_value(key, value):
    data = {**GOOD, key: value}
    load_or_refuse(yaml.safe_dump(data, allow_unicode=True))


@SETTINGS
@given(st.integers(0, 2), arm_keys, values)
def test_any_arm_field_value(index, key, value):
    arms = [dict(a) for a in GOOD["arms"]]
    arms[index][key] = value
    s = load_or_refuse(yaml.safe_dump({**GOOD, "arms": arms}, allow_unicode=True))
    if s is not None:  # what loads is safe to use as folder names and seeds
        assert all(".." not in a.name and "/" not in a.name for a in s.arms)


@SETTINGS
@given(values)
def test_any_seed_loads_only_as_an_integer_in_range(seed):
    s = load_or_refuse(yaml.safe_dump({**GOOD, "seed": seed}))
    if s is not None and seed is not None:
        assert type(s.seed) is int and 0 <= s.seed < 2**32 and s.seed == seed


@SETTINGS
@given(st.dictionaries(st.text(max_size=12), values, max_size=4))
def test_any_profiles_mapping(profiles):
    s = load_or_refuse(yaml.safe_dump({**GOOD, "profiles": profiles}, allow_unicode=True))
    if s is not None:
        assert all("/" not in p and not p.startswith(".") for p in s.profiles)


gate_keys = st.sampled_from([*Gate.model_fields, "min_psnrr", "max_ratio"])


@SETTINGS
@given(st.dictionaries(gate_keys, values, max_size=4))
def test_any_gate_mapping_loads_or_is_one_line(data):
    text = yaml.safe_dump(data, allow_unicode=True)
    try:
        gate = parse_gate(text, "g.yaml")
    except HarnessError as err:
        check_refusal(err, "g.yaml")
        return
    for name in Gate.model_fields:  # every threshold that loads is a real, finite number
        v = getattr(gate, name)
        assert v is None or isinstance(v, bool) or (isinstance(v, (int, float)) and math.isfinite(v))
        if name.startswith(("min_", "max_")) and v is not None:
            assert not isinstance(v, bool)


@SETTINGS
@given(st.text(max_size=200), st.booleans())
def test_any_gate_text_loads_or_is_one_line(text, as_json):
    try:
        parse_gate(text, "g.json" if as_json else "g.yaml", as_json=as_json)
    except HarnessError as err:
        check_refusal(err, "g.json" if as_json else "g.yaml")


def run_cli(*args: str) -> tuple[int, str]:
    """The real command, in this process: (exit code, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(list(args))
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    return code, err.getvalue()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_keys, values)
def test_cli_validate_exits_0_or_2_with_one_line(tmp_path_factory, key, value):
    path = Path(tmp_path_factory.mktemp("scn")) / "s.yaml"
    path.write_text(yaml.safe_dump({**GOOD, key: value}, allow_unicode=True))
    code, err = run_cli("scenarios", "validate", str(path))
    assert code in (0, 2), err
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{path}:"), err
        assert "Traceback" not in err


# --- round 2: arbitrary bytes, alias bombs, implausible log values ---------------------------------


def check_one_line(err: HarnessError, source: str) -> None:
    msg = str(err)
    assert err.exit_code == 2 and "\n" not in msg and "\r" not in msg and msg.startswith(source), msg


@SETTINGS
@given(st.binary(max_size=400))
def test_any_bytes_as_a_scenario_file_load_or_are_one_line(tmp_path_factory, data):
    path = Path(tmp_path_factory.mktemp("bytes")) / "s.yaml"
    path.write_bytes(data)
    try:
        load_scenario(path, environ={})
    except ScenarioError as err:
        check_one_line(err, str(path))


@SETTINGS
@given(st.binary(max_size=400))
def test_any_bytes_as_yaml_load_or_raise_yaml_problem(data):
    try:
        text = decode_utf8(data, "m.yaml")
    except InputError as err:
        check_one_line(err, "m.yaml:")
        return
    try:
        _, node = load_yaml(text)
    except YamlProblem as err:
        assert "\n" not in err.message
        return
    if node is not None:
        line_map(node)


@SETTINGS
@given(st.binary(max_size=600))
def test_any_bytes_as_a_lightx2v_log_parse_or_are_one_line(tmp_path_factory, data):
    path = Path(tmp_path_factory.mktemp("log")) / "rank0.log"
    path.write_bytes(data)
    try:
        timing = parse_lightx2v_logs({str(path): read_input_text(path, "log", allow_empty=True)})
    except HarnessError as err:
        check_one_line(err, str(path))
        return
    assert all(math.isfinite(s.seconds) and s.seconds > 0 for s in timing.steps)


PROFILE = "2026-09-14 09:30:10.801 | INFO | lightx2v.utils.profiler:__exit__:165 - [Profile] {who} - Level1_Log {name} cost {sec} seconds"
seconds = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e400", "-1e400", "0", "0.000000", "-0.5", "nan", "inf", ".5", "5.", "1e-300"]),
)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["Rank 0", "Rank 1", "Rank 7", "Single GPU"]),
                          st.sampled_from(["Run Dit every step", "RUN pipeline", "Run VAE Decoder"]), seconds),
                min_size=1, max_size=12))  # fmt: skip
def test_profile_lines_with_any_value_are_taken_only_when_plausible(lines):
    text = "\n".join(PROFILE.format(who=w, name=n, sec=s) for w, n, s in lines)
    try:
        timing = parse_lightx2v_logs({"rank0.log": text, "rank1.log": ""})
    except LogProblem as err:
        msg = str(err)
        assert msg.startswith("rank0.log:") and "\n" not in msg
        return
    for step in timing.steps:
        assert math.isfinite(step.seconds) and step.seconds > 0
    assert timing.pipeline_total_s is None or (
        math.isfinite(timing.pipeline_total_s) and timing.pipeline_total_s > 0
    )
    assert set(timing.ranks) <= {"0", "1"}


def alias_bomb(depth: int = 9, width: int = 9) -> str:
    """The "billion laughs": each anchor lists the one before it ``width`` times (9^9 leaves)."""
    lines = ['l0: &l0 ["lol"]']
    for i in range(1, depth):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_once_without_expanding(tmp_path):
    import resource
    import time

    for name, text in (("s.yaml", "name: lol\nrunner: builtin\n" + alias_bomb()), ("self.yaml", "a: &a [*a]\n"),
                       ("deep.yaml", "a: " + "[" * 50_000 + "]" * 50_000 + "\n")):  # fmt: skip
        path = tmp_path / name
        path.write_text(text)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.monotonic()
        with pytest.raises(ScenarioError) as err:
            load_scenario(path, environ={})
        assert time.monotonic() - t0 < 10, name  # main: expanded until memory ran out
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000, name  # KiB
        check_one_line(err.value, f"{path}")
    gate = tmp_path / "g.yaml"
    gate.write_text("min_psnr: 30\n" + alias_bomb())
    with pytest.raises(HarnessError) as err:
        load_gate(gate)
    check_one_line(err.value, str(gate))


def test_a_manifest_alias_bomb_is_refused(tmp_path):
    man = tmp_path / "m.yaml"
    man.write_text("campaign: out/c\narms: []\n" + alias_bomb())
    with pytest.raises(HarnessError) as err:
        load_manifest(man)
    check_one_line(err.value, str(man))
    assert "aliases expand" in str(err.value)


def test_a_100000_arm_scenario_validates_in_seconds(tmp_path):
    import time

    arms = "\n".join(f"  - {{name: a{i}, attn_type: torch_sdpa}}" for i in range(100_000))
    path = tmp_path / "big.yaml"
    path.write_text(f"name: big\nrunner: builtin\nbuiltin: {{preset: tiny}}\narms:\n"
                    f"  - {{name: ref, attn_type: torch_sdpa, role: reference}}\n{arms}\n")  # fmt: skip
    t0 = time.monotonic()
    s = load_scenario(path, environ={})
    assert len(s.arms) == 100_001
    assert time.monotonic() - t0 < 90  # main: quadratic in the arms (hours); here tens of seconds at most


@pytest.mark.parametrize(
    "data, expect",
    [
        (b"name: caf\xe9\n", ":1: scenario file is not UTF-8 text (byte 0xe9 at offset 9"),
        (b"name: a\nrunner: builtin\n\xff\n", ":3: scenario file is not UTF-8 text (byte 0xff"),
    ],
)
def test_a_non_utf8_scenario_is_one_line_naming_the_line(tmp_path, data, expect):
    path = tmp_path / "s.yaml"
    path.write_bytes(data)
    code, err = run_cli("scenarios", "validate", str(path))
    line = err.strip()
    assert code == 2 and line.startswith(f"{path}{expect}") and line.endswith("; save it as UTF-8)"), err


def test_a_symlink_loop_is_named_as_one(tmp_path):
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    code, err = run_cli("scenarios", "validate", str(loop))
    assert (
        code == 2
        and err.strip()
        == f"{loop}: scenario file is a symbolic link loop (a link that points back at itself)"
    )


def test_a_variable_set_but_empty_is_called_empty():
    text = "name: ${N}\nrunner: builtin\narms: [{name: r, attn_type: torch_sdpa, role: reference}]\n"
    with pytest.raises(ScenarioError, match="environment variable N is set but empty"):
        parse_scenario(text, "s.yaml", {"N": ""})
    with pytest.raises(ScenarioError, match="environment variable N is not set"):
        parse_scenario(text, "s.yaml", {})
