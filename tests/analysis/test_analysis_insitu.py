"""In-situ readings from call records: the ratio to the exact floor on the same calls with its
interval, the accepted baseline, absolute limits, and the words they give."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from harness.analysis.analyze import analyze_campaign
from harness.analysis.insitu import candidate_reading
from harness.errors import HarnessError
from harness.insitu_records import InSituCall, InSituOpError
from harness.scenario.insitu import InSituTolerance
from harness.store import CampaignDir


def err(rel_l1: float, cosine: float = 0.9999) -> InSituOpError:
    return InSituOpError(cosine=cosine, rel_l1=rel_l1, rmse=rel_l1, max_abs=rel_l1, row_cos_p1=cosine - 1e-4,
                         row_cos_p10=cosine)  # fmt: skip


def calls(ratios: list[float], floor: float = 1e-3, base: float | None = None, steps: int = 2) -> list:
    """One call per ratio (candidate = ratio x floor), steps and blocks laid out in order."""
    out = []
    for i, r in enumerate(ratios):
        errors = {"ref": err(floor), "kv": err(floor * 1.02), "cand": err(floor * r)}
        if base is not None:
            errors["base"] = err(floor * base)
        c = InSituCall(call=i + 1, step=i % steps + 1, block=i // steps, kind="dit_self", batch=1, heads=2,
                       q_len=100, k_len=100, head_dim=8, rows=10, elements=160, ref_l1=50.0 + i, errors=errors)  # fmt: skip
        out.append(("run", c))
    return out


def test_a_candidate_far_above_the_floor_reads_outside():
    r = candidate_reading("cand", calls([3.0] * 8), ["ref", "kv"], None, InSituTolerance(), "x")
    assert r.ratio == pytest.approx(3.0 / 1.01, rel=1e-6)  # the floor is the mean of the exact ops
    assert r.ratio_ci[0] > 2.0 and r.word == "outside" and r.parts[0].word == "outside"
    assert r.calls == 8 and r.floor.rel_l1 == pytest.approx(1.01e-3)
    assert "in-situ reading: outside" in r.text and "at most 2x" in r.text


def test_a_candidate_at_the_floor_reads_within_and_a_spread_one_inconclusive():
    close = candidate_reading("cand", calls([1.2, 1.1, 1.3, 1.2] * 2), ["ref", "kv"], None, InSituTolerance())
    assert close.word == "within" and close.ratio_ci[1] <= 2.0
    spread = candidate_reading(
        "cand", calls([0.5, 4.0, 0.6, 3.5, 1.0, 3.0]), ["ref"], None, InSituTolerance()
    )
    assert spread.ratio_ci[0] < 2.0 < spread.ratio_ci[1] and spread.word == "inconclusive"


def test_baseline_and_absolute_limits_are_judged_on_the_same_calls():
    tol = InSituTolerance(baseline_ratio=1.1, max_rel_l1=0.01, min_cosine=0.99)
    r = candidate_reading("cand", calls([1.5] * 6, base=1.5), ["ref"], "base", tol)
    parts = {p.against: p for p in r.parts}
    assert (
        parts["accepted baseline base"].value == pytest.approx(1.0)
        and parts["accepted baseline base"].word == "within"
    )
    assert parts["max rel L1"].value == pytest.approx(1.5e-3) and parts["max rel L1"].word == "within"
    assert parts["min cosine"].word == "within"
    assert parts["exact floor"].word == "within" and r.word == "within"
    worse = candidate_reading("cand", calls([3.0] * 6, base=1.5), ["ref"], "base", tol)
    assert {p.against: p.word for p in worse.parts}["accepted baseline base"] == "outside"
    assert worse.word == "outside"  # one part outside is enough


def test_the_shape_of_a_reading_per_step_block_and_worst_calls():
    r = candidate_reading("cand", calls([1.0, 5.0, 1.0, 2.0]), ["ref"], None, InSituTolerance())
    assert [s.step for s in r.per_step] == [1, 2] and r.per_step[1].calls == 2
    assert r.per_step[0].floor_rel_l1 == pytest.approx(1e-3)
    assert {(c.step, c.block) for c in r.cells} == {(1, 0), (2, 0), (1, 1), (2, 1)}
    assert r.worst[0].rel_l1 == pytest.approx(5e-3) and (r.worst[0].step, r.worst[0].block) == (2, 0)
    assert r.heatmap == "insitu_heatmap_cand"


def test_calls_the_candidate_refused_are_counted_not_pooled():
    items = calls([2.5] * 4)
    items[0][1].errors["cand"] = InSituOpError(cosine=math.nan, rel_l1=math.nan, rmse=math.nan, max_abs=math.nan,
                                               row_cos_p1=math.nan, row_cos_p10=math.nan, error="refused: no")  # fmt: skip
    r = candidate_reading("cand", items, ["ref"], None, InSituTolerance())
    assert r.calls == 4 and r.refused == 1 and r.failed == 0 and r.ratio == pytest.approx(2.5)
    assert "1 not measured" in r.text


def test_no_floor_means_no_ratio_and_no_verdict():
    r = candidate_reading("cand", calls([2.0] * 3), [], None, InSituTolerance())
    assert r.ratio is None and r.word == "inconclusive" and "n/a" in r.parts[0].text


def test_a_kernel_wrong_on_one_kind_of_call_shows_in_the_per_kind_rows():
    items = calls([1.2] * 4)
    for i in range(2):  # two short refiner calls where the candidate is 100x the floor
        errors = {"ref": err(1e-3), "kv": err(1e-3), "cand": err(0.1)}
        c = InSituCall(call=10 + i, step=i + 1, block=0, kind="refiner", batch=1, heads=2, q_len=74, k_len=74,
                       head_dim=8, rows=74, elements=1184, ref_l1=50.0, errors=errors)  # fmt: skip
        items.append(("run", c))
    r = candidate_reading("cand", items, ["ref", "kv"], None, InSituTolerance())
    kinds = {k.kind: k for k in r.per_kind}
    assert set(kinds) == {"dit_self", "refiner"} and kinds["refiner"].calls == 2
    assert kinds["refiner"].q_len == 74 and kinds["dit_self"].q_len == 100
    assert kinds["refiner"].ratio == pytest.approx(100.0) and kinds["dit_self"].ratio == pytest.approx(
        1.2 / 1.01
    )
    assert kinds["refiner"].rel_l1 == pytest.approx(0.1)
    assert r.word == "outside" and r.decided_by == "refiner"
    assert "; decided by kind refiner (2 call(s), 148 rows): exact floor: 100x" in r.text, r.text
    assert "; DiT self-attention (4 call(s), 400 rows): 1.19x the floor" in r.text, r.text


def test_a_shadow_that_measured_no_call_is_dropped_from_the_floor_and_the_readings():
    from harness.analysis.insitu import exact_ops, shadowed_run_info
    from harness.attention.insitu.recorder import InSituRun
    from harness.insitu_records import InSituMeta, InSituOp

    nan = dict(cosine=math.nan, rel_l1=math.nan, rmse=math.nan, max_abs=math.nan, row_cos_p1=math.nan,
               row_cos_p10=math.nan)  # fmt: skip
    items = calls([2.0] * 3)
    for _, c in items:
        c.errors["fa3"] = InSituOpError(
            **nan, error="RuntimeError: TypeError: 'NoneType' object is not callable"
        )
    meta = InSituMeta(primary="ref", ops=[InSituOp(name="ref", role="primary", attn_type="torch_sdpa", exact=True),
                                          InSituOp(name="kv", role="shadow", attn_type="torch_sdpa", exact=True),
                                          InSituOp(name="fa3", role="shadow", attn_type="flash_attn3", exact=True),
                                          InSituOp(name="cand", role="shadow", attn_type="sage_attn2")])  # fmt: skip
    run = InSituRun(folder=None, metas=[meta], calls=[c for _, c in items])
    info = shadowed_run_info("run", "arm", run, "insitu")
    assert info.dropped == {"fa3": "RuntimeError: TypeError: 'NoneType' object is not callable"}
    assert info.ops["fa3"] == "exact" and "cand" not in info.dropped and "kv" not in info.dropped
    assert exact_ops(info) == ["ref", "kv"]


def kind_call(i: int, kind: str, q_len: int, cand: float, ref_l1: float, floor: float = 1e-3) -> tuple:
    errors = {"ref": err(floor), "kv": err(floor), "cand": err(floor * cand)}
    c = InSituCall(call=100 + i, step=i % 2 + 1, block=i, kind=kind, batch=1, heads=2, q_len=q_len, k_len=q_len,
                   head_dim=8, rows=min(q_len, 64), elements=1024, ref_l1=ref_l1, errors=errors)  # fmt: skip
    return ("run", c)


def test_a_call_with_non_finite_output_reads_outside_and_is_named():
    items = calls([1.1, 1.2, 1.1, 1.2] * 2)
    # NaN outside the sampled rows: the sampled errors are finite, only the whole-output count sees it
    items[3][1].errors["cand"] = err(1.2e-3).model_copy(update={"nan": 7})
    r = candidate_reading("cand", items, ["ref", "kv"], None, InSituTolerance())
    assert r.word == "outside" and r.nonfinite == 1 and r.failed == 0 and r.decided_by == "non-finite output"
    assert (
        "1 of 8 call(s) returned non-finite values (first: run run call 4, step 2, block 1, kind dit_self)"
        in r.text
    )
    assert r.text.endswith("in-situ reading: outside"), r.text
    # the figures are those of the 7 finite calls; the call is in no pooled figure nor worst list
    assert r.stats.calls == 8 and r.stats.nonfinite == 1 and r.ratio == pytest.approx(1.15 / 1.01, rel=0.02)
    assert all(w.call != 4 for w in r.worst) and r.parts[0].word == "within"
    # NaN in the sampled rows (NaN metrics, no error): the same
    nan_metrics = calls([1.1] * 4)
    nan_metrics[0][1].errors["cand"] = err(math.nan, cosine=math.nan)
    r = candidate_reading("cand", nan_metrics, ["ref"], None, InSituTolerance())
    assert r.word == "outside" and r.nonfinite == 1 and "1 of 4 call(s) returned non-finite values" in r.text
    # a zero reference makes every op's metrics NaN: the call is not pooled, and no op is to blame
    nan_metrics[0][1].ref_l1 = 0.0
    r = candidate_reading("cand", nan_metrics, ["ref"], None, InSituTolerance())
    assert r.nonfinite == 0 and r.word == "within" and r.stats.failed == 1


def test_a_call_whose_shadow_failed_reads_outside_and_a_refused_one_does_not():
    nan = dict(cosine=math.nan, rel_l1=math.nan, rmse=math.nan, max_abs=math.nan, row_cos_p1=math.nan,
               row_cos_p10=math.nan)  # fmt: skip
    items = calls([1.1] * 6)
    items[2][1].errors["cand"] = InSituOpError(**nan, error="RuntimeError: CUDA error: illegal memory access")
    r = candidate_reading("cand", items, ["ref"], None, InSituTolerance())
    assert r.word == "outside" and r.failed == 1 and r.nonfinite == 0 and r.decided_by == "failed calls"
    assert (
        "1 of 6 call(s) failed (first: run run call 3, step 1, block 1, kind dit_self: RuntimeError: CUDA"
        in r.text
    )
    # a refusal is served by the fallback in a real run: not measured, not a failure
    items[2][1].errors["cand"] = InSituOpError(**nan, error="refused: head dim 80")
    r = candidate_reading("cand", items, ["ref"], None, InSituTolerance())
    assert r.word == "within" and r.refused == 1 and r.failed == 0 and "1 not measured" in r.text


def test_a_non_finite_exact_op_is_no_floor_value_and_is_named():
    from harness.analysis.insitu import nonfinite_floor_notes

    items = calls([1.5] * 4)
    # K/V reversed returned Inf outside the sampled rows on call 1: a large finite sampled error
    items[0][1].errors["kv"] = err(0.5).model_copy(update={"inf": 2})
    r = candidate_reading("cand", items, ["ref", "kv"], None, InSituTolerance())
    floor = [1e-3 if i == 0 else 1.01e-3 for i in range(4)]  # call 1's floor is "ref" alone
    expect = sum(1.5e-3 * (50 + i) for i in range(4)) / sum(f * (50 + i) for i, f in enumerate(floor))
    assert r.ratio == pytest.approx(expect) and r.word == "within"
    notes = nonfinite_floor_notes("run", [c for _, c in items], ["ref", "kv"])
    assert notes == ["run: exact op kv returned non-finite values on 1 of 4 call(s) (first: call 1, step 1, "
                     "block 0, kind dit_self): left out of the floor on those calls"], notes  # fmt: skip


def test_the_reading_is_formed_per_call_kind_and_the_worst_kind_decides():
    # the production shape: four 74-row refiner calls far off, eight 120,016-row DiT calls at the floor
    items = [kind_call(i, "refiner", 74, 85.0, ref_l1=40.0) for i in range(4)]
    items += [kind_call(4 + i, "dit_self", 120_016, 1.2, ref_l1=2e5) for i in range(8)]
    r = candidate_reading("cand", items, ["ref", "kv"], None, InSituTolerance())
    pooled = sum(x[1].errors["cand"].rel_l1 * x[1].ref_l1 for x in items) / sum(x[1].ref_l1 for x in items)
    assert pooled / 1e-3 < 2.0  # pooled equally, the refiner would vanish
    kinds = {k.kind: k for k in r.per_kind}
    assert kinds["refiner"].rows == 296 and kinds["dit_self"].rows == 960_128
    assert kinds["refiner"].word == "outside" and kinds["dit_self"].word == "within"
    assert kinds["refiner"].ratio_ci == pytest.approx([85.0, 85.0]) and kinds[
        "dit_self"
    ].ratio == pytest.approx(1.2)
    assert r.word == "outside" and r.decided_by == "refiner" and r.ratio == pytest.approx(85.0)
    assert r.ratio_ci == kinds["refiner"].ratio_ci and r.parts[0].value == pytest.approx(85.0)
    assert "decided by kind refiner (4 call(s), 296 rows): exact floor: 85x" in r.text, r.text
    assert (
        "DiT self-attention (8 call(s), 960,128 rows): 1.20x the floor [95 % 1.20 at both bounds]: within"
        in r.text
    ), r.text
    # every kind within: within, decided by the kind nearest its limit
    items = [kind_call(i, "refiner", 74, 1.5, ref_l1=40.0) for i in range(4)]
    items += [kind_call(4 + i, "dit_self", 120_016, 1.2, ref_l1=2e5) for i in range(8)]
    r = candidate_reading("cand", items, ["ref", "kv"], None, InSituTolerance())
    assert r.word == "within" and r.decided_by == "refiner" and r.ratio == pytest.approx(1.5)


def test_a_kind_without_floor_does_not_block_within_and_a_single_kind_reads_as_before():
    items = [kind_call(i, "dit_self", 100, 1.2, ref_l1=50.0) for i in range(4)]
    items += [kind_call(4 + i, "cross", 30, 1.0, ref_l1=50.0) for i in range(2)]
    for _, c in items[4:]:
        del c.errors["ref"], c.errors["kv"]  # no exact op measured the cross-attention calls
    r = candidate_reading("cand", items, ["ref", "kv"], None, InSituTolerance())
    assert r.word == "within" and r.decided_by == "dit_self"
    assert {k.kind: k.word for k in r.per_kind} == {"dit_self": "within", "cross": "inconclusive"}
    single = candidate_reading("cand", calls([1.2] * 4), ["ref"], None, InSituTolerance())
    assert single.decided_by == "dit_self" and "decided by" not in single.text
    assert single.text.startswith("cand: in situ rel L1 ") and single.text.endswith("in-situ reading: within")


def test_the_verdicts_accepted_baseline_feeds_the_in_situ_reading_too(shadowed_campaign, tmp_path):
    camp = tmp_path / "camp"
    shutil.copytree(shadowed_campaign, camp)
    doc = json.loads((camp / "campaign.json").read_text())
    base = doc["scenario"].pop("accepted_baseline")  # the scenario names it at the top level
    doc["scenario"]["verdict"] = {**(doc["scenario"].get("verdict") or {}), "accepted_baseline": base}
    (camp / "campaign.json").write_text(json.dumps(doc))
    res = analyze_campaign(CampaignDir(camp))
    assert res.insitu.accepted_baseline == base == res.rules.accepted_baseline
    against = {p.against for r in res.insitu.readings for p in r.parts}
    assert f"accepted baseline {base}" in against
    doc["scenario"]["accepted_baseline"] = "floor"  # two keys, two baselines: refused in one line
    (camp / "campaign.json").write_text(json.dumps(doc))
    with pytest.raises(
        HarnessError, match=f"accepted_baseline: 'floor' and verdict.accepted_baseline '{base}'"
    ):
        analyze_campaign(CampaignDir(camp))


def test_one_grossly_wrong_call_of_twelve_is_outside_and_named():
    # the other calls exact (the floor's own error), one call at rel L1 0.30: pooled, its bootstrap
    # interval over calls reaches down to the floor, so only a per-call limit sees it
    items = calls([1.0] * 11 + [300.0], floor=1e-3)
    r = candidate_reading("cand", items, ["ref", "kv"], None, InSituTolerance(max_call_rel_l1=None))
    parts = {p.against: p for p in r.parts}
    assert parts["exact floor"].word != "outside"  # the pooled part alone would not say it
    far = parts["worst call over the median call, each over its floor"]
    assert far.word == "outside" and far.value > 100 and r.word == "outside"
    assert (
        "one call far off: run run call 12, step 2, block 5, kind dit_self: rel L1 0.3, 297x its floor"
        in r.text
    )
    absolute = candidate_reading("cand", items, ["ref", "kv"], None, InSituTolerance(max_call_rel_l1=0.2))
    assert {p.against: p.word for p in absolute.parts}["worst call's rel L1"] == "outside"


def test_a_kernel_uniformly_off_on_every_call_passes_the_per_call_limit():
    # an approximate kernel 5x the floor on every call, within a factor 2 of its own median call
    r = candidate_reading("cand", calls([4.0, 5.0, 6.0, 5.5, 4.5, 8.0] * 2), ["ref"], None, InSituTolerance())
    parts = {p.against: p for p in r.parts}
    assert parts["worst call over the median call, each over its floor"].word == "within"
    assert parts["worst call's rel L1"].word == "within" and "far off" not in r.text
