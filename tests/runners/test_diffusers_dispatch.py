"""diffusers' attention dispatcher instrumented around a real (synthetic, tiny) LTX-2 pipeline: every DiT
call counted by the backend that served it, bypasses and fallbacks make the run invalid, the noise
floor perturbs the DiT only, harness backends serve through the dispatcher, and ``close`` undoes it all."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest
from diffusers_support import (
    call_params,
    needs_diffusers,
    synthetic,
)

pytestmark = needs_diffusers

torch = pytest.importorskip("torch")

# LTX-2's DiT: per layer video self, video-text, audio self, audio-text, audio-to-video, video-to-audio.
CALLS_PER_LAYER_STEP = 6
LAYERS, STEPS = 2, 2
DIT_CALLS = CALLS_PER_LAYER_STEP * LAYERS * STEPS
TEXT_CALLS = 2 * LAYERS * STEPS  # the two text cross-attentions carry LTX-2's (no-op) text mask


@pytest.fixture(scope="module")
def pipe(tmp_path_factory):
    from harness.runners.diffusers.launch import load_pipeline

    folder = synthetic(tmp_path_factory, "ltx2")
    params = {"pipeline": {"name": "ltx2_t2v"}, "model_path": str(folder)}
    return load_pipeline(params, torch.device("cpu"), torch.float32)


def spec_for(attn_type: str, kind: str, *, kv_reversed: bool = False, drop: bool = True, **options):
    from harness.records import RunSpec

    params = {
        "pipeline": call_params("ltx2_t2v"),
        "save_latents": True,
        "drop_trivial_masks": drop,
        "backend_kind": kind,
    }
    return RunSpec(
        scenario="t", runner="diffusers", arm="a", seed=5, attn_type=attn_type, kv_reversed=kv_reversed,
        attn_options=options, params=params,
    )  # fmt: skip


def generate_with(pipe, spec, out: Path, prepare=None):
    """The runner's generation (instrument, select, generate) with an optional hook before it runs."""
    from harness.runners.diffusers import launch
    from harness.runners.diffusers.dispatch import CallBook

    out.mkdir(parents=True, exist_ok=True)
    book = CallBook(spec.attn_type, spec.params["backend_kind"], spec.kv_reversed)
    with contextlib.ExitStack() as stack:
        if prepare is not None:
            stack.enter_context(prepare(pipe))
        timing, chain, _ = launch.run_generation(pipe, spec, out, torch.device("cpu"), book)
    return timing, launch.calls_record(spec, book, chain, finished=True)


def latents(run: Path, step: int) -> dict[str, np.ndarray]:
    with np.load(run / "latents" / f"step_{step:03d}.npz") as z:
        return {k: z[k] for k in z.files}


def test_native_counts_every_dit_call_and_keeps_the_output(pipe, tmp_path):
    from harness.runners.diffusers.launch import generate

    timing, calls = generate_with(pipe, spec_for("native", "dispatcher"), tmp_path / "native")
    rank = calls.ranks["0"]
    assert rank.calls == {"native": DIT_CALLS}
    assert rank.fallbacks == {} and rank.bypassed == 0 and rank.errors == []
    assert rank.ops["native -> torch sdpa"] >= DIT_CALLS  # the kernel under the backend
    assert rank.outside_scope["native"] > 0  # LTX-2's text connectors use the dispatcher too
    assert rank.outside_scope["torch sdpa (direct)"] > 0  # Gemma 3 calls SDPA itself
    assert calls.validity() == (True, [])
    assert timing.dit_steps == STEPS and timing.packed_layout["audio"] > 0
    # The counting wrappers change nothing: the same latents without any instrumentation.
    plain = tmp_path / "plain"
    params = call_params("ltx2_t2v")
    generate(
        pipe,
        params,
        seed=5,
        device=torch.device("cpu"),
        out_path=plain / "o.mp4",
        latents_dir=plain / "latents",
    )
    for step in (1, 2):
        a, b = latents(tmp_path / "native", step), latents(plain, step)
        assert a.keys() == {"video", "audio"} and all(np.array_equal(a[k], b[k]) for k in a)


def test_kv_reversed_floor_perturbs_the_dit_and_only_it(pipe, tmp_path):
    generate_with(pipe, spec_for("native", "dispatcher"), tmp_path / "ref")
    _, calls = generate_with(pipe, spec_for("native", "dispatcher", kv_reversed=True), tmp_path / "floor")
    rank = calls.ranks["0"]
    assert rank.kv_reversed_calls == DIT_CALLS and calls.validity() == (True, [])
    a, b = latents(tmp_path / "ref", 2)["video"], latents(tmp_path / "floor", 2)["video"]
    assert not np.array_equal(a, b)  # summation order changed...
    assert np.abs(a - b).max() < 1e-4 * np.abs(a).max()  # ...and nothing else


@contextlib.contextmanager
def bypass_one_attention(pipe):
    """One attention module of the DiT computes with torch SDPA directly, not through the dispatcher
    (what a processor written before the dispatcher, or a model's own attention, does)."""
    import torch.nn.functional as F
    from diffusers.models.transformers import transformer_ltx2

    def direct(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, **_):
        q, k, v = (x.transpose(1, 2) for x in (query, key, value))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask).transpose(1, 2)

    module = pipe.transformer.transformer_blocks[0].attn1
    inner = module.processor

    class Bypassing:
        _attention_backend = None

        def __call__(self, *args, **kwargs):
            real = transformer_ltx2.dispatch_attention_fn
            transformer_ltx2.dispatch_attention_fn = direct
            try:
                return inner(*args, **kwargs)
            finally:
                transformer_ltx2.dispatch_attention_fn = real

    module.processor = Bypassing()
    try:
        yield
    finally:
        module.processor = inner


def test_a_call_that_bypasses_the_dispatcher_makes_the_run_invalid(pipe, tmp_path):
    _, calls = generate_with(
        pipe, spec_for("native", "dispatcher"), tmp_path / "b", prepare=bypass_one_attention
    )
    rank = calls.ranks["0"]
    assert rank.bypassed == STEPS and rank.calls == {"native": DIT_CALLS - STEPS}
    valid, reasons = calls.validity()
    assert not valid
    assert any("bypassing the dispatcher" in r and "'native'" in r for r in reasons), reasons


def test_a_processor_pinned_to_another_backend_is_a_fallback(pipe, tmp_path):
    from diffusers.models.attention_dispatch import AttentionBackendName

    from harness.runners.diffusers.dispatch import CallBook, Instrument
    from harness.runners.diffusers.launch import calls_record, generate

    spec = spec_for("native", "dispatcher")
    book = CallBook("native", "dispatcher", False)
    processor = pipe.transformer.transformer_blocks[1].audio_attn1.processor
    with Instrument(book) as inst:
        inst.scope("transformer", pipe.transformer)
        assert inst.select("native", [pipe.transformer]) == CALLS_PER_LAYER_STEP * LAYERS
        processor._attention_backend = AttentionBackendName._NATIVE_MATH  # one module asks for another kernel
        generate(
            pipe, spec.params["pipeline"], seed=5, device=torch.device("cpu"), out_path=tmp_path / "o.mp4"
        )
    calls = calls_record(spec, book, None, finished=True)
    assert calls.ranks["0"].fallbacks == {"_native_math": STEPS}
    valid, reasons = calls.validity()
    assert not valid and f"rank 0: {STEPS} call(s) fell back to '_native_math'" in reasons


def test_a_backend_that_refuses_masks_gets_the_no_op_text_mask_dropped(pipe, tmp_path):
    # diffusers' _native_flash raises on any attn_mask; LTX-2 passes its all-zero text mask.
    _, calls = generate_with(pipe, spec_for("_native_flash", "dispatcher"), tmp_path / "flash")
    rank = calls.ranks["0"]
    assert rank.calls == {"_native_flash": DIT_CALLS}
    assert rank.masks_dropped == {"_native_flash": TEXT_CALLS}
    assert rank.ops["_native_flash -> torch sdpa"] == DIT_CALLS and calls.validity() == (True, [])
    with pytest.raises(ValueError, match="attn_mask"):
        generate_with(pipe, spec_for("_native_flash", "dispatcher", drop=False), tmp_path / "raw")


def test_a_harness_backend_serves_through_the_dispatcher_and_leaves_no_trace(pipe, tmp_path):
    from diffusers.models import attention_dispatch as ad

    before = dict(ad._AttentionBackendRegistry._backends)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    _, calls = generate_with(pipe, spec_for("sage_emul_thuml", "harness"), tmp_path / "emul")
    rank = calls.ranks["0"]
    assert rank.calls == {"sage_emul_thuml": DIT_CALLS} and calls.validity() == (True, [])
    assert rank.masks_dropped == {"sage_emul_thuml": TEXT_CALLS}
    assert rank.direct_check is not None and rank.direct_check.identical
    with pytest.raises(ValueError):
        ad.AttentionBackendName("sage_emul_thuml")
    assert ad._AttentionBackendRegistry._backends == before
    assert torch.nn.functional.scaled_dot_product_attention is sdpa


def test_a_harness_backend_hands_a_masking_call_to_native_as_a_fallback():
    from diffusers.models.attention_dispatch import dispatch_attention_fn

    from harness.attention.wrappers import make_attention
    from harness.runners.diffusers.dispatch import CallBook, Instrument

    book = CallBook("sage_emul_thuml", "harness", False)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 8, 2, 16, generator=gen) for _ in range(3))
    mask = torch.zeros(1, 2, 8, 8)
    mask[..., :3] = -1e4  # masks the first three keys
    with Instrument(book) as inst:
        inst.register_harness("sage_emul_thuml", make_attention("sage_emul_thuml"))
        book.scope_depth = 1  # as inside the DiT's forward
        out = dispatch_attention_fn(q, k, v, attn_mask=mask, backend="sage_emul_thuml")
    expected = torch.nn.functional.scaled_dot_product_attention(
        *(x.transpose(1, 2) for x in (q, k, v)), attn_mask=mask
    ).transpose(1, 2)
    assert torch.allclose(out, expected, atol=1e-6)
    assert book.calls == {"native": 1} and book.fallbacks == {"native": 1}
    assert any("masks keys" in e for e in book.problems())


def test_masks_nothing_and_reversed_kv():
    from harness.runners.diffusers.dispatch import masks_nothing, reversed_kv

    assert masks_nothing(torch.zeros(2, 3)) and masks_nothing(-torch.zeros(2, 3))
    assert not masks_nothing(torch.tensor([0.0, -1e4]))
    assert masks_nothing(torch.ones(3, dtype=torch.bool)) and not masks_nothing(torch.tensor([True, False]))
    k = torch.arange(6.0).reshape(1, 3, 1, 2)
    out = reversed_kv({"key": k, "value": k + 1, "attn_mask": torch.tensor([[1.0, 2.0, 3.0]])})
    assert torch.equal(out["key"][0, :, 0, 0], torch.tensor([4.0, 2.0, 0.0]))
    assert torch.equal(out["attn_mask"], torch.tensor([[3.0, 2.0, 1.0]]))
    with pytest.raises(ValueError, match="causal"):
        reversed_kv({"key": k, "value": k, "is_causal": True})
