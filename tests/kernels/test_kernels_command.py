"""`harness kernels SCENARIO` (also `python -m harness.kernels`): the files it writes, its refusals."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = """\
name: kern_tiny
kind: kernels
kernels:
  shapes:
    - {name: tiny, heads: 2, seq_q: 256, head_dim: 64, dtype: bf16}
  backends: [torch_sdpa, sage_emul_thuml, sage_attn2]
  warmup: 0
  repeats: 2
  emulation_repeats: 1
  peak_size: 64
"""


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT)  # fmt: skip


def test_kernels_command_writes_json_and_tables(tmp_path):
    scen = tmp_path / "k.yaml"
    scen.write_text(SCENARIO)
    res = harness("kernels", scen, "--out", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out" / "kern_tiny" / "kernels"
    data = json.loads((out / "kernels.json").read_text())
    rows = {r["label"]: r for r in data["rows"]}
    assert rows["torch_sdpa"]["accuracy"]["cosine"] > 0.99999
    assert 0.99 < rows["sage_emul_thuml"]["accuracy"]["cosine"] < 0.99999
    assert rows["sage_attn2"]["status"] == "skipped" and rows["sage_attn2"]["reason"]
    # the terminal: a summary per shape and backend (cosine, rel L1, median ms), then the paths
    table = res.stdout.split("kernels.json:")[0]
    sdpa = next(line for line in table.splitlines() if " torch_sdpa " in line)
    acc, speed = rows["torch_sdpa"]["accuracy"], rows["torch_sdpa"]["speed"]
    assert (
        f"{acc['cosine']:.6f}" in sdpa
        and f"{acc['rel_l1']:.4f}" in sdpa
        and f"{speed['median_ms']:.3f}" in sdpa
    )
    assert "skipped" in next(line for line in table.splitlines() if " sage_attn2 " in line)
    assert ("no matmul peak is known on a CPU" in table) == (data["device"] == "cpu")
    md = (out / "report.md").read_text()
    assert "| tiny | torch_sdpa |" in md and "sage_attn2" in md
    page = (out / "index.html").read_text()
    assert "<td>torch_sdpa</td>" in page and "kernels.json" in page
    assert "http://" not in page and "https://" not in page  # static: nothing fetched


def test_kernels_command_refuses_an_e2e_scenario():
    res = harness("kernels", ROOT / "scenarios" / "e2e_3step.yaml")
    assert res.returncode == 2
    assert "is of kind 'e2e'; use `harness run`" in res.stderr


def test_python_m_harness_kernels_is_the_same_command(tmp_path):
    scenario = tmp_path / "k.yaml"
    scenario.write_text(
        "name: k_cli\nkind: kernels\nkernels:\n"
        "  shapes: [{name: t, heads: 1, seq_q: 32, head_dim: 16}]\n"
        "  backends: [torch_sdpa, sage_attn2]\n  timing: false\n  device: cpu\n"
    )
    run = [sys.executable, "-m", "harness.kernels", str(scenario), "--out", str(tmp_path / "out")]
    res = subprocess.run(run, capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out" / "k_cli" / "kernels"
    assert {p.name for p in out.iterdir()} >= {"kernels.json", "env.json", "report.md", "index.html"}
    assert "| t | torch_sdpa |" in (out / "report.md").read_text()
    assert "report.md:" in res.stdout and "index.html:" in res.stdout
    scenario.write_text("name: k_cli\nkind: kernels\nkernels: {shapes: [], backends: []}\n")
    res = subprocess.run(run, capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2 and "kernels.shapes" in res.stderr


PLUGIN = """\
import torch
from harness.attention.registry import AttentionBackend, register_backend


def fp16_sdpa(q, k, v, scale):
    out = torch.nn.functional.scaled_dot_product_attention(q.half(), k.half(), v.half(), scale=scale)
    return out.to(q.dtype)


@register_backend("fp16_sdpa_kern", exact=False, description="SDPA computed in fp16")
class FP16SDPA(AttentionBackend):
    def __call__(self, q, k, v, scale=None):
        return fp16_sdpa(q, k, v, q.shape[-1] ** -0.5 if scale is None else scale)

    def direct_call(self):
        return fp16_sdpa
"""


def test_a_plugin_backend_is_measured_like_any_with_the_direct_call_checks(tmp_path):
    (tmp_path / "kernel.py").write_text(PLUGIN)
    scen = tmp_path / "k.yaml"
    scen.write_text(
        SCENARIO.replace("kind: kernels\n", "kind: kernels\nplugins: [kernel.py]\n").replace(
            "sage_emul_thuml, sage_attn2", "fp16_sdpa_kern"
        )
    )
    res = harness("kernels", scen, "--out", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    data = json.loads((tmp_path / "out" / "kern_tiny" / "kernels" / "kernels.json").read_text())
    row = next(r for r in data["rows"] if r["label"] == "fp16_sdpa_kern")
    assert row["status"] == "ok" and 0.9999 < row["accuracy"]["cosine"] < 1.0  # fp16 rounding, not exact
    checks = {c["check"]: c["identical"] for c in row["bitwise"]}
    assert checks == {"direct_vs_direct": True, "registry_vs_direct": True, "packed_3d_vs_direct": True,
                      "packed_4d_vs_direct": True}  # fmt: skip
