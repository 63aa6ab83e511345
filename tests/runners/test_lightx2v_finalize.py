"""After a LightX2V arm's process: timing.json and attn_calls.json from the rank logs and count files."""

from __future__ import annotations

import json
import shutil

import pytest
from lightx2v_site import LOGS, rank_file, specs_for

from harness.records import AttnCallsRecord, TimingRecord
from harness.runners.base import get_runner
from harness.runners.lightx2v.params import params_of
from harness.runners.lightx2v.runner import merge_rank_calls


def test_finalize_writes_timing_and_attention_calls(site):
    spec = specs_for(site)["aiter_sage_attn"]
    run_dir = site["tmp"] / "run"
    run_dir.mkdir()
    shutil.copy(LOGS / "h3_tp2_rank0.log", run_dir / "rank0.log")
    shutil.copy(LOGS / "h3_tp2_rank1.log", run_dir / "rank1.log")
    for r in (0, 1):
        (run_dir / f"attn_calls.rank{r}.json").write_text(json.dumps(rank_file(r, {"aiter_sage_attn": 147})))
    get_runner("lightx2v").finalize(spec, run_dir)
    timing = TimingRecord.model_validate_json((run_dir / "timing.json").read_text())
    assert timing.source == "lightx2v-log" and timing.dit_steps == 3 == spec.params["dit_steps"]
    assert timing.seq_len == 89619 and timing.missing == []
    calls = AttnCallsRecord.model_validate_json((run_dir / "attn_calls.json").read_text())
    assert calls.requested == "aiter_sage_attn" and calls.total() == 294
    assert calls.validity() == (True, [])
    raw = json.loads((run_dir / "attn_calls.json").read_text())
    assert raw["ranks"]["1"]["outside_scope"] == {"torch_sdpa": 12}
    assert raw["ranks"]["0"]["op_calls"] == {"gfx1201_sage_attention": 147}


def test_finalize_after_a_crash_records_what_is_missing(site):
    spec = specs_for(site)["aiter_sage_attn"]
    run_dir = site["tmp"] / "run"
    run_dir.mkdir()
    shutil.copy(LOGS / "h3_tp2_crash_rank0.log", run_dir / "rank0.log")
    shutil.copy(LOGS / "h3_tp2_crash_rank1.log", run_dir / "rank1.log")
    (run_dir / "attn_calls.rank0.json").write_text(
        json.dumps(rank_file(0, {"aiter_sage_attn": 98}, finished=False, errors=["terminated by SIGTERM"]))
    )
    get_runner("lightx2v").finalize(spec, run_dir)
    timing = TimingRecord.model_validate_json((run_dir / "timing.json").read_text())
    assert timing.dit_steps == 2
    assert "expected 3 DiT steps (infer_steps 4), the logs time 2" in timing.missing
    valid, reasons = AttnCallsRecord.model_validate_json((run_dir / "attn_calls.json").read_text()).validity()
    assert not valid
    assert "rank 1: requested backend 'aiter_sage_attn' served no call" in reasons
    assert any(r.startswith("rank 0: ") for r in reasons), "the crashed rank's error makes the run invalid"
    raw = json.loads((run_dir / "attn_calls.json").read_text())
    assert raw["ranks"]["1"]["errors"][0].startswith("no attn_calls.rank1.json")


def finalize_sage_calls(site, arm: str, modules: dict) -> tuple[bool, list[str]]:
    """Both ranks' sage_attn2 calls recorded with these sageattention modules, finalized for the arm:
    the merged attn_calls.json's validity."""
    run_dir = site["tmp"] / "run"
    run_dir.mkdir()
    for r in (0, 1):
        rank = rank_file(r, {"sage_attn2": 147}, requested="sage_attn2", modules=modules)
        (run_dir / f"attn_calls.rank{r}.json").write_text(json.dumps(rank))
    get_runner("lightx2v").finalize(specs_for(site)[arm], run_dir)
    return AttnCallsRecord.model_validate_json((run_dir / "attn_calls.json").read_text()).validity()


@pytest.mark.parametrize(
    ("arm", "flavour", "valid"),
    [
        ("sage_attn2_aiter_shim", "aiter_shim", True),
        ("sage_attn2_aiter_shim", "package", False),
        ("sage_attn2_triton", "sageattention2", True),  # the pinned SageAttention2 the arm asks for
        ("sage_attn2_triton", "package", False),  # the environment's (PyPI's is 1.0.6): another kernel
        ("sage_attn2_triton", "aiter_shim", False),
    ],
)
def test_finalize_checks_which_sageattention_served_the_calls(site, arm, flavour, valid):
    where = {
        "aiter_shim": "/x/shims/aiter_sageattention/sageattention/__init__.py",
        "package": "/venv/sageattention/core.py",
        "sageattention2": "/x/.sageattention/sageattention2-d1a57a5/sageattention/__init__.py",
    }[flavour]
    ok, reasons = finalize_sage_calls(site, arm, {"sageattention": where, "sageattention_flavour": flavour})
    assert ok is valid
    if not valid:
        assert len(reasons) == 2 and all("fell back to" in r and where in r for r in reasons)


@pytest.mark.parametrize(
    ("arm", "is_shim", "valid"), [("sage_attn2_aiter_shim", True, True), ("sage_attn2_triton", False, False)]
)
def test_ranks_of_an_earlier_harness_record_only_the_shims_flag(site, arm, is_shim, valid):
    """No flavour recorded: the shim's flag says aiter_shim or the environment's package, and the
    pinned SageAttention2 the arm asks for is then not proven to have served it."""
    modules = {"sageattention": "/venv/sageattention/core.py", "sageattention_is_aiter_shim": is_shim}
    ok, _ = finalize_sage_calls(site, arm, modules)
    assert ok is valid


def test_finalize_falls_back_to_the_torchrun_logs(site):
    spec = specs_for(site)["torch_sdpa"]
    run_dir = site["tmp"] / "run"
    run_dir.mkdir()
    shutil.copy(LOGS / "h3_tp2_interleaved.log", run_dir / "stderr.log")
    get_runner("lightx2v").finalize(spec, run_dir)
    timing = TimingRecord.model_validate_json((run_dir / "timing.json").read_text())
    assert timing.dit_steps == 3 and timing.ranks == ["0", "1"]
    assert timing.missing == ["no rank<N>.log from the launcher: parsed the torchrun process's own logs"]


def test_required_ops_with_zero_calls_make_the_arm_invalid(site):
    run_dir = site["tmp"] / "run"
    run_dir.mkdir()
    for r in (0, 1):
        rank = rank_file(r, {"aiter_sage_attn": 147}, op_calls={"gfx1201_sage_attention": 147 if r else 0})
        (run_dir / f"attn_calls.rank{r}.json").write_text(json.dumps(rank))
    spec = specs_for(site)["aiter_sage_attn"]  # its count_ops name the op
    params = params_of(spec)
    valid, reasons = merge_rank_calls(run_dir, spec, params).validity()
    assert not valid
    assert reasons == [
        "rank 0: count-op gfx1201_sage_attention: 0 calls (the arm names this op, so it must be hit)"
    ]
    # The same files, for an arm that does not name the op: nothing to object to.
    unnamed = params.model_copy(update={"count_ops": {}})
    assert merge_rank_calls(run_dir, spec, unnamed).validity() == (True, [])
