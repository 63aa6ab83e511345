"""harness ingest: real mp4s and LightX2V-format logs (one rank, two ranks, one interleaved
torchrun log) become run folders that harness report reads; bad input is one line, exit 2,
and the campaign is left as it was."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent / "report"))
from campaign_factory import FPS, RATE, base_content, perturb  # noqa: E402
from cli_testutil import harness  # noqa: E402

from harness.collect.lightx2v_log import parse_lightx2v_logs  # noqa: E402
from harness.ingest import IngestArm, ingest  # noqa: E402
from harness.media import write_av  # noqa: E402
from harness.records import Role, TimingRecord  # noqa: E402
from harness.store import CampaignDir, sha256_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "lightx2v_logs"


@pytest.fixture(scope="module")
def mp4s(tmp_path_factory) -> dict[str, Path]:
    """Real H.264 + AAC files: a reference, a noise floor, a candidate, and a longer one."""
    d = tmp_path_factory.mktemp("mp4s")
    frames, audio = base_content(42)
    out = {}
    for name, level, salt in (("sdpa", 0.0, 0), ("floor", 1.0, 1), ("sage", 12.0, 2)):
        f, a = perturb(frames, audio, level, salt)
        out[name] = d / f"{name}.mp4"
        write_av(out[name], f, a, fps=FPS, sample_rate=RATE, preset="ultrafast")
    f, a = base_content(42, frames=12)
    out["long"] = d / "long.mp4"
    write_av(out["long"], f, a, fps=FPS, sample_rate=RATE, preset="ultrafast")
    f, a = perturb(frames, audio, 12.0, 2)  # the candidate's video, its audio damaged three ways
    for name, track in (("silent", None), ("mono", a[:1]), ("short", a[:, : -RATE // 5])):
        out[name] = d / f"{name}.mp4"
        write_av(out[name], f, track, fps=FPS, sample_rate=RATE, preset="ultrafast")
    return out


def _snapshot(root: Path) -> dict[Path, bytes]:
    """Every file's bytes, but the writer lock's file once empty (each writer of a campaign
    leaves it, its holder erased on release)."""
    files = [p for p in root.rglob("*") if p.is_file()] if root.exists() else []
    return {p: p.read_bytes() for p in files if not (p.name == "campaign.lock" and p.stat().st_size == 0)}


def test_one_rank_log_and_config(tmp_path, mp4s):
    camp = tmp_path / "h3" / "pr"
    log, config = (
        LOGS / "h3_h200" / "rank0.log",
        LOGS / "h3_h200" / "config.json",
    )  # an H200 run of minimax_h3_tiny
    res = ingest(camp, [IngestArm(name="torch_sdpa", mp4=mp4s["sdpa"], logs=[log], config=config,
                                  role=Role.reference, seed=42)])  # fmt: skip
    run = CampaignDir(camp).run("torch_sdpa")
    assert res.runs == [str(run.path)]
    raw = json.loads(run.run_json.read_text())
    src = raw["ingested"]
    assert raw["spec"]["runner"] == "ingested" and raw["status"] == "ok"
    assert src["mp4"]["sha256"] == sha256_file(mp4s["sdpa"]) == raw["outputs"]["output.mp4"]
    assert src["mp4"]["path"] == str(mp4s["sdpa"].resolve())
    assert src["logs"][0]["sha256"] == sha256_file(log) and src["logs"][0]["copied_to"] == "logs/rank0.log"
    assert src["config"]["sha256"] == sha256_file(config)
    assert src["attn_type_from"] == "config" and raw["spec"]["attn_type"] == "torch_sdpa"
    assert (run.path / "logs" / "rank0.log").read_bytes() == log.read_bytes()
    assert sha256_file(run.output) == sha256_file(mp4s["sdpa"])
    timing = TimingRecord.model_validate_json((run.path / "timing.json").read_bytes())
    assert timing == parse_lightx2v_logs({"0:rank0.log": log.read_text()})
    assert timing.dit_steps == 4 and timing.ranks == ["0"]
    assert timing.s_per_step == pytest.approx((0.083631 + 0.082681 + 0.0818) / 3)
    rec = CampaignDir(camp).record()
    assert (
        rec.scenario_name == "h3" and rec.campaign_id == "pr" and [a.key for a in rec.arms] == ["torch_sdpa"]
    )


def test_two_rank_logs_and_one_interleaved_log_give_the_same_timing(tmp_path, mp4s):
    camp = tmp_path / "h3" / "tp2"
    ingest(camp, [
        IngestArm(name="a", mp4=mp4s["sdpa"], logs=[LOGS / "h3_tp2_rank0.log", LOGS / "h3_tp2_rank1.log"],
                  attn_type="aiter_sage_attn", role=Role.reference),
        IngestArm(name="b", mp4=mp4s["sage"], logs=[LOGS / "h3_tp2_interleaved.log"], attn_type="aiter_sage_attn"),
    ])  # fmt: skip
    c = CampaignDir(camp)
    ta, tb = c.run("a").timing(), c.run("b").timing()
    assert ta.ranks == tb.ranks == ["0", "1"]
    assert ta.step_seconds() == tb.step_seconds() and ta.pipeline_total_s == tb.pipeline_total_s
    assert all(set(s.per_rank) == {"0", "1"} for s in ta.steps)


def test_manifest_then_report_gives_the_pull_request_tables(tmp_path, mp4s):
    man = tmp_path / "manifest.yaml"
    man.write_text(yaml.safe_dump({
        "campaign": "reports/h3/pr",
        "gpu": "2 x H200",
        "arms": [
            {"name": "torch_sdpa", "role": "reference", "mp4": str(mp4s["sdpa"]), "seed": 42,
             "logs": [str(LOGS / "h3_tp2_rank0.log"), str(LOGS / "h3_tp2_rank1.log")], "attn_type": "torch_sdpa"},
            {"name": "torch_sdpa_kv_reversed", "role": "noise_floor", "mp4": str(mp4s["floor"]), "seed": 42,
             "logs": [str(LOGS / "h3_tp2_interleaved.log")], "attn_type": "torch_sdpa"},
            {"name": "aiter_sage_attn", "mp4": str(mp4s["sage"]), "seed": 42,
             "logs": [str(LOGS / "h3_tp2_interleaved.log")], "attn_type": "aiter_sage_attn"},
        ],
    }))  # fmt: skip
    res = harness("ingest", man, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    camp = tmp_path / "reports" / "h3" / "pr"  # relative to the manifest
    assert f"campaign: {camp}" in res.stdout
    assert "3 DiT steps on 2 rank(s)" in res.stdout
    rep = harness("report", camp, cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    md, pr = (camp / "report.md").read_text(), (camp / "pr.md").read_text()
    assert "| aiter_sage_attn | candidate | 1 | 3 | 20.265 |" in md  # every-run speed row, from the logs
    assert "| aiter_sage_attn | " in pr and "(noise floor)" in pr
    assert "aiter_sage_attn: attention calls not recorded" in pr
    results = json.loads((camp / "results.json").read_text())
    assert json.loads((camp / "runs" / "aiter_sage_attn" / "run.json").read_text())["gpu"] == "2 x H200"
    v = {x["arm"]: x for x in results["verdicts"]}
    assert v["aiter_sage_attn"]["word"] == "outside"  # 12 grey levels of noise vs 1


def _scaled_log(factor: float) -> str:
    """The two-rank fixture's rank-0 log with every DiT step time multiplied by ``factor``."""
    import re

    def scale(m: re.Match) -> str:
        return f"{m.group(1)}{float(m.group(2)) * factor:.6f} seconds"

    return re.sub(
        r"(Run Dit every step cost )([0-9.]+) seconds", scale, (LOGS / "h3_tp2_rank0.log").read_text()
    )


def test_two_seeds_with_repeats_get_per_seed_verdicts_and_speed_intervals(tmp_path):
    """Runs made elsewhere: a reference and a candidate over two seeds, two repeats each, and a floor
    per seed; the report judges each seed against its own floor and tests speed over the runs."""
    rng = __import__("numpy").random.default_rng(5)
    arms = []
    for seed in (42, 43):
        frames, audio = base_content(seed)
        for name, level, salt, role in (("torch_sdpa", 0.0, 0, "reference"), ("kv_reversed", 1.0, 1, "noise_floor"),
                                        ("kv_chunks", 1.0, 3, "noise_floor"), ("sage", 12.0, 2, "candidate")):  # fmt: skip
            mp4 = tmp_path / f"{name}_{seed}.mp4"
            write_av(mp4, *perturb(frames, audio, level, salt), fps=FPS, sample_rate=RATE, preset="ultrafast")
            for repeat in (1, 2) if role != "noise_floor" else (1,):
                log = tmp_path / f"{name}_{seed}_{repeat}.log"
                log.write_text(_scaled_log((0.8 if name == "sage" else 1.0) * (1 + rng.normal(0, 0.005))))
                arms.append({"name": name, "role": role, "seed": seed, "mp4": str(mp4), "logs": [str(log)],
                             "attn_type": "torch_sdpa" if role != "candidate" else "sage_attn2"})  # fmt: skip
    man = tmp_path / "manifest.yaml"
    man.write_text(yaml.safe_dump({"campaign": "out/h3/pr", "arms": arms}))
    res = harness("ingest", man, "--report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    camp = tmp_path / "out" / "h3" / "pr"
    keys = sorted(p.name for p in (camp / "runs").iterdir())
    assert "sage@43~r2" in keys and "torch_sdpa@42~r2" in keys and "kv_reversed@43" in keys
    results = json.loads((camp / "results.json").read_text())
    v = next(x for x in results["verdicts"] if x["arm"] == "sage")
    assert [s["seed"] for s in v["per_seed"]] == [42, 43] and all(
        s["word"] == "outside" for s in v["per_seed"]
    )
    assert all(s["floor_runs"] == 2 and s["regime"]["video"] == "pixel" for s in v["per_seed"])
    speed = next(a for a in results["arms"] if a["arm"] == "sage")["speed"]["s_per_step"]
    assert speed["design"] == "paired by seed and repeat" and speed["n_ref"] == speed["n_arm"] == 4
    assert speed["speedup"] == pytest.approx(1.25, rel=0.02) and speed["word"] == "faster"
    assert speed["speedup_ci"][0] > 1.2 and speed["p_adjusted"] >= speed["p"]
    floor = next(a for a in results["arms"] if a["arm"] == "kv_reversed")["speed"]["s_per_step"]
    assert floor["design"] == "blocked by seed"
    assert "speed-up 1.2" in (camp / "report.md").read_text()


def test_the_same_run_twice_is_refused(tmp_path, mp4s):
    arm = dict(name="r", mp4=mp4s["sdpa"], attn_type="torch_sdpa", role=Role.reference, seed=42)
    with pytest.raises(Exception, match="seed 42 repeat 1 is given twice"):
        ingest(tmp_path / "s" / "c", [IngestArm(**arm, repeat=1), IngestArm(**arm, repeat=1)])
    res = ingest(tmp_path / "s" / "c", [IngestArm(**arm), IngestArm(**arm)])  # numbered in order
    assert [p.rsplit("/", 1)[-1] for p in res.runs] == ["r", "r~r2"]


@pytest.mark.parametrize(
    "case, expect",
    [
        ("missing_mp4", "nope.mp4: mp4 not found"),
        ("missing_log", "gone.log: log not found"),
        ("no_steps", "h3_single_missing_pipeline.log"),
        ("seed_vs_config", "seed 7 in the config, but 42 given"),
        ("seed_vs_reference", "seed 43 but the reference ran seed 42"),
        ("longer_video", "12 frames, the reference"),
        ("no_audio", "silent.mp4: no audio track, the reference"),
        ("mono", "mono.mp4: 1 audio channel(s), the reference"),
        ("short_audio", "short.mp4: 0.175 s of audio, the reference"),
        ("no_attn_type", "attention type not given (--attn-type)"),
        ("taken", "already in the campaign (--force replaces it)"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(tmp_path, mp4s, case, expect):
    camp = tmp_path / "h3" / "pr"
    ok = harness("ingest", camp, "--arm", "torch_sdpa", "--role", "reference", "--mp4", mp4s["sdpa"],
                 "--attn-type", "torch_sdpa", "--seed", "42")  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    before = _snapshot(camp)
    no_steps = tmp_path / "h3_single_missing_pipeline.log"
    no_steps.write_text("\n".join(ln for ln in (LOGS / "h3_single_warmup.log").read_text().splitlines()
                                  if "Run Dit every step" not in ln))  # fmt: skip
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"seed": 7, "attn_type": "sage_attn2"}))
    args = {
        "missing_mp4": ["--mp4", tmp_path / "nope.mp4", "--attn-type", "x"],
        "missing_log": ["--mp4", mp4s["sage"], "--attn-type", "x", "--log", tmp_path / "gone.log"],
        "no_steps": ["--mp4", mp4s["sage"], "--attn-type", "x", "--log", no_steps],
        "seed_vs_config": ["--mp4", mp4s["sage"], "--config", config, "--seed", "42"],
        "seed_vs_reference": ["--mp4", mp4s["sage"], "--attn-type", "x", "--seed", "43"],
        "longer_video": ["--mp4", mp4s["long"], "--attn-type", "x"],
        "no_audio": ["--mp4", mp4s["silent"], "--attn-type", "x"],
        "mono": ["--mp4", mp4s["mono"], "--attn-type", "x"],
        "short_audio": ["--mp4", mp4s["short"], "--attn-type", "x"],
        "no_attn_type": ["--mp4", mp4s["sage"]],
        "taken": ["--mp4", mp4s["sage"], "--attn-type", "x"],
    }[case]
    arm = "torch_sdpa" if case == "taken" else "cand"
    res = harness("ingest", camp, "--arm", arm, *args)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], lines
    assert "Traceback" not in res.stderr
    assert _snapshot(camp) == before


def test_a_refusal_names_the_reference_of_the_runs_own_seed(tmp_path, mp4s):
    """With references of seeds 42 and 43, a seed-43 run that does not match is refused against
    the seed-43 reference, whether that reference is ingested with it or already in the campaign."""
    ref = dict(name="torch_sdpa", attn_type="torch_sdpa", role=Role.reference)
    refs = [IngestArm(**ref, mp4=mp4s["sdpa"], seed=42), IngestArm(**ref, mp4=mp4s["floor"], seed=43)]
    bad_43 = IngestArm(name="cand", attn_type="x", mp4=mp4s["short"], seed=43)
    with pytest.raises(Exception, match=f"short.mp4: .* of audio, the reference {mp4s['floor']} has"):
        ingest(tmp_path / "one" / "c", [*refs, bad_43])
    ingest(tmp_path / "two" / "c", refs)
    with pytest.raises(Exception, match=r"short.mp4: .* of audio, the reference .*torch_sdpa@43"):
        ingest(tmp_path / "two" / "c", [bad_43])


def test_manifest_error_names_file_line_and_field(tmp_path, mp4s):
    man = tmp_path / "m.yaml"
    man.write_text(f"campaign: out/c1\narms:\n  - name: a\n    mp4: {mp4s['sdpa']}\n    attn_typ: x\n")
    res = harness("ingest", man)
    assert res.returncode == 2
    assert res.stderr.strip() == f"error: {man}:5: arms[0].attn_typ: Extra inputs are not permitted"
    assert not (tmp_path / "out").exists()


def test_force_replaces_an_arm(tmp_path, mp4s):
    camp = tmp_path / "s" / "c"
    ingest(camp, [IngestArm(name="r", mp4=mp4s["sdpa"], attn_type="torch_sdpa", role=Role.reference)])
    ingest(
        camp,
        [IngestArm(name="r", mp4=mp4s["floor"], attn_type="torch_sdpa", role=Role.reference)],
        force=True,
    )
    c = CampaignDir(camp)
    assert sha256_file(c.run("r").output) == sha256_file(mp4s["floor"])
    assert [a.key for a in c.record().arms] == ["r"]
    assert not [p for p in c.runs_dir.iterdir() if p.name.startswith(".")]  # no temp folder left


def test_names_that_would_leave_the_campaign_and_duplicate_keys(tmp_path, mp4s):
    res = harness(
        "ingest", tmp_path / "s" / "c", "--arm", "../../evil", "--mp4", mp4s["sdpa"], "--attn-type", "x"
    )
    assert res.returncode == 2 and res.stderr.startswith("error: --arm: '../../evil' is not a valid name")
    man = tmp_path / "m.yaml"
    man.write_text(f"campaign: out/c1\narms:\n  - {{name: ../x, mp4: {mp4s['sdpa']}}}\n")
    res = harness("ingest", man)
    assert res.returncode == 2 and res.stderr.startswith(f"error: {man}:3: arms[0].name: String should match")
    man.write_text("campaign: out/c1\ncampaign: out/c2\narms: []\n")
    res = harness("ingest", man)
    assert res.stderr.strip() == f"error: {man}:2: duplicate key 'campaign' (first given on line 1)"
    assert not (tmp_path / "out").exists() and not (tmp_path / "evil").exists()
