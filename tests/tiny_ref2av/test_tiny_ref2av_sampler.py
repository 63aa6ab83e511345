from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.tiny_ref2av.config import PRESETS
from harness.tiny_ref2av.model import initial_noise, shifted_sigmas


@pytest.mark.parametrize("n,shift", [(4, 12.0), (4, 3.0), (30, 12.0), (2, 5.0)])
def test_shifted_sigmas_match_formula(n, shift):
    sig = shifted_sigmas(n, shift)
    base = np.linspace(1.0, 0.0, n)
    expect = shift * base / (1 + (shift - 1) * base)
    assert len(sig) == n  # sigma points including the terminal 0 -> n-1 steps
    np.testing.assert_allclose(sig, expect, rtol=0, atol=1e-12)
    assert sig[0] == 1.0 and sig[-1] == 0.0
    assert all(a > b for a, b in zip(sig[:-1], sig[1:], strict=True))


def test_shift_one_is_linear_and_larger_shift_stays_noisier():
    np.testing.assert_allclose(shifted_sigmas(5, 1.0), np.linspace(1, 0, 5), atol=1e-12)
    assert all(v >= a for v, a in zip(shifted_sigmas(4, 12.0), shifted_sigmas(4, 3.0), strict=True))


def test_initial_noise_is_a_seeded_cpu_stream():
    cfg = PRESETS["tiny"]
    v1, a1 = initial_noise(cfg, 42)
    v2, a2 = initial_noise(cfg, 42)
    v3, _ = initial_noise(cfg, 43)
    assert v1.device.type == "cpu" and v1.dtype == torch.float32
    assert torch.equal(v1, v2) and torch.equal(a1, a2)
    assert not torch.equal(v1, v3)
    # Video first, then audio, from one generator: reproducible from the documented order.
    g = torch.Generator().manual_seed(42)
    assert torch.equal(v1, torch.randn(v1.shape, generator=g))
    assert torch.equal(a1, torch.randn(a1.shape, generator=g))
    assert abs(float(v1.std()) - 1.0) < 0.2


def test_the_site_hook_brackets_every_step_and_each_blocks_attention_call():
    """The runner's call sites come from these hooks: every call inside its step and block."""
    import contextlib

    import torch.nn.functional as F

    from harness.tiny_ref2av.model import Conditioning, TinyRef2AV, sample
    from harness.tiny_ref2av.run import audio_target, tokenize, video_target

    cfg = PRESETS["tiny"]
    model = TinyRef2AV(cfg, torch.device("cpu"), torch.float32)
    cos, sin = model.rope_tables()
    ref = torch.rand(3, cfg.latent_h, cfg.latent_w)
    cond = Conditioning(model.encode_text(tokenize("x", cfg.text_tokens)), video_target(ref, cfg.latent_t, "x"),
                        audio_target(cfg.audio_tokens, cfg.frames / cfg.fps, "x"), cos, sin)  # fmt: skip
    where: dict = {}
    seen = []

    @contextlib.contextmanager
    def site(**fields):
        outer = dict(where)
        where.update(fields)
        yield
        where.clear()
        where.update(outer)

    def attention(q, k, v, scale):
        seen.append((where.get("step"), where.get("steps"), where.get("block"), where.get("kind")))
        return F.scaled_dot_product_attention(q, k, v, scale=scale)

    sample(model, cond, 1, attention, site=site)
    steps = cfg.dit_steps
    assert seen == [(s, steps, b, "dit_self") for s in range(1, steps + 1) for b in range(cfg.depth)]
