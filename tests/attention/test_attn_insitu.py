"""In-situ shadows on real attention ops: the primary's output untouched, errors against the exact
yardstick at the scale each op really has, bounded per-rank lines, captured calls, pooling."""

from __future__ import annotations

import json
import math

import pytest
import torch
from attn_testutil import make_qkv

from harness.attention.exact import exact_attention
from harness.attention.insitu.recorder import CallSites, InSituRecorder, pool, read_insitu
from harness.attention.insitu.shadow import ShadowedAttention, error_scalars, op_error, sample_rows
from harness.attention.registry import AttentionOp, UnsupportedCall, get_backend
from harness.attention.wrappers import KVReversed, shadowed_attention
from harness.kernels.run import accuracy_metrics
from harness.records import CaptureSettings, InSituSettings, ShadowSpec

# BF16 output against FP32 exact attention: the output's own rounding to BF16 (8 bits of mantissa:
# up to 2^-9 relative) gives rel L1 ~2.1e-3 here, asserted in [5e-4, 4e-3]; FP32 against the FP32
# yardstick: summation order, ~1.5e-7, asserted below 1e-5.
BF16_ROUNDOFF_REL_L1 = 4e-3
FP32_ROUNDOFF_REL_L1 = 1e-5
BF16_ROUNDOFF_AT_LEAST = 5e-4


class InPlace(AttentionOp):
    """An op that writes into its inputs (as SageAttention 1.x subtracts K's mean from K)."""

    name = "in_place"
    exact = True
    params = {"backend": "in_place"}

    def __call__(self, q, k, v, scale=None):
        k.sub_(k.mean(dim=-2, keepdim=True))  # softmax is invariant to it: the output stays exact
        v.mul_(1.0)
        return get_backend("torch_sdpa")(q, k, v, scale)


class Refuses(AttentionOp):
    name = "refuses"
    params = {"backend": "refuses"}

    def __call__(self, q, k, v, scale=None):
        raise UnsupportedCall("refuses: every call")


class Breaks(AttentionOp):
    name = "breaks"
    params = {"backend": "breaks"}

    def __init__(self):
        self.calls = 0

    def __call__(self, q, k, v, scale=None):
        self.calls += 1
        raise RuntimeError("out of memory (pretend)")


def shadowed(tmp_path, shadows, *, rows=32, settings=None, primary=None, sites=None):
    settings = settings or InSituSettings(sample_rows=rows, seed=1)
    recorder = InSituRecorder(tmp_path / "insitu", settings, sites=sites, flush_every=2)
    op = ShadowedAttention(
        primary or get_backend("torch_sdpa"),
        shadows,
        recorder=recorder,
        primary_name="ref",
    )
    return op, recorder


def test_call_sites_nest_and_a_step_clears_the_block():
    sites = CallSites()
    assert sites.current.step is None and sites.current.step_key == "-"
    with sites.site(step=2, steps=5):
        with sites.site(block=3, kind="dit_self") as inner:
            assert (inner.step, inner.block, inner.kind, inner.steps) == (2, 3, "dit_self", 5)
        assert sites.current.block is None and sites.current.step == 2
    assert sites.current.step is None
    sites.set(block=4)
    sites.set(step=7)
    assert sites.current.block is None and sites.current.step_key == "7"
    with pytest.raises(ValueError, match="kind"):
        with sites.site(kind="ffn"):
            pass


def test_primary_output_inputs_and_rng_are_untouched(tmp_path):
    q, k, v = make_qkv(200, h=2, d=32, dtype=torch.bfloat16, seed=3)
    plain = get_backend("torch_sdpa")(q.clone(), k.clone(), v.clone())
    kept = [x.clone() for x in (q, k, v)]
    op, rec = shadowed(tmp_path, {"in_place": InPlace(), "emul": get_backend("sage_emul_thuml")})
    torch.manual_seed(123)
    expected_draw = torch.rand(4)
    torch.manual_seed(123)
    out = op(q, k, v)
    assert torch.equal(torch.rand(4), expected_draw)  # no RNG draw the run would see
    assert torch.equal(out, plain)  # bitwise the run without shadows
    assert all(torch.equal(a, b) for a, b in zip((q, k, v), kept, strict=True))
    rec.close()
    call = read_insitu(tmp_path / "insitu").calls[0]
    assert set(call.errors) == {"ref", "in_place", "emul"}
    # the in-place op saw its own copies: exact, so its error is BF16 round-off like the primary's
    assert call.errors["in_place"].rel_l1 < BF16_ROUNDOFF_REL_L1


def test_a_primary_that_writes_into_its_inputs_is_measured_on_what_it_was_given(tmp_path):
    q, k, v = make_qkv(150, h=2, d=32, dtype=torch.float32, seed=4)
    op, rec = shadowed(tmp_path, {"floor": KVReversed(get_backend("torch_sdpa"))}, primary=InPlace())
    op(q, k, v)  # k now has its mean removed; the yardstick and the floor got the original k
    rec.close()
    e = read_insitu(tmp_path / "insitu").calls[0].errors
    assert e["ref"].rel_l1 < FP32_ROUNDOFF_REL_L1 and e["floor"].rel_l1 < FP32_ROUNDOFF_REL_L1


@pytest.mark.parametrize(
    "dtype, floor", [(torch.bfloat16, BF16_ROUNDOFF_REL_L1), (torch.float32, FP32_ROUNDOFF_REL_L1)]
)
def test_exact_ops_sit_at_round_off_and_the_emulator_far_above(tmp_path, dtype, floor):
    q, k, v = make_qkv(300, h=2, d=64, dtype=dtype, seed=5)
    shadows = {"kv_reversed": KVReversed(get_backend("torch_sdpa")), "emul": get_backend("sage_emul_thuml")}
    op, rec = shadowed(tmp_path, shadows, rows=64)
    op(q, k, v)
    rec.close()
    e = read_insitu(tmp_path / "insitu").calls[0].errors
    for name in ("ref", "kv_reversed"):
        assert e[name].rel_l1 < floor and e[name].cosine > 1 - 1e-5, (name, e[name])
        if dtype == torch.bfloat16:  # really the BF16 rounding, not a vacuous zero
            assert e[name].rel_l1 > BF16_ROUNDOFF_AT_LEAST
        assert e[name].nan == 0 and e[name].inf == 0 and e[name].row_cos_p1 <= e[name].row_cos_p10
    assert 0.005 < e["emul"].rel_l1 < 0.05  # INT8 QK / FP16 PV: rel L1 ~0.012 at these inputs
    assert e["emul"].rel_l1 > 3 * e["ref"].rel_l1


def test_errors_on_every_row_equal_the_kernel_benchmark_metrics():
    q, k, v = make_qkv(96, 80, h=3, d=32, dtype=torch.bfloat16, seed=6)
    out = get_backend("sage_emul_thuml")(q, k, v)
    rows = sample_rows(96, 1000, torch.Generator().manual_seed(0), q.device)
    assert rows.tolist() == list(range(96))
    ref = exact_attention(q, k, v, compute_dtype=torch.float32)
    mine = op_error(error_scalars(out, ref, rows).tolist())
    theirs = accuracy_metrics(out, ref)
    assert mine.rel_l1 == pytest.approx(theirs.rel_l1, rel=1e-9)
    assert mine.cosine == pytest.approx(theirs.cosine, rel=1e-12)
    assert mine.rmse == pytest.approx(theirs.rmse, rel=1e-9)
    assert mine.max_abs == pytest.approx(theirs.max_abs_err, rel=1e-9)
    assert mine.row_cos_p10 == pytest.approx(theirs.row_cos_p10, abs=1e-6)


def test_rows_are_a_sample_drawn_the_same_way_from_the_seed():
    a = sample_rows(1000, 64, torch.Generator().manual_seed(9), torch.device("cpu"))
    b = sample_rows(1000, 64, torch.Generator().manual_seed(9), torch.device("cpu"))
    assert torch.equal(a, b) and len(set(a.tolist())) == 64 and a.tolist() == sorted(a.tolist())


def test_lines_are_flushed_as_they_come_and_the_meta_says_when_complete(tmp_path):
    sites = CallSites()
    op, rec = shadowed(tmp_path, {}, sites=sites)
    lines = tmp_path / "insitu" / "rank0.jsonl"
    q, k, v = make_qkv(64, h=1, d=16, dtype=torch.float32)
    for step in (1, 2, 3):
        with sites.site(step=step, steps=3), sites.site(block=0, kind="dit_self"):
            op(q, k, v)
    assert len(lines.read_text().splitlines()) == 2  # two flushed, the third held (flush_every=2)
    meta = json.loads((tmp_path / "insitu" / "rank0.meta.json").read_text())
    assert meta["complete"] is False and meta["primary"] == "ref"
    assert read_insitu(tmp_path / "insitu").notes  # an unclosed record is named
    rec.close()
    run = read_insitu(tmp_path / "insitu")
    assert [c.step for c in run.calls] == [1, 2, 3] and all(c.kind == "dit_self" for c in run.calls)
    assert run.metas[0].complete and not run.notes and run.op_names() == ["ref"]


def test_a_line_cut_short_by_a_crash_is_left_out(tmp_path):
    op, rec = shadowed(tmp_path, {})
    op(*make_qkv(32, h=1, d=16, dtype=torch.float32))
    rec.close()
    path = tmp_path / "insitu" / "rank0.jsonl"
    path.write_text(path.read_text() + '{"call": 2, "rank": "0", "ste')
    assert len(read_insitu(tmp_path / "insitu").calls) == 1


def test_refusing_and_failing_shadows_never_stop_the_run(tmp_path):
    breaks = Breaks()
    op, rec = shadowed(tmp_path, {"refuses": Refuses(), "breaks": breaks})
    q, k, v = make_qkv(64, h=1, d=16, dtype=torch.float32)
    for _ in range(3):
        op(q, k, v)
    rec.close()
    run = read_insitu(tmp_path / "insitu")
    assert breaks.calls == 1  # dropped after its failure
    assert all(c.errors["refuses"].error.startswith("refused:") for c in run.calls)
    assert math.isnan(run.calls[0].errors["refuses"].rel_l1)
    assert "breaks" in run.calls[0].errors and "breaks" not in run.calls[1].errors
    assert any("shadow breaks failed on call 1 and was dropped" in n for n in run.metas[0].notes)
    stats = pool(run.calls, "refuses")
    assert stats.calls == 3 and stats.failed == 3 and stats.rel_l1 is None


def test_pooling_weights_each_call_by_its_reference(tmp_path):
    sites = CallSites()
    op, rec = shadowed(tmp_path, {"emul": get_backend("sage_emul_aiter")}, sites=sites)
    for step, scale in ((1, 1.0), (2, 4.0)):
        q, k, v = make_qkv(128, h=2, d=32, dtype=torch.bfloat16, seed=step, q_scale=scale)
        with sites.site(step=step):
            op(q, k, v)
    rec.close()
    calls = read_insitu(tmp_path / "insitu").calls
    s = pool(calls, "emul")
    l1 = sum(c.errors["emul"].rel_l1 * c.ref_l1 for c in calls) / sum(c.ref_l1 for c in calls)
    assert s.rel_l1 == pytest.approx(l1) and s.calls == 2 and s.failed == 0
    assert s.cosine_min == min(c.errors["emul"].cosine for c in calls)
    assert s.row_cos_p1 == min(c.errors["emul"].row_cos_p1 for c in calls)


def test_chosen_calls_are_captured_within_the_budget(tmp_path):
    from safetensors.torch import load_file

    sites = CallSites()
    cap = CaptureSettings(steps=[1, -1], blocks=[1], heads=1, max_calls=4)
    settings = InSituSettings(sample_rows=16, capture=cap)
    op = shadowed_attention(
        get_backend("torch_sdpa"), [], settings, tmp_path / "insitu", primary_name="ref", sites=sites
    )
    q, k, v = make_qkv(48, h=2, d=16, dtype=torch.bfloat16)
    for step in (1, 2, 3):
        with sites.site(step=step, steps=3):
            for block in (0, 1):
                with sites.site(block=block, kind="dit_self"):
                    op(q, k, v)
    op.recorder.close()
    meta = read_insitu(tmp_path / "insitu").metas[0]
    assert [(c.step, c.block) for c in meta.captured] == [(1, 1), (3, 1)]
    kept = load_file(str(tmp_path / "insitu" / meta.captured[0].file))
    assert torch.equal(kept["k"], k[:, :1]) and kept["q"].dtype == torch.bfloat16
    assert meta.captured[0].q_shape == [1, 1, 48, 16] and meta.captured[0].scale == pytest.approx(16**-0.5)

    tight = InSituSettings(sample_rows=16, capture=CaptureSettings(steps=[1], blocks=[0], max_mb=1e-4))
    op = shadowed_attention(
        get_backend("torch_sdpa"), [], tight, tmp_path / "tight", primary_name="ref", sites=sites
    )
    with sites.site(step=1), sites.site(block=0):
        op(q, k, v)
    op.recorder.close()
    meta = read_insitu(tmp_path / "tight").metas[0]
    assert not meta.captured and "max_mb" in meta.notes[0]


def test_the_refiners_block_and_the_dits_block_of_one_step_are_two_captures(tmp_path):
    """A pipeline's text refiner runs block 0 before the DiT's block 0 in the same step: keyed by
    (step, block) alone the refiner took the slot and the DiT's call was never kept."""
    sites = CallSites()

    def run(folder, cap):
        op = shadowed_attention(
            get_backend("torch_sdpa"), [], InSituSettings(sample_rows=8, capture=cap), folder,
            primary_name="ref", sites=sites,
        )  # fmt: skip
        with sites.site(step=1, steps=1):
            for kind, n in (("refiner", 74), ("dit_self", 48), ("dit_self", 48)):
                with sites.site(block=0, kind=kind):
                    op(*make_qkv(n, h=1, d=16, dtype=torch.bfloat16))
        op.recorder.close()
        return read_insitu(folder).metas[0].captured

    both = run(tmp_path / "all", CaptureSettings(steps=[1], blocks=[0]))
    assert [(c.kind, c.k_len) for c in both] == [("refiner", 74), ("dit_self", 48)]
    assert len({c.file for c in both}) == 2 and all(c.kind in c.file for c in both)
    dit = run(tmp_path / "dit", CaptureSettings(steps=[1], blocks=[0], kinds=["dit_self"]))
    assert [(c.kind, c.k_len) for c in dit] == [("dit_self", 48)]
    with pytest.raises(ValueError, match="kinds"):
        CaptureSettings(kinds=["refinr"])


def test_shadows_from_a_spec_are_their_own_counted_chains(tmp_path):
    specs = [
        ShadowSpec(name="floor", attn_type="torch_sdpa", kv_reversed=True),
        ShadowSpec(name="chunks", attn_type="torch_sdpa", kv_chunks=2),
    ]
    op = shadowed_attention(
        get_backend("torch_sdpa"), specs, InSituSettings(sample_rows=8), tmp_path, primary_name="a"
    )
    op(*make_qkv(40, h=1, d=16, dtype=torch.float32))
    op.recorder.close()
    assert op.shadows["floor"].calls["torch_sdpa"] == 1
    ops = {o.name: o for o in read_insitu(tmp_path).metas[0].ops}
    assert ops["floor"].kv_reversed and ops["chunks"].kv_chunks == 2 and ops["a"].role == "primary"
    assert all(o.exact for o in ops.values())


class NaNOutsideRows(AttentionOp):
    """Exact attention with one query row NaN: a row the sample does not hold (``row``)."""

    name = "nan_row"
    params = {"backend": "nan_row"}

    def __init__(self, row: int):
        self.row = row

    def __call__(self, q, k, v, scale=None):
        out = get_backend("torch_sdpa")(q, k, v, scale)
        out[:, :, self.row] = math.nan
        return out


def test_non_finite_values_outside_the_sampled_rows_are_counted_and_fail_the_reading(tmp_path):
    from harness.analysis.insitu import candidate_reading
    from harness.scenario.insitu import InSituTolerance

    n_q, rows = 200, 16
    # the shadow's rows come from the recorder's generator (seed 1): pick a row it will not sample
    sampled = set(
        sample_rows(n_q, rows, torch.Generator(device="cpu").manual_seed(1), torch.device("cpu")).tolist()
    )
    row = next(i for i in range(n_q) if i not in sampled)
    shadows = {"kv": KVReversed(get_backend("torch_sdpa")), "nan_row": NaNOutsideRows(row)}
    op, rec = shadowed(tmp_path, shadows, rows=rows)
    q, k, v = make_qkv(n_q, h=2, d=16, dtype=torch.float32, seed=8)
    op(q, k, v)
    rec.close()
    items = [("run", c) for c in read_insitu(tmp_path / "insitu").calls]
    e = items[0][1].errors["nan_row"]
    assert math.isfinite(e.rel_l1) and e.rel_l1 < FP32_ROUNDOFF_REL_L1  # the sampled rows hold no NaN
    assert e.nan == 2 * 16 and e.nonfinite == 2 * 16  # the whole output's: 2 heads x 16 values of one row
    r = candidate_reading("nan_row", items, ["ref", "kv"], None, InSituTolerance())
    assert r.word == "outside" and r.nonfinite == 1
    assert "1 of 1 call(s) returned non-finite values (first: run run call 1" in r.text
