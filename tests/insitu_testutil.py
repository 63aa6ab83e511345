"""A real shadowed campaign of the builtin pipeline's tiny preset (imported by tests/conftest.py,
which runs it once per session): the reference, a K/V-reversed floor, an emulated candidate, a
copy of the reference shadowing them (with captured calls), the same in BF16, and a schedule."""

from __future__ import annotations

from pathlib import Path

from cli_testutil import harness

SCENARIO = """\
name: insitu
runner: builtin
seed: 3
builtin: {preset: tiny, save_latents: true, lossless: true}
profiles: {3step: {infer_steps: 4}}
accepted_baseline: sage_emul_thuml
insitu_tolerance: {floor_ratio: 2.0, baseline_ratio: 1.1, max_rel_l1: 0.05}
arms:
  - {name: torch_sdpa, attn_type: torch_sdpa, role: reference}
  - {name: floor, attn_type: torch_sdpa, kv_reversed: true, role: noise_floor}
  - {name: sage_emul_thuml, attn_type: sage_emul_thuml}
  - {name: ref_insitu, attn_type: torch_sdpa,
     shadows: [floor, sage_emul_thuml, sage_emul_aiter, sage_attn2],
     insitu: {sample_rows: 128, seed: 5, capture: {steps: [1, -1], blocks: [0, 1], max_calls: 3}}}
  - {name: bf16_insitu, attn_type: torch_sdpa, overrides: {dtype: bfloat16},
     shadows: [floor, sage_emul_thuml], insitu: {sample_rows: 128}}
  - {name: hybrid, attn_type: sage_emul_thuml, schedule: {exact: torch_sdpa, exact_first: 1, exact_last: 1}}
"""
STEPS, BLOCKS = 3, 2  # the tiny preset: infer_steps 4 gives 3 DiT steps; depth 2


def run_shadowed_campaign(root: Path) -> Path:
    """Run (and report) the campaign under ``root``; its folder."""
    path = Path(root) / "insitu.yaml"
    path.write_text(SCENARIO)
    out = Path(root) / "out"
    res = harness("run", path, "--profile", "3step", "--out", out)
    assert res.returncode == 0, res.stdout + res.stderr
    return out / "insitu" / "3step"
