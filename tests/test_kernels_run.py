import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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
    md = (out / "report.md").read_text()
    assert "| tiny | torch_sdpa |" in md and "sage_attn2" in md


def test_kernels_command_refuses_an_e2e_scenario():
    res = harness("kernels", ROOT / "scenarios" / "e2e_3step.yaml")
    assert res.returncode == 2
    assert "is of kind 'e2e'; use `harness run`" in res.stderr
