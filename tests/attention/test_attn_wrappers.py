from __future__ import annotations

import pytest
import torch
from attn_testutil import errors, make_qkv

from harness.attention import (
    AttentionOp,
    CountingBackend,
    KVChunked,
    KVReversed,
    UnsupportedCall,
    exact_attention,
    get_backend,
    make_attention,
)
from harness.attention.wrappers import chunk_logsumexp
from harness.records import AttnCallsRecord, RankCalls


class OnlyD64(AttentionOp):
    """A stand-in for a kernel that refuses head dims other than 64."""

    name = "only_d64"
    exact = False
    params = {"backend": "only_d64"}

    def __call__(self, q, k, v, scale=None):
        if q.shape[-1] != 64:
            raise UnsupportedCall(f"only_d64: head dim {q.shape[-1]}")
        return get_backend("torch_sdpa")(q, k, v, scale)


def test_kv_reversed_is_exact_within_fp32_rounding():
    sdpa = get_backend("torch_sdpa")
    q, k, v = make_qkv(300, 257, h=2, d=64, dtype=torch.float32)
    ref = exact_attention(q, k, v)
    plain, reversed_ = sdpa(q, k, v), KVReversed(sdpa)(q, k, v)
    assert not torch.equal(plain, reversed_)  # the order really changed the summation
    assert (plain - reversed_).abs().max() < 1e-5
    assert (reversed_.double() - ref).abs().max() < 1e-5


def test_kv_reversed_changes_inexact_backends_only_slightly():
    q, k, v = make_qkv(256, h=2, d=64)
    emul = get_backend("sage_emul_thuml")
    e = errors(KVReversed(emul)(q, k, v), emul(q, k, v))
    assert e["cos"] > 0.999  # different quantization groups, same attention


def test_kv_reversed_reports_the_inner_name_and_flag():
    wrapped = KVReversed(get_backend("torch_sdpa"))
    assert wrapped.name == "torch_sdpa" and wrapped.exact
    assert wrapped.params["kv_reversed"] is True


def test_counting_without_fallback_counts_and_reraises():
    counting = CountingBackend(OnlyD64(), requested="only_d64")
    q, k, v = make_qkv(16, d=64)
    counting(q, k, v)
    counting(q, k, v)
    q2, k2, v2 = make_qkv(16, d=32)
    with pytest.raises(UnsupportedCall):
        counting(q2, k2, v2)
    rc = counting.rank_calls()
    assert isinstance(rc, RankCalls)
    assert rc.calls == {"only_d64": 2} and rc.fallbacks == {}
    assert rc.errors == ["only_d64: head dim 32"]


def test_counting_records_fallbacks_and_the_run_becomes_invalid():
    counting = CountingBackend(OnlyD64(), requested="only_d64", fallback="torch_sdpa")
    q, k, v = make_qkv(16, d=64)
    q2, k2, v2 = make_qkv(16, d=32)
    counting(q, k, v)
    out = counting(q2, k2, v2)
    counting(q2, k2, v2)
    assert torch.equal(out, get_backend("torch_sdpa")(q2, k2, v2))
    rc = counting.rank_calls()
    assert rc.calls == {"only_d64": 1, "torch_sdpa": 2}
    assert rc.fallbacks == {"torch_sdpa": 2}
    assert rc.errors == ["only_d64: head dim 32"]  # deduplicated
    record = counting.record(rank="0")
    valid, reasons = record.validity()
    assert not valid
    assert reasons == ["rank 0: 2 call(s) fell back to 'torch_sdpa'", "rank 0: only_d64: head dim 32"]


def test_make_attention_noise_floor_chain_is_valid_and_counts_by_backend_name():
    attn = make_attention("torch_sdpa", kv_reversed=True)
    q, k, v = make_qkv(32, d=16, dtype=torch.float32)
    attn(q, k, v)
    attn.apply(*(x[0].transpose(0, 1) for x in (q, k, v)))  # LightX2V-style calls count too
    record = attn.record()
    assert isinstance(record, AttnCallsRecord)
    assert record.kv_reversed and record.requested == "torch_sdpa"
    assert record.total() == 2
    assert record.validity() == (True, [])


def test_real_fallback_emulation_to_sdpa_beyond_exact_int8_head_dim():
    attn = make_attention("sage_emul_thuml", fallback="torch_sdpa")
    q, k, v = make_qkv(4, d=2048)  # 127^2 * 2048 >= 2^24: not exactly emulable
    attn(q, k, v)
    assert attn.rank_calls().fallbacks == {"torch_sdpa": 1}
    assert attn.params["fallback"] == "torch_sdpa"
    assert "2048" in attn.rank_calls().errors[0]


@pytest.mark.parametrize("chunks", [2, 3])
def test_kv_chunks_merged_by_logsumexp_are_exact(chunks):
    sdpa = get_backend("torch_sdpa")
    q, k, v = make_qkv(300, 257, h=2, d=64, dtype=torch.float32)
    ref = exact_attention(q, k, v)
    plain, chunked = sdpa(q, k, v), KVChunked(sdpa, chunks)(q, k, v)
    assert not torch.equal(plain, chunked)  # the split changed the rounding
    assert (chunked.double() - ref).abs().max() < 1e-5
    assert chunked.dtype == q.dtype and chunked.shape == q.shape
    qb, kb, vb = (x.bfloat16() for x in (q, k, v))
    ref_b = exact_attention(qb, kb, vb)
    err_plain = (sdpa(qb, kb, vb).double() - ref_b).pow(2).mean()
    err_chunked = (KVChunked(sdpa, chunks)(qb, kb, vb).double() - ref_b).pow(2).mean()
    assert err_chunked < 4 * err_plain  # a rounding-level perturbation in bf16 too


def test_chunk_logsumexp_matches_torch_and_make_attention_wraps():
    q, k, _ = make_qkv(70, 50, h=2, d=32, dtype=torch.float32)
    got = chunk_logsumexp(q, k, 0.2, max_chunk_elems=2 * 2 * 50 * 8)  # 8 query rows at a time
    want = torch.logsumexp((q.double() @ k.double().transpose(-1, -2)) * 0.2, dim=-1)
    assert (got.double() - want).abs().max() < 1e-4
    op = make_attention("torch_sdpa", kv_reversed=True, kv_chunks=2)
    assert isinstance(op.inner, KVChunked) and isinstance(op.inner.inner, KVReversed)
    assert op.params["kv_chunks"] == 2 and op.params["kv_reversed"] is True
    with pytest.raises(ValueError, match="2 or more"):
        KVChunked(get_backend("torch_sdpa"), 1)
