"""Captured q/k/v in the kernel benchmark: files a shadowed run kept become shapes of their real
sizes, measured on the real activations; bad paths are one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.attention.exact import exact_attention
from harness.attention.insitu.recorder import CallSites
from harness.attention.registry import get_backend
from harness.attention.wrappers import shadowed_attention
from harness.errors import HarnessError
from harness.kernels.run import accuracy_metrics, run_kernels
from harness.kernels.schema import CapturedInputs, KernelsBlock, captured_shapes, load_captured
from harness.records import CaptureSettings, InSituSettings

ROOT = Path(__file__).resolve().parents[2]


def capture_calls(folder: Path) -> Path:
    """A run folder whose insitu/captures holds two bf16 calls with K outliers (real-looking)."""
    sites = CallSites()
    settings = InSituSettings(sample_rows=8, capture=CaptureSettings(steps=[1, 2], blocks=[0]))
    op = shadowed_attention(
        get_backend("torch_sdpa"), [], settings, folder / "insitu", primary_name="r", sites=sites
    )
    g = torch.Generator().manual_seed(0)
    for step in (1, 2):
        q = torch.randn(1, 2, 96, 32, generator=g)
        k = torch.randn(1, 2, 80, 32, generator=g) + 6 * torch.randn(1, 2, 1, 32, generator=g)
        v = torch.randn(1, 2, 80, 32, generator=g)
        with sites.site(step=step), sites.site(block=0, kind="dit_self"):
            op(*(x.to(torch.bfloat16) for x in (q, k, v)), 0.2)
    op.recorder.close()
    return folder


def test_captured_files_become_shapes_of_their_real_sizes(tmp_path):
    run = capture_calls(tmp_path / "runA")
    shapes = captured_shapes(CapturedInputs(path=str(run), label="real"))
    assert [c.shape.name for c in shapes] == [
        "real.runA.rank0_step001_dit_self_block000",
        "real.runA.rank0_step002_dit_self_block000",
    ]
    s = shapes[0].shape
    assert (s.batch, s.heads, s.seq_q, s.seq_k, s.head_dim, s.dtype) == (1, 2, 96, 80, 32, "bfloat16")
    assert shapes[0].scale == pytest.approx(0.2) and "step 1, block 0, kind dit_self" in s.note
    assert len(captured_shapes(CapturedInputs(path=str(run), max_files=1))) == 1


def test_the_benchmark_measures_the_captured_activations(tmp_path):
    run = capture_calls(tmp_path / "runA")
    block = KernelsBlock.model_validate({
        "shapes": [{"name": "synthetic", "heads": 2, "seq_q": 96, "seq_k": 80, "head_dim": 32, "dtype": "bf16"}],
        "captured": [{"path": str(run / "insitu" / "captures"), "backends": ["sage_emul_aiter"]}],
        "backends": ["torch_sdpa", "sage_emul_aiter"], "timing": False, "bitwise": False, "device": "cpu",
    })  # fmt: skip
    result = run_kernels(block, tmp_path / "out")
    captured = [s for s in result.shapes if s.captured]
    assert len(captured) == 2 and captured[0].scale == pytest.approx(0.2)
    rows = {(r.shape, r.label): r for r in result.rows}
    name = captured[0].shape.name
    assert (name, "torch_sdpa") not in rows  # the entry's backends only
    cap = captured_shapes(CapturedInputs(path=str(run)))[0]
    q, k, v = load_captured(cap, torch.device("cpu"))
    expected = accuracy_metrics(get_backend("sage_emul_aiter")(q, k, v, 0.2), exact_attention(q, k, v, 0.2))
    assert rows[(name, "sage_emul_aiter")].accuracy.rel_l1 == pytest.approx(expected.rel_l1, rel=1e-9)
    assert rows[(name, "torch_sdpa[kv_reversed]")].role == "noise_floor"


def test_bad_captured_paths_are_named(tmp_path):
    with pytest.raises(HarnessError, match="no such file or folder"):
        captured_shapes(CapturedInputs(path=str(tmp_path / "nowhere")))
    with pytest.raises(HarnessError, match=r"no captured q/k/v \(\*\.safetensors\) inside"):
        captured_shapes(CapturedInputs(path=str(tmp_path)))
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(2)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(HarnessError, match="not a captured call"):
        captured_shapes(CapturedInputs(path=str(tmp_path / "other.safetensors")))
    (tmp_path / "junk.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(HarnessError, match="unreadable"):
        captured_shapes(CapturedInputs(path=str(tmp_path / "junk.safetensors")))
    with pytest.raises(ValueError, match="captured .*: backends nope are not in the backends list"):
        KernelsBlock.model_validate({"shapes": [{"name": "s", "heads": 1, "seq_q": 8, "head_dim": 8}],
                                     "captured": [{"path": "x", "backends": ["nope"]}], "backends": ["torch_sdpa"]})  # fmt: skip


def test_the_command_refuses_a_missing_capture_in_one_line(tmp_path):
    scenario = tmp_path / "k.yaml"
    scenario.write_text(
        "name: kc\nkind: kernels\nkernels:\n  shapes: [{name: t, heads: 1, seq_q: 16, head_dim: 16}]\n"
        f"  captured: [{{path: {tmp_path / 'gone'}}}]\n  backends: [torch_sdpa]\n  timing: false\n  device: cpu\n"
    )
    res = subprocess.run([sys.executable, "-m", "harness.cli", "kernels", str(scenario), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "kernels.captured: " in res.stderr and "no such file or folder" in res.stderr
    assert not (tmp_path / "o").exists()  # checked before anything is measured or written
