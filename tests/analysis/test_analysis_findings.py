"""Findings: where a candidate's error concentrates, and errors that are mostly a scale. Measured
on real ops through the in-situ shadows: the emulator of thu-ml's Triton kernel (its padded-key
defect), an SDPA whose output is planted 10 % too small, and exact attention."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness.analysis.findings import FACTOR, Observation, find, mostly_scale, padding
from harness.analysis.insitu import candidate_reading
from harness.attention.insitu.recorder import CallSites, InSituRecorder, read_insitu
from harness.attention.insitu.shadow import ShadowedAttention
from harness.attention.registry import AttentionOp, get_backend
from harness.attention.wrappers import KVReversed
from harness.records import InSituSettings
from harness.scenario.insitu import InSituTolerance


def make_qkv(n: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, 2, n, 64, generator=g).to(torch.bfloat16) for _ in range(3)]


class Scaled(AttentionOp):
    """Exact attention times 0.9: the direction of every row kept, its length not."""

    name = "scaled"
    params = {"backend": "scaled"}

    def __call__(self, q, k, v, scale=None):
        return (0.9 * get_backend("torch_sdpa")(q, k, v, scale).float()).to(q.dtype)


class Exact(AttentionOp):
    name = "exact_copy"
    params = {"backend": "torch_sdpa"}

    def __call__(self, q, k, v, scale=None):
        return get_backend("torch_sdpa")(q, k, v, scale)


@pytest.fixture(scope="module")
def shadowed_calls(tmp_path_factory):
    """Three steps of a pipeline: a 74-token text refiner (54 keys padded to a 64-key block) and two
    DiT blocks of 256 tokens (none padded), every shadow measured on each call."""
    folder = tmp_path_factory.mktemp("findings") / "insitu"
    sites = CallSites()
    shadows = {
        "kv_reversed": KVReversed(get_backend("torch_sdpa")),
        "sage_emul_thuml": get_backend("sage_emul_thuml"),
        "scaled": Scaled(),
        "exact_copy": Exact(),
    }
    recorder = InSituRecorder(folder, InSituSettings(sample_rows=48, seed=1), sites=sites)
    op = ShadowedAttention(get_backend("torch_sdpa"), shadows, recorder=recorder, primary_name="ref")
    seed = 0
    for step in (1, 2, 3):
        with sites.site(step=step, steps=3):
            for kind, n, block in (("refiner", 74, 0), ("dit_self", 256, 0), ("dit_self", 256, 1)):
                with sites.site(block=block, kind=kind):
                    op(*make_qkv(n, seed))
                seed += 1
    recorder.close()
    return [("run", c) for c in read_insitu(folder).calls]


def reading(calls, name):
    return candidate_reading(name, calls, ["ref", "kv_reversed"], None, InSituTolerance())


def test_the_padded_key_defect_is_named_with_its_scale(shadowed_calls):
    r = reading(shadowed_calls, "sage_emul_thuml")
    assert len(r.findings) == 1, [f.text for f in r.findings]
    f = r.findings[0]
    assert f.count == 3 and f.rest_count == 6 and f.facts.startswith("refiner; 74 keys, 54 padded")
    assert f.dimension == "padded_share" and "of kind refiner" in f.also and "with 74 keys" in f.also
    assert f.ratio_ci is not None and f.ratio_ci[0] >= FACTOR and f.floor_ratio > FACTOR
    assert 0.6 < f.scale < 0.85 and f.rel_l1_unscaled < f.rel_l1 / 3  # rows shrunk, direction kept
    assert "outputs scaled by 0." in f.text and "cosine cannot see this" in f.text
    assert (
        f.text.startswith("sage_emul_thuml: error ") and "on 3 calls whose last 64-key block pads" in f.text
    )
    refiner = next(k for k in r.per_kind if k.kind == "refiner")
    assert refiner.scale == pytest.approx(f.scale)  # the per-kind row carries it too


def test_a_scale_error_on_every_call_is_named_and_exact_attention_gets_no_finding(shadowed_calls):
    scaled = reading(shadowed_calls, "scaled").findings
    assert [f.dimension for f in scaled] == ["all"] and scaled[0].count == 9
    assert scaled[0].scale == pytest.approx(0.9, abs=0.005)
    assert scaled[0].text.startswith("scaled: rel L1 0.1") and "outputs scaled by 0.90" in scaled[0].text
    exact = reading(shadowed_calls, "exact_copy")
    assert exact.findings == [] and exact.stats.rel_l1 < 4e-3
    worst = reading(shadowed_calls, "scaled").worst[0]
    assert worst.scale == pytest.approx(0.9, abs=0.005)


def obs(kind, k, rel, *, floor=0.002, scale=1.0, unscaled=None, step=1):
    attrs = {"kind": kind, "k_len": k, "q_len": k, "step": step, "block": 0, "rank": "0"}
    return Observation(attrs=attrs, l1=rel * 100, ref=100, floor_l1=floor * 100, scale=scale,
                       unscaled=rel if unscaled is None else unscaled)  # fmt: skip


def test_a_group_found_first_is_set_aside_before_the_next_is_sought():
    """The refiner's calls all sit in block 0, so block 0 looks worse too: it is no second finding."""
    calls = [obs("refiner", 74, 0.3, step=s) for s in (1, 2, 3)]
    calls += [obs("dit_self", 256, 0.004 * (1 + 0.1 * s), step=s) for s in range(1, 7)]
    found = find("k", calls)
    assert len(found) == 1 and found[0].count == 3


def test_a_group_below_its_exact_floor_times_the_factor_is_no_finding():
    """Short calls whose exact attention is as far off (the floor) are no defect of the kernel."""
    calls = [obs("refiner", 74, 0.03, floor=0.02) for _ in range(3)]
    calls += [obs("dit_self", 256, 0.003, floor=0.002) for _ in range(6)]
    assert find("k", calls) == []


def test_one_call_a_side_is_judged_on_its_point_value_and_says_it_has_no_interval():
    found = find("k", [obs("refiner", 74, 0.3), obs("dit_self", 256, 0.004)])
    assert len(found) == 1 and found[0].ratio_ci is None and "[95 %" not in found[0].text


@given(
    st.lists(st.floats(1e-4, 1.0), min_size=2, max_size=12),
    st.floats(1.0, 1e6),
)
def test_the_same_error_everywhere_is_never_a_finding(rels, ref):
    """Calls of any kinds and lengths whose rel L1 is the same: no group stands out."""
    rel = rels[0]
    calls = [
        Observation(
            attrs={"kind": "refiner" if i % 2 else "dit_self", "k_len": 64 + 10 * i}, l1=rel * ref, ref=ref
        )
        for i in range(len(rels))
    ]
    assert find("k", calls) == []


@given(st.floats(-10, 10), st.floats(0, 10), st.floats(0, 10))
def test_mostly_scale_needs_a_scale_and_a_small_remainder(scale, rel, unscaled):
    said = mostly_scale(rel, scale, unscaled)
    assert said == (abs(scale - 1) >= 0.02 and unscaled < rel / 3)
    assert not mostly_scale(math.nan, scale, unscaled) and not mostly_scale(rel, None, unscaled)


def test_padding_counts_the_keys_a_64_key_block_adds():
    assert [padding(n) for n in (63, 64, 65, 74, 120_016)] == [1, 0, 63, 54, 48]


numbers = st.floats(allow_nan=True, allow_infinity=True) | st.none()


@given(
    st.lists(
        st.tuples(st.sampled_from(["refiner", "dit_self", "](x)"]), st.integers(1, 200_000), st.floats(),
                  st.floats(), numbers, numbers, numbers),
        max_size=12,
    )
)  # fmt: skip
def test_any_numbers_a_record_holds_give_findings_or_none_never_an_error(rows):
    """Records may hold NaN, infinities, zeros or nothing: findings are computed or left out, and
    every figure a finding states is finite."""
    calls = [
        Observation(
            attrs={"kind": kind, "k_len": k}, l1=l1, ref=ref, floor_l1=floor, scale=scale, unscaled=rest
        )
        for kind, k, l1, ref, floor, scale, rest in rows
    ]
    for f in find("k", calls):
        assert math.isfinite(f.rel_l1) and f.text.startswith("k: ")
        assert f.ratio is None or f.ratio > 0
        assert f.ratio_ci is None or all(math.isfinite(x) for x in f.ratio_ci)
