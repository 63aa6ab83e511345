from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from tiny_ref2av_testutil import quantized_attention

from harness.tiny_ref2av.config import PRESETS
from harness.tiny_ref2av.model import AUDIO_CH, VIDEO_CH, Conditioning, TinyRef2AV, _rope
from harness.tiny_ref2av.run import tokenize

CPU = torch.device("cpu")


def _setup(cfg=PRESETS["tiny"], dtype=torch.float32):
    model = TinyRef2AV(cfg, CPU, dtype)
    g = torch.Generator().manual_seed(0)
    tv = torch.randn(cfg.latent_t, cfg.latent_h, cfg.latent_w, VIDEO_CH, generator=g) * 0.5
    ta = torch.randn(cfg.audio_tokens, AUDIO_CH, generator=g) * 0.5
    cos, sin = model.rope_tables()
    cond = Conditioning(model.encode_text(tokenize("hello", cfg.text_tokens)), tv, ta, cos, sin)
    xv = torch.randn(tv.shape, generator=g)
    xa = torch.randn(ta.shape, generator=g)
    return model, cond, xv, xa


def test_attention_is_called_with_packed_bhnd_and_scale():
    cfg = PRESETS["tiny"]
    model, cond, xv, xa = _setup(cfg)
    calls = []

    def spy(q, k, v, scale):
        calls.append((tuple(q.shape), tuple(k.shape), tuple(v.shape), scale))
        return F.scaled_dot_product_attention(q, k, v, scale=scale)

    x0v, x0a = model.forward(xv, xa, 0.9, 0.7, cond, spy)
    shape = (1, cfg.heads, cfg.seq_len, cfg.head_dim)
    assert calls == [(shape, shape, shape, 1 / math.sqrt(cfg.head_dim))] * cfg.depth
    assert x0v.shape == xv.shape and x0a.shape == xa.shape
    assert x0v.dtype == torch.float32 and torch.isfinite(x0v).all()


def test_prediction_is_target_plus_a_bounded_attention_dependent_correction():
    model, cond, xv, xa = _setup()
    exact = lambda q, k, v, s: F.scaled_dot_product_attention(q, k, v, scale=s)  # noqa: E731
    x0v, _ = model.forward(xv, xa, 0.9, 0.7, cond, exact)
    dev = (x0v - cond.target_video).std().item()
    assert 0.02 < dev < 1.0  # the network adds something, but stays near the target
    # Attention matters: uniform attention and a quantised attention both move the prediction.
    uniform = lambda q, k, v, s: v.mean(dim=-2, keepdim=True).expand_as(v)  # noqa: E731
    u0v, _ = model.forward(xv, xa, 0.9, 0.7, cond, uniform)
    q0v, _ = model.forward(xv, xa, 0.9, 0.7, cond, quantized_attention)
    err_q = (q0v - x0v).norm() / (x0v - cond.target_video).norm()
    err_u = (u0v - x0v).norm() / (x0v - cond.target_video).norm()
    assert 0.01 < err_q < 0.4 and err_u > 3 * err_q


def test_velocity_is_flow_matching_form():
    model, cond, xv, xa = _setup()
    exact = lambda q, k, v, s: F.scaled_dot_product_attention(q, k, v, scale=s)  # noqa: E731
    x0v, x0a = model.forward(xv, xa, 0.8, 0.5, cond, exact)
    vv, va = model.velocity(xv, xa, 0.8, 0.5, cond, exact)
    torch.testing.assert_close(vv, (xv - x0v) / 0.8)
    torch.testing.assert_close(va, (xa - x0a) / 0.5)


def test_weights_depend_on_weight_seed_only():
    cfg = PRESETS["tiny"]
    a, b = TinyRef2AV(cfg, CPU, torch.float32), TinyRef2AV(cfg, CPU, torch.float32)
    c = TinyRef2AV(cfg.with_overrides({"weight_seed": 7}), CPU, torch.float32)
    assert torch.equal(a.blocks[0].wqkv, b.blocks[0].wqkv)
    assert not torch.equal(a.blocks[0].wqkv, c.blocks[0].wqkv)
    # The content bases are orthonormal (the head reads the targets back exactly).
    basis = torch.cat([a.ex_v, a.er_v, a.ex_a, a.er_a])
    torch.testing.assert_close(basis @ basis.T, torch.eye(len(basis)), atol=1e-5, rtol=0)


def test_rope_is_relative_for_video_and_identity_for_text():
    cfg = PRESETS["tiny"]
    model = TinyRef2AV(cfg, CPU, torch.float32)
    cos, sin = model.rope_tables()
    t0 = cfg.text_tokens
    torch.testing.assert_close(cos[:t0], torch.ones_like(cos[:t0]))
    torch.testing.assert_close(sin[:t0], torch.zeros_like(sin[:t0]))
    v0 = cfg.text_tokens + cfg.audio_tokens
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 1, cfg.head_dim, generator=g), torch.randn(1, 1, cfg.head_dim, generator=g)

    def score(i, j):  # rotated q at video token i against rotated k at video token j
        qi = _rope(q, cos[v0 + i : v0 + i + 1], sin[v0 + i : v0 + i + 1])
        kj = _rope(k, cos[v0 + j : v0 + j + 1], sin[v0 + j : v0 + j + 1])
        return float((qi * kj).sum())

    w = cfg.latent_w
    # Same (t, h, w) offset, different absolute positions -> same score.
    assert abs(score(0, 1) - score(w + 2, w + 3)) < 1e-4
    assert abs(score(0, 1) - score(0, w)) > 1e-3  # an h step is not a w step


def test_bfloat16_forward_runs_and_stays_close():
    model32, cond, xv, xa = _setup()
    model16 = TinyRef2AV(PRESETS["tiny"], CPU, torch.bfloat16)
    cos, sin = model16.rope_tables()
    text = model16.encode_text(tokenize("hello", PRESETS["tiny"].text_tokens))
    cond16 = Conditioning(text, cond.target_video, cond.target_audio, cos, sin)
    exact = lambda q, k, v, s: F.scaled_dot_product_attention(q, k, v, scale=s)  # noqa: E731
    a, _ = model32.forward(xv, xa, 0.9, 0.7, cond, exact)
    b, _ = model16.forward(xv, xa, 0.9, 0.7, cond16, exact)
    assert b.dtype == torch.float32
    rel = (a - b).norm() / (a - cond.target_video).norm()
    assert rel < 0.4
