"""Scenarios for the process-boundary tests (locks, signals, faults, exit codes), imported by them.

What those tests check (a lock's holder, a signal's reach, a record's fate, an exit code) does not
depend on how much the pipeline computes, so they run the least that shows it.
"""

from __future__ import annotations

from pathlib import Path

from cli_testutil import tiny_scenario

# The tiny preset cut to the smallest media it accepts (4 frames of 32x32, one DiT block): an arm
# is then mostly its interpreter's start-up, yet writes a real mp4 and every record. The profile
# keeps its 3 DiT steps: a kill still has steps to land between.
SMALL_PIPELINE = (
    "{frames: 4, height: 32, width: 32, latent_t: 2, latent_h: 2, latent_w: 2, "
    "text_tokens: 4, audio_tokens: 4, depth: 1}"
)


def small_scenario(folder: Path, extra_arms: str = "", name: str = "tiny") -> Path:
    """cli_testutil's tiny two-arm scenario (same names, arms and profile) on SMALL_PIPELINE."""
    path = tiny_scenario(folder, extra_arms, name)
    text = path.read_text()
    small = text.replace("save_latents: false}", f"save_latents: false, params: {SMALL_PIPELINE}}}")
    assert small != text, "cli_testutil.TINY no longer has the builtin block this edits"
    path.write_text(small)
    return path


# A scenario that loads without torch: the builtin runner's check of backend names imports the
# attention registry, and with it torch (~2.5 s of CPU per command); the LightX2V runner's loading
# reads paths only. For commands refused on a flag, --out or the file's own text, before any arm.
QUICK = """\
name: tiny
runner: lightx2v
seed: 3
lightx2v: {root: /nowhere, model_path: /nowhere, model_cls: minimax_h3, task: ref2av, config_json: c.json,
           prompt: a dancer}
profiles: {3step: {infer_steps: 4}}
arms:
  - {name: torch_sdpa, attn_type: torch_sdpa, role: reference}
  - {name: floor, attn_type: torch_sdpa, kv_reversed: true, role: noise_floor}
"""


def quick_scenario(folder: Path) -> Path:
    """A two-arm scenario, seed on line 3, that a command loads without importing torch."""
    path = Path(folder) / "tiny.yaml"
    path.write_text(QUICK)
    return path
