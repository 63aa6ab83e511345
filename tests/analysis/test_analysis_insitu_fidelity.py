"""An emulator beside the kernel it reproduces, both shadowing the same calls. thu-ml's kernel
cannot run here: the op standing for it is named and recorded as sage_attn2 and computes with the
emulator itself (every call agrees) or with its corrected numerics (the padded keys masked: the
refiner's 74-key calls disagree, as the 1.0.6 emulator with masking did against the H200's kernel)."""

from __future__ import annotations

import pytest
import torch

from harness.analysis.insitu import emulator_pairs, fidelity
from harness.attention.insitu.recorder import CallSites, InSituRecorder, read_insitu
from harness.attention.insitu.shadow import ShadowedAttention
from harness.attention.registry import AttentionOp, get_backend
from harness.attention.wrappers import KVReversed
from harness.insitu_records import InSituOp
from harness.records import InSituSettings


class StandIn(AttentionOp):
    """Recorded as the kernel sage_attn2; computes with an emulator of given options."""

    params = {"backend": "sage_attn2", "sageattention": "package"}

    def __init__(self, name: str, **options):
        self.name = name
        self.op = get_backend("sage_emul_thuml", **options)

    def __call__(self, q, k, v, scale=None):
        return self.op(q, k, v, scale)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fidelity") / "insitu"
    sites = CallSites()
    shadows = {
        "kv_reversed": KVReversed(get_backend("torch_sdpa")),
        "sage_emul_thuml": get_backend("sage_emul_thuml"),
        "kernel_same": StandIn("kernel_same"),
        "kernel_masked": StandIn("kernel_masked", padded_keys="masked"),
    }
    recorder = InSituRecorder(folder, InSituSettings(sample_rows=32), sites=sites)
    op = ShadowedAttention(get_backend("torch_sdpa"), shadows, recorder=recorder, primary_name="ref")
    g = torch.Generator().manual_seed(0)
    with sites.site(step=1, steps=1):
        for kind, n in (("refiner", 74), ("dit_self", 256), ("dit_self", 256)):
            with sites.site(block=0, kind=kind):
                op(*[torch.randn(1, 2, n, 64, generator=g).to(torch.bfloat16) for _ in range(3)])
    recorder.close()
    return read_insitu(folder)


def test_the_emulator_is_paired_with_the_kernel_it_names(run):
    ops = [run.op(n) for n in run.op_names()]
    assert emulator_pairs(ops) == [("sage_emul_thuml", "kernel_same"), ("sage_emul_thuml", "kernel_masked")]
    lightx2v = [
        InSituOp(name="emul", role="shadow", attn_type="sage_attn2", params={"sageattention": "emulator"}),
        InSituOp(name="kern", role="shadow", attn_type="sage_attn2", params={"sageattention": "package"}),
        InSituOp(name="floor", role="shadow", attn_type="sage_attn2", kv_reversed=True,
                 params={"sageattention": "package"}),
    ]  # fmt: skip
    assert emulator_pairs(lightx2v) == [("emul", "kern")]


def test_an_emulator_that_follows_its_kernel_agrees_and_one_that_masks_does_not(run):
    items = [("r", c) for c in run.calls]
    same = fidelity("sage_emul_thuml", "kernel_same", items)
    assert same.calls == 3 and same.ratio_min == same.ratio_max == 1.0 and same.scale_diff_max == 0.0
    assert "agrees call by call" in same.text
    masked = fidelity("sage_emul_thuml", "kernel_masked", items)
    assert masked.ratio_max > 10 and "74 keys" in masked.worst and "refiner" in masked.worst
    assert "does NOT follow the kernel" in masked.text
    assert 0.8 < masked.ratio_min < 1.25  # the 256-key calls pad nothing: the two agree there
