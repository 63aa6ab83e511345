"""harness.records: validity of attention calls, steady steps, schema ids checked on read, stale runs."""

import pytest
from pydantic import Field

from harness.errors import HarnessError
from harness.records import (
    AttentionChoice,
    AttnCallsRecord,
    InSituSettings,
    RankCalls,
    Record,
    Role,
    RunRecord,
    RunSpec,
    RunStatus,
    SchemaMismatch,
    ShadowSpec,
    StepSchedule,
    StepTiming,
    TimingRecord,
    check_schema,
    parse_schema_id,
    schema_id,
    stale_reason,
)


def test_validity_requires_calls_on_every_rank_and_no_fallback_or_error():
    ok = AttnCallsRecord(
        requested="x", ranks={"0": RankCalls(calls={"x": 3}), "1": RankCalls(calls={"x": 3})}
    )
    assert ok.validity() == (True, [])
    assert ok.total() == 6
    idle = AttnCallsRecord(
        requested="x", ranks={"0": RankCalls(calls={"x": 3}), "1": RankCalls(calls={"y": 3})}
    )
    assert idle.validity() == (False, ["rank 1: requested backend 'x' served no call"])
    fb = AttnCallsRecord(requested="x", ranks={"0": RankCalls(calls={"x": 3}, fallbacks={"torch_sdpa": 1})})
    assert fb.validity() == (False, ["rank 0: 1 call(s) fell back to 'torch_sdpa'"])
    assert fb.total_fallbacks() == 1
    err = AttnCallsRecord(
        requested="x", ranks={"0": RankCalls(calls={"x": 3}, errors=["terminated by SIGTERM"])}
    )
    assert err.validity() == (False, ["rank 0: terminated by SIGTERM"])
    assert AttnCallsRecord(requested="x").validity() == (False, ["no attention calls were recorded"])


def test_s_per_step_excludes_first_step():
    t = TimingRecord(
        source="builtin", steps=[StepTiming(index=i, seconds=s) for i, s in [(1, 9.0), (2, 2.0), (3, 4.0)]]
    )
    assert t.dit_steps == 3
    assert t.s_per_step == 3.0
    assert TimingRecord(source="b", steps=[StepTiming(index=1, seconds=5.0)]).s_per_step == 5.0
    assert TimingRecord(source="b").s_per_step is None


# --- schema ids: checked on every read ----------------------------------------------------------


class Widget(Record):
    """A record kind at /3 of its schema (/1 and /2 were written once: no reader of them is kept)."""

    schema_version: str = Field("harness.widget/3", alias="schema")
    size_mm: float
    label: str = ""


def test_the_current_schema_id_is_the_models_default():
    assert schema_id(RunRecord) == "harness.run/1" and schema_id(TimingRecord) == "harness.timing/1"
    assert schema_id(AttnCallsRecord) == "harness.attn_calls/1" and schema_id(RunSpec) is None
    assert parse_schema_id("harness.run/12") == ("harness.run", 12) and parse_schema_id("run") is None


def test_same_version_and_records_without_an_id_pass():
    for data in ({"schema": "harness.widget/3", "size_mm": 4.0}, {"size_mm": 1.0}, [1, 2]):
        check_schema(data, Widget, "w.json")  # no id, or not a record: the model's validation judges it


@pytest.mark.parametrize(
    "given, message",
    [
        (
            "harness.widget/4",
            "w.json: schema harness.widget/4 is newer than this harness reads (harness.widget/3); "
            "read it with a newer harness",
        ),
        (
            "harness.widget/2",
            "w.json: schema harness.widget/2 is older than this harness reads (harness.widget/3); "
            "read it with the harness that wrote it",
        ),
        ("harness.timing/3", "w.json: schema harness.timing/3 is not a harness.widget record"),
        ("widget-3", "w.json: schema 'widget-3' is not a schema id (this harness reads harness.widget/3)"),
    ],
)
def test_a_version_this_harness_cannot_read_is_refused_in_one_line(given, message):
    with pytest.raises(SchemaMismatch) as info:
        check_schema({"schema": given, "size_mm": 1}, Widget, "w.json")
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
    assert isinstance(info.value, HarnessError) and info.value.exit_code == 2


def test_an_older_version_is_refused_with_what_to_do():
    with pytest.raises(SchemaMismatch) as info:
        check_schema({"schema": "harness.widget/1", "size": 2.5}, Widget, "w.json", "make it again")
    assert str(info.value) == (
        "w.json: schema harness.widget/1 is older than this harness reads (harness.widget/3); make it again"
    )


def test_an_older_run_record_is_refused():
    data = RunRecord(
        spec=RunSpec(scenario="s", runner="builtin", arm="a", seed=1, attn_type="x"), spec_hash="h"
    )
    raw = data.model_dump(mode="json", by_alias=True)
    check_schema(raw, RunRecord, "run.json")
    with pytest.raises(SchemaMismatch, match=r"run.json: schema harness.run/0 is older .* \(harness.run/1\)"):
        check_schema({**raw, "schema": "harness.run/0"}, RunRecord, "run.json")


def test_stale_reason_names_local_runs_left_running():
    spec = RunSpec(scenario="s", runner="builtin", arm="a", seed=1, attn_type="x")
    left = RunRecord(spec=spec, spec_hash="h", status=RunStatus.running, pid=123, host="box")
    assert stale_reason(left) == (
        "interrupted (stale): left running by a harness run that is gone (runner pid 123 on box)"
    )
    assert stale_reason(left.model_copy(update={"executor": "slurm"})) is None  # re-attached, not stale
    assert stale_reason(left.model_copy(update={"status": RunStatus.ok})) is None


def _floor_spec() -> RunSpec:
    return RunSpec(
        scenario="s", runner="builtin", arm="nf", seed=7, profile="p", attn_type="torch_sdpa",
        kv_reversed=True, kv_chunks=2, attn_options={"sdpa_backend": "efficient"}, role=Role.noise_floor,
        multi_seed=True, repeat=2, insitu=InSituSettings(), schedule=StepSchedule(exact_first=1),
        shadows=[ShadowSpec(name="x", attn_type="sage_emul_thuml", kv_chunks=3, attn_options={"variant": "sageattn2_fp8"})],
        code={"torch_sdpa": "abc"},
    )  # fmt: skip


def test_spec_hashes_and_field_order_are_those_before_the_choice_was_one_record():
    """The attention fields moved into AttentionChoice (inherited): the hashes below were computed
    by the harness before, so campaigns made then still resume; run.json keeps its field order."""
    plain = RunSpec(scenario="s", runner="builtin", arm="ref", seed=42, attn_type="torch_sdpa",
                    role=Role.reference, params={"preset": "tiny"}, env={"A": "1"})  # fmt: skip
    assert plain.spec_hash() == "9fa2911d7c21d262f20696f154eeb3104b7c8f1cb91215a7867dcd62e8311eed"
    assert _floor_spec().spec_hash() == "74762564d5bbffff5d86238e8847c12712689a68b56c6e0bc532ffee92e2150c"
    assert list(RunSpec.model_fields)[:10] == [
        "scenario", "runner", "arm", "seed", "profile",
        "attn_type", "kv_reversed", "kv_chunks", "attn_options", "role",
    ]  # fmt: skip
    assert list(ShadowSpec.model_fields) == ["name", "attn_type", "kv_reversed", "kv_chunks", "attn_options"]


def test_the_choice_is_copied_whole_and_compares_by_value():
    spec = _floor_spec()
    choice = spec.choice()
    assert type(choice) is AttentionChoice and choice == AttentionChoice.of(spec)
    assert choice.model_dump() == {
        "attn_type": "torch_sdpa", "kv_reversed": True, "kv_chunks": 2, "attn_options": {"sdpa_backend": "efficient"}
    }  # fmt: skip
    choice.attn_options["sdpa_backend"] = "math"  # a copy: the spec keeps its own
    assert spec.attn_options == {"sdpa_backend": "efficient"} and choice != spec.choice()
    assert AttentionChoice.of({"name": "x", "attn_type": "a", "kv_chunks": 2}) == AttentionChoice(
        attn_type="a", kv_chunks=2
    )  # a payload's dict: other keys ignored
    shadow = ShadowSpec(name="nf", **spec.choice().model_dump())
    assert shadow.choice() == spec.choice() and shadow.name == "nf"


def test_the_choice_says_its_perturbation_timing_and_what_only_the_harness_serves():
    floor = AttentionChoice(
        attn_type="torch_sdpa", kv_reversed=True, kv_chunks=2, attn_options={"b": 1, "a": 2}
    )
    assert floor.perturbation == "K/V reversed, K/V in 2 chunks, a=2, b=1"
    assert AttentionChoice(attn_type="x").perturbation == ""
    assert [n.split(" wrapper")[0] for n in floor.timing_notes()] == ["the K/V-reversed", "the chunked"]
    kernel = AttentionChoice(attn_type="torch_sdpa", attn_options={"sdpa_backend": "efficient"})
    assert kernel.timing_notes() == [] and kernel.timing_notes(noise_floor=True) == [
        "another exact kernel, run as a noise floor"
    ]
    assert AttentionChoice(attn_type="x", kv_reversed=True).harness_only("it") is None
    field, line = floor.harness_only("LightX2V's x")
    assert field == "kv_chunks" and line.startswith("kv_chunks needs a harness backend")
    assert line.endswith("LightX2V's x takes none (it applies kv_reversed alone)")
    assert kernel.harness_only("d")[0] == "attn_options"
