from __future__ import annotations

import pytest
import torch
from attn_testutil import errors, make_qkv

from harness.attention.exact import exact_attention
from harness.attention.registry import AttentionOp, UnsupportedCall, get_backend
from harness.attention.wrappers import (
    CountingBackend,
    FirstCallCheck,
    KVChunked,
    KVReversed,
    OutputContractError,
    chunk_logsumexp,
    make_attention,
)
from harness.records import AttentionChoice, AttnCallsRecord, RankCalls


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


def attn_calls(counting: CountingBackend) -> AttnCallsRecord:
    """attn_calls.json of a single-rank run through ``counting``, as the builtin runner writes it."""
    return AttnCallsRecord(
        requested=counting.requested,
        kv_reversed=bool(counting.inner.params.get("kv_reversed", False)),
        ranks={"0": counting.rank_calls()},
        backend=counting.backend_params(),
    )


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
    record = attn_calls(counting)
    valid, reasons = record.validity()
    assert not valid
    assert reasons == ["rank 0: 2 call(s) fell back to 'torch_sdpa'", "rank 0: only_d64: head dim 32"]


def test_make_attention_noise_floor_chain_is_valid_and_counts_by_backend_name():
    attn = make_attention(AttentionChoice(attn_type="torch_sdpa", kv_reversed=True))
    q, k, v = make_qkv(32, d=16, dtype=torch.float32)
    attn(q, k, v)
    attn.apply(*(x[0].transpose(0, 1) for x in (q, k, v)))  # LightX2V-style calls count too
    record = attn_calls(attn)
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
    op = make_attention(AttentionChoice(attn_type="torch_sdpa", kv_reversed=True, kv_chunks=2))
    assert isinstance(op.inner, KVChunked) and isinstance(op.inner.inner, KVReversed)
    assert op.params["kv_chunks"] == 2 and op.params["kv_reversed"] is True
    with pytest.raises(ValueError, match="2 or more"):
        KVChunked(get_backend("torch_sdpa"), 1)


def test_make_attention_builds_a_choice_whole():
    """A record carrying the choice (a run spec, a shadow) gives its backend, options and
    perturbation; a name alone is that backend unperturbed."""
    choice = AttentionChoice(
        attn_type="torch_sdpa", kv_reversed=True, kv_chunks=3, attn_options={"sdpa_backend": "math"}
    )
    op = make_attention(choice)
    assert op.requested == "torch_sdpa"
    assert (op.params["kv_chunks"], op.params["kv_reversed"], op.params["sdpa_backend"]) == (3, True, "math")
    plain = make_attention(AttentionChoice(attn_type="torch_sdpa", attn_options={"sdpa_backend": "math"}))
    assert isinstance(plain.inner, FirstCallCheck) and plain.params["sdpa_backend"] == "math"
    assert "kv_chunks" not in plain.params and "kv_reversed" not in plain.params


class Shifted(AttentionOp):
    """A backend whose wrapper changes the op's result (adds a tiny bias), with the op as direct call."""

    name = "shifted"
    exact = False
    params = {"backend": "shifted"}

    def __init__(self):
        self.op = get_backend("torch_sdpa").direct_call()

    def __call__(self, q, k, v, scale=None):
        return self.op(q, k, v, q.shape[-1] ** -0.5) + 1e-3


def test_first_call_check_finds_the_backend_equal_to_its_op():
    for name in ("torch_sdpa", "sage_emul_thuml", "sage_emul_aiter"):
        attn = make_attention(AttentionChoice(attn_type=name, kv_reversed=name == "torch_sdpa"))
        q, k, v = make_qkv(96, h=2, d=64)
        attn(q, k, v)
        attn(*make_qkv(32, h=2, d=64))  # a later call is not checked: the first one's shape stays
        check = attn.rank_calls().direct_check
        assert check is not None and check.identical, (name, check)
        assert check.q_shape == list(q.shape)
        assert check.reading() == f"bitwise identical (first call, q {'x'.join(map(str, q.shape))})"
        assert attn.rank_calls().calls == {name: 2}  # the direct call is not counted


def test_first_call_check_tells_a_changed_result_from_a_nondeterministic_op():
    q, k, v = make_qkv(64, h=2, d=32, dtype=torch.float32)
    changed = FirstCallCheck(Shifted(), get_backend("torch_sdpa").direct_call())
    changed(q, k, v)
    assert not changed.result.identical and changed.result.op_repeatable is True
    assert abs(changed.result.max_abs_diff - 1e-3) < 1e-4
    assert "the backend changes the result" in changed.result.reading()

    draws = iter(range(100))

    def noisy_op(q, k, v, scale):  # a different last bit on every call, like an op with atomics
        return exact_attention(q, k, v).to(q.dtype) + next(draws) * 1e-6

    shaky = FirstCallCheck(get_backend("torch_sdpa"), noisy_op)
    shaky(q, k, v)
    assert not shaky.result.identical and shaky.result.op_repeatable is False
    assert "the op itself is not deterministic" in shaky.result.reading()


def test_backends_without_a_direct_op_are_not_checked():
    counting = CountingBackend(OnlyD64(), requested="only_d64")
    counting(*make_qkv(16, d=64))
    assert counting.rank_calls().direct_check is None


def test_first_call_check_gives_the_direct_call_the_inputs_the_backend_saw():
    """An op that smooths K in place (SageAttention 1.x does ``k -= k.mean``): without copies the
    direct call would see a changed K and the check would blame the op."""
    sdpa = get_backend("torch_sdpa").direct_call()

    def smoothing_op(q, k, v, scale):
        k.sub_(k.mean(dim=-2, keepdim=True))
        return sdpa(q, k, v, scale)

    class Smoothing(OnlyD64):
        name = "smoothing"

        def __call__(self, q, k, v, scale=None):
            return smoothing_op(q, k, v, q.shape[-1] ** -0.5)

    q, k, v = make_qkv(64, h=2, d=64, dtype=torch.float32, k_bias=3.0)
    k_before = k.clone()
    check = FirstCallCheck(Smoothing(), smoothing_op)
    check(q, k, v)
    assert not torch.equal(k, k_before)  # the run's own K really changed
    assert check.result.identical and check.result.inputs_modified == ["k"]
    assert check.result.reading().startswith("bitwise identical; the call changes k in place (first call")


class Misbehaving(AttentionOp):
    """Exact attention, then its output bent by ``bend``."""

    name = "bent"
    exact = False
    params = {"backend": "bent"}

    def __init__(self, bend):
        self.bend = bend

    def __call__(self, q, k, v, scale=None):
        return self.bend(get_backend("torch_sdpa")(q, k, v, scale))


@pytest.mark.parametrize(
    ("bend", "wrong"),
    [
        (lambda o: o.transpose(1, 2), "has shape [1, 6, 2, 64] (expected [1, 2, 6, 64])"),
        (lambda o: o[:, :, :5], "has shape [1, 2, 5, 64] (expected [1, 2, 6, 64])"),
        (lambda o: o.double(), "has dtype torch.float64 (expected torch.float32)"),
        (lambda o: o.to("meta"), "has device meta (expected cpu)"),
        (lambda o: o.tolist(), "is a list, not a tensor"),
    ],
    ids=["transposed", "short", "dtype", "device", "not-a-tensor"],
)
def test_an_output_that_breaks_the_contract_fails_the_call_naming_it(bend, wrong):
    counting = CountingBackend(Misbehaving(lambda o: o), requested="bent")
    q, k, v = make_qkv(6, 9, h=2, d=64, dtype=torch.float32)
    counting(q, k, v)  # the first call is sound
    counting.inner = Misbehaving(bend)
    with pytest.raises(OutputContractError) as err:
        counting(q, k, v)
    assert (
        str(err.value)
        == f"attention backend bent: call 2 (q [1, 2, 6, 64] torch.float32 on cpu): its output {wrong}"
    )
    assert counting.rank_calls().errors == [str(err.value)] and counting.calls == {"bent": 1}
