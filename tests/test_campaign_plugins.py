"""A kernel of one's own, end to end on the builtin runner: the README's plugin file and scenario, run,
counted and judged; its path and digest recorded; editing it re-runs exactly its arm."""

from __future__ import annotations

import json
from pathlib import Path
from unittest.mock import ANY

import pytest

from harness.attention.insitu.recorder import read_insitu
from harness.campaign import execute, lock_campaign, plan_campaign
from harness.plan import plan_actions
from harness.records import RunStatus

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_file(first_line: str) -> str:
    """The fenced block of the README's "Evaluate your own kernel" that starts with ``first_line``."""
    text = README.read_text()
    section = text[text.index("## Evaluate your own kernel") :]
    start = section.index(f"{first_line}\n")
    return section[start : section.index("```", start)]


KERNEL = readme_file("# kernel.py")
# The README's scenario, and a shadowed copy of the reference: a plugin backend is a shadow by name too.
SCENARIO = (
    readme_file("# my_kernel.yaml")
    + "  - {name: sdpa_insitu, attn_type: torch_sdpa, shadows: [fp16_sdpa_mine]}\n"
)


def run_json(campaign: Path, key: str) -> dict:
    return json.loads((campaign / "runs" / key / "run.json").read_text())


@pytest.mark.slow
def test_a_plugin_kernel_runs_is_counted_judged_recorded_and_rerun_when_edited(tmp_path):
    kernel = tmp_path / "kernel.py"
    kernel.write_text(KERNEL)
    scenario = tmp_path / "my_kernel.yaml"
    scenario.write_text(SCENARIO)
    plan = plan_campaign(scenario, out_root=tmp_path / "out")
    outcome = execute(plan, lock=lock_campaign(plan.campaign))
    camp = outcome.campaign.path
    runs = {r.spec.arm: r for r in outcome.records}
    assert all(r.status == RunStatus.ok for r in runs.values()), {a: r.reason for a, r in runs.items()}
    assert runs["mine"].valid is True, runs["mine"].invalid_reasons
    calls = {
        arm: json.loads((camp / "runs" / arm / "attn_calls.json").read_text())["ranks"]["0"]["calls"]
        for arm in ("torch_sdpa", "mine")
    }
    assert (
        calls["mine"] == {"fp16_sdpa_mine": calls["torch_sdpa"]["torch_sdpa"]}
        and calls["mine"]["fp16_sdpa_mine"] > 0
    )

    spec = run_json(camp, "mine")["spec"]
    import hashlib

    digest = hashlib.sha256(kernel.read_bytes()).hexdigest()
    assert [(p["ref"], p["path"], p["sha256"]) for p in spec["plugins"]] == [
        ("kernel.py", str(kernel), digest)
    ]
    assert spec["code"] == {"fp16_sdpa_mine": digest}  # the backend's source is the plugin file
    results = json.loads((camp / "results.json").read_text())
    (verdict,) = [v for v in results["verdicts"] if v["arm"] == "mine"]
    # As the README says: one seed's three floor runs give an interval, wholly over the tolerance.
    tolerance = results["rules"]["tolerance"]
    assert verdict["word"] == "outside" and verdict["ratio_ci"][0] > tolerance
    audio = next(e for e in verdict["energy"] if e["metric"] == "audio_error")
    assert audio["word"] == "outside" and audio["ratio_ci"][0] > tolerance  # no AAC to hide it
    # Scored on the lossless copies by default, not on the H.264/AAC mp4.
    assert (camp / "runs" / "mine" / "output_lossless.mkv").is_file()
    assert results["pixel_source"].startswith("lossless copies")
    env = dict(map(tuple, results["env_summary"]))
    assert (
        env["plugin kernel.py"]
        == f"{kernel} (sha256 {digest[:16]}); registers attention backend fp16_sdpa_mine"
    )
    assert f"fp16_sdpa_mine {digest[:16]}" in env["backend source sha256"]
    assert f"| plugin kernel.py | {kernel} (sha256 {digest[:16]})" in (camp / "report.md").read_text()

    insitu = read_insitu(camp / "runs" / "sdpa_insitu" / "insitu")
    assert insitu.calls and all(0 < c.errors["fp16_sdpa_mine"].rel_l1 < 0.01 for c in insitu.calls)
    assert run_json(camp, "sdpa_insitu")["spec"]["code"] == {"fp16_sdpa_mine": digest, "torch_sdpa": ANY}

    # Unchanged: everything resumes. Edited: exactly the arm that calls it runs again.
    again = plan_campaign(scenario, out_root=tmp_path / "out")
    floors = ("torch_sdpa_kv_reversed", "torch_sdpa_kv_chunks", "torch_sdpa_math")
    assert {p.spec.arm: p.action for p in plan_actions(again.campaign, again.specs)} == {
        arm: "skip-ok" for arm in ("torch_sdpa", *floors, "mine", "sdpa_insitu")
    }
    kernel.write_text(KERNEL + "# tuned\n")
    edited = plan_campaign(scenario, out_root=tmp_path / "out")
    actions = {p.spec.arm: (p.action, p.why) for p in plan_actions(edited.campaign, edited.specs)}
    assert actions == {
        **{arm: ("skip-ok", "already ok, same spec") for arm in ("torch_sdpa", *floors)},
        "mine": ("rerun", "spec changed"),
        "sdpa_insitu": ("rerun", "spec changed"),  # it calls the kernel too, as a shadow
    }
    before = {arm: run_json(camp, arm)["started_at"] for arm in ("torch_sdpa", "mine")}
    # Edited once more after planning: the arm's process refuses what the spec does not describe.
    kernel.write_text(KERNEL + "# tuned twice\n")
    stale = execute(edited, lock=lock_campaign(edited.campaign), report=False)
    (rec,) = [r for r in stale.records if r.spec.arm == "mine"]
    assert rec.status == RunStatus.failed and "changed since the campaign was planned" in (
        rec.reason or ""
    ) + (rec.log_tail or "")
    final = plan_campaign(scenario, out_root=tmp_path / "out")
    done = execute(final, lock=lock_campaign(final.campaign), report=False)
    assert all(r.status == RunStatus.ok for r in done.records) and done.failed == []
    assert run_json(camp, "torch_sdpa")["started_at"] == before["torch_sdpa"]
    assert run_json(camp, "mine")["started_at"] != before["mine"]
    assert (
        run_json(camp, "mine")["spec"]["code"]["fp16_sdpa_mine"]
        == hashlib.sha256(kernel.read_bytes()).hexdigest()
    )


pytestmark = pytest.mark.usefixtures("no_plugin_left")


@pytest.mark.slow
def test_a_plugin_kernel_whose_output_breaks_the_contract_fails_its_arm_in_one_line(tmp_path):
    """[B, N, H, D] handed back for [B, H, N, D]: not a run that reads ok and valid, but a failed arm
    whose reason names the contract and the first bad call."""
    (tmp_path / "kernel.py").write_text(
        KERNEL.replace("return out.to(q.dtype)", "return out.to(q.dtype).transpose(1, 2)")
    )
    scenario = tmp_path / "my_kernel.yaml"
    scenario.write_text(readme_file("# my_kernel.yaml"))
    plan = plan_campaign(scenario, out_root=tmp_path / "out", arms=["mine"])
    (record,) = execute(plan, lock=lock_campaign(plan.campaign)).records
    assert record.status == RunStatus.failed
    assert record.reason.startswith("exit code 1: error: attention backend fp16_sdpa_mine: call 1 (q [")
    assert "its output has shape [" in record.reason and "\n" not in record.reason


MATHS = """\
# kernel_math.py: the kernel's maths, imported by kernel.py
import torch


def fp16_sdpa(q, k, v, scale=None):
    return torch.nn.functional.scaled_dot_product_attention(q.half(), k.half(), v.half(), scale=scale)
"""
SDPA_LINE = "torch.nn.functional.scaled_dot_product_attention(q.half(), k.half(), v.half(), scale=scale)"


@pytest.mark.slow
def test_a_kernel_whose_maths_lives_in_an_imported_module_reads_outside_pastes_and_fails_ci(tmp_path):
    """The README's kernel with its maths moved to a module kernel.py imports, its scenario as written
    (builtin defaults, one seed, three exact floor runs), run by the commands the README shows: a
    headline interval wholly over the tolerance, its audio outside, a pr.md that names the device,
    torch, commit, the plugin's sha256, the design and a word per modality; `--fail-on outside` exits
    1; an edit of the imported module re-runs exactly the arm that calls it."""
    import hashlib
    import re

    from cli_testutil import harness

    assert SDPA_LINE in KERNEL
    kernel = "from kernel_math import fp16_sdpa\n" + KERNEL.replace(SDPA_LINE, "fp16_sdpa(q, k, v, scale)")
    (tmp_path / "kernel.py").write_text(kernel)
    (tmp_path / "kernel_math.py").write_text(MATHS)
    (tmp_path / "my_kernel.yaml").write_text(readme_file("# my_kernel.yaml"))
    assert harness("scenarios", "validate", "my_kernel.yaml", cwd=tmp_path).returncode == 0
    ran = harness("run", "my_kernel.yaml", "--out", "reports", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    camp = tmp_path / "reports" / "my_kernel" / "default"
    results = json.loads((camp / "results.json").read_text())
    tolerance = results["rules"]["tolerance"]

    # The headline quotes the deciding reading's interval, and that interval is wholly over the bound.
    lines = (camp / "report.md").read_text().splitlines()
    line = next(ln for ln in lines if ln.startswith("- mine: "))  # the summary's verdict line
    low = re.match(r"- mine: outside: [\d,.]+x the floor's \(([\d,.]+) to [\d,.]+; ", line)
    assert low and float(low.group(1).replace(",", "")) > tolerance, line
    (verdict,) = [v for v in results["verdicts"] if v["arm"] == "mine"]
    audio = next(e for e in verdict["energy"] if e["metric"] == "audio_error")
    assert audio["word"] == "outside" and audio["ratio_ci"][0] > tolerance

    pr = (camp / "pr.md").read_text()
    digest = hashlib.sha256(kernel.encode()).hexdigest()
    commit = results["env"]["harness_git"]["sha"]
    for expected in (
        f"torch {results['env']['torch']['version']}",
        f"commit {commit[:12]}",
        f"kernel.py sha256 {digest[:12]}",
        "design: 1 seed(s) (42) x 3 floor run(s) x 1 repeat(s), scored on lossless",
        "  - audio: outside: ",
        "  - video: ",
    ):
        assert expected in pr, (expected, pr[:1500])
    assert "device: CPU" in pr and "report.md" not in pr.split("| attn")[0]

    gate = harness("report", str(camp), "--fail-on", "outside", cwd=tmp_path)
    assert gate.returncode == 1 and "fail-on outside: mine: outside: " in gate.stderr, gate.stderr

    (tmp_path / "kernel_math.py").write_text(MATHS + "# tuned\n")
    dry = harness("run", "my_kernel.yaml", "--out", "reports", "--dry-run", cwd=tmp_path)
    actions = dict(re.findall(r"^# (\S+): (\S+)", dry.stdout, re.M))
    assert actions["mine"] == "rerun" and {a for a, act in actions.items() if act != "skip-ok"} == {"mine"}, (
        dry.stdout
    )
