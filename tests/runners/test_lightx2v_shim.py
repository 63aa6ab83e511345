"""The aiter-as-`sageattention` shim: layouts, refusals, and that it calls the op it names.

aiter is not installed here, so a stand-in op module (exact attention in float64, BSHD, fixed
scale D**-0.5, like the gfx1201 op) is put in sys.modules for the duration of each test.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest
import torch
from lightx2v_site import SHIM_DIR

OP_MODULE = "aiter.ops.gfx1201.sage_attention"


def _load_shim():
    path = SHIM_DIR / "sageattention" / "__init__.py"
    spec = importlib.util.spec_from_file_location("_harness_test_sageattention_shim", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fake_op(monkeypatch):
    calls = []

    def gfx1201_sage_attention(q, k, v):  # BSHD in, BSHD out, scale D**-0.5
        assert q.ndim == 4 and q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
        calls.append(tuple(q.shape))
        qh, kh, vh = (t.transpose(1, 2).double() for t in (q, k, v))
        w = torch.softmax(qh @ kh.transpose(-1, -2) * q.shape[-1] ** -0.5, dim=-1)
        return (w @ vh).transpose(1, 2).contiguous().to(q.dtype)

    names = ["aiter", "aiter.ops", "aiter.ops.gfx1201", OP_MODULE]
    for name in names:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    sys.modules[OP_MODULE].gfx1201_sage_attention = gfx1201_sage_attention
    return calls


def _qkv(layout: str, b=2, h=3, n=17, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (b, h, n, d) if layout == "HND" else (b, n, h, d)
    return [torch.randn(shape, generator=g, dtype=torch.float64) for _ in range(3)]


def _sdpa_reference(q, k, v, layout: str):
    """Independent reference: torch SDPA in float64 on [B, H, N, D]."""
    if layout == "NHD":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return out.transpose(1, 2) if layout == "NHD" else out


@pytest.mark.parametrize("layout", ["HND", "NHD"])
@pytest.mark.parametrize("fn", ["sageattn", "sageattn_qk_int8_pv_fp16_triton"])
def test_layouts_match_sdpa(fake_op, layout, fn):
    shim = _load_shim()
    q, k, v = _qkv(layout)
    out = getattr(shim, fn)(q, k, v, tensor_layout=layout)
    assert out.shape == q.shape and out.is_contiguous()
    torch.testing.assert_close(out, _sdpa_reference(q, k, v, layout), rtol=1e-12, atol=1e-12)
    assert fake_op == [(2, 17, 3, 16)]  # the op always sees BSHD


def test_the_default_scale_is_accepted_and_ignored_knobs_pass(fake_op):
    shim = _load_shim()
    q, k, v = _qkv("NHD", d=64)
    shim.sageattn(q, k, v, tensor_layout="NHD", sm_scale=64**-0.5, pv_accum_dtype="fp32+fp32", smooth_k=True)
    assert len(fake_op) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"is_causal": True}, "non-causal only"),
        ({"attn_mask": torch.ones(1)}, "no attention mask"),
        ({"return_lse": True}, "does not return the LSE"),
        ({"sm_scale": 0.5}, "uses scale head_dim"),
        ({"tensor_layout": "BHSD"}, "tensor_layout must be"),
    ],
)
def test_what_the_op_cannot_do_is_refused(fake_op, kwargs, message):
    shim = _load_shim()
    q, k, v = _qkv("HND")
    with pytest.raises((NotImplementedError, ValueError), match=message):
        shim.sageattn(q, k, v, **kwargs)
    assert fake_op == []


def test_unknown_arguments_are_refused(fake_op):
    shim = _load_shim()
    with pytest.raises(TypeError, match="unsupported argument"):
        shim.sageattn(*_qkv("HND"), dropout_p=0.1)


def test_missing_aiter_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "aiter", None)  # import aiter -> ImportError
    shim = _load_shim()
    with pytest.raises(ImportError, match="cannot import aiter.ops.gfx1201.sage_attention"):
        shim.sageattn(*_qkv("HND"))


def test_the_op_is_looked_up_per_call(fake_op):
    """A counting wrapper put on the op after import (the launcher's --count-op) must be seen."""
    shim = _load_shim()
    seen = []
    original = sys.modules[OP_MODULE].gfx1201_sage_attention

    def counted(*args):
        seen.append(1)
        return original(*args)

    sys.modules[OP_MODULE].gfx1201_sage_attention = counted
    shim.sageattn(*_qkv("HND"))
    assert seen == [1]


def test_the_package_marks_itself():
    shim = _load_shim()
    assert shim.IS_AITER_SHIM is True
    assert (Path(shim.__file__).parent.name, Path(shim.__file__).parent.parent) == ("sageattention", SHIM_DIR)


def test_the_emulator_shim_serves_the_harness_emulation_in_both_layouts():
    from harness.attention.registry import get_backend
    from harness.runners.lightx2v.rank_env import sageattention_flavour
    from harness.runners.lightx2v.shadows import load_shim

    shim = load_shim("emulator")
    assert sageattention_flavour(shim) == "emulator" and shim.EMULATED == "sage_emul_thuml"
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 160, 128, generator=gen).to(torch.bfloat16) for _ in range(3))  # HND
    want = get_backend("sage_emul_thuml")(q, k, v)
    assert torch.equal(shim.sageattn(q, k, v), want)
    nhd = shim.sageattn_qk_int8_pv_fp16_triton(*(t.transpose(1, 2) for t in (q, k, v)), tensor_layout="NHD")
    assert torch.equal(nhd.transpose(1, 2), want) and nhd.is_contiguous()
    with pytest.raises(NotImplementedError):
        shim.sageattn(q, k, v, is_causal=True)
    with pytest.raises(TypeError, match="unsupported argument"):
        shim.sageattn(q, k, v, window=3)
