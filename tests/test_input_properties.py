"""Property-based tests of the scenario loader and the gate parser (hypothesis).

Whatever the input, it either loads or is refused with exit 2 and one line that names the file
(and line and field where there is one); never a traceback, never another exception.
"""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.compare.gates import Gate, parse_gate
from harness.errors import HarnessError, ScenarioError
from harness.scenario import Scenario, parse_scenario

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
