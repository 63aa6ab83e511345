"""The analysis of a campaign: compare (each first repeat with its seed's reference), aggregate, test
(every run of an arm) and judge once, and write results.json; costly pieces are cached under their
inputs' hashes (``compare.cache``), the whole under the digest of what it read (``inputs_digest``)."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.analysis.dose_response import measured_readings, unmeasured_rules
from harness.analysis.dose_response import read_campaign as read_dose_response
from harness.analysis.floor import Progress, codec_floor_row, floor_summary, pixel_source
from harness.analysis.insitu_cost import measured_in_situ, run_spec, schedule_rows
from harness.analysis.model import RESULTS_SCHEMA, LatentSeries, ReportResults, read_results
from harness.analysis.pr_facts import pr_lines
from harness.analysis.sentences import voice
from harness.analysis.speed import arm_aggregates, auto_note, repeat_notes, speed_families
from harness.analysis.stat_rule import rule_text
from harness.analysis.verdict import InsituReading, attention_verdict, judge
from harness.compare.cache import MetricsCache, run_stats
from harness.compare.hashes import HASHES_JSON, FileHashes
from harness.compare.pairwise import CONVENTIONS, compare_summaries, write_comparison
from harness.compare.significance import TEST_NAME
from harness.compare.summary import RunSummary, summarize_run
from harness.envinfo import summary_lines, with_analysis_commit
from harness.errors import HarnessError, ScenarioError
from harness.records import canonical_hash
from harness.rule import ratio_rule_text
from harness.run_keys import sample_key, sample_label
from harness.scenario.verdict import VerdictRules, accepted_baseline
from harness.store import RUN_JSON as RUN_JSON_NAME
from harness.store import ArmStatus, CampaignDir, CampaignRecord, write_record

RESULTS_JSON = "results.json"
# campaign.json's facts that results.json repeats as they are
RECORD_FIELDS = (
    "campaign_id scenario_name scenario_file scenario_sha256 profile runner executor kind harness_version "
    "created_at scenario env"
).split()
SPEEDUP_CONVENTION = "speed-up=reference time / run time (above 1 = faster), from the speed tests' means"


def env_summary(env: dict[str, Any]) -> list[tuple[str, str]]:
    """The environment as (label, value) rows: the fingerprint's own summary, else flattened."""
    try:
        return [(str(k), str(v)) for k, v in summary_lines(env)] if env else []
    except Exception:  # an older or partial fingerprint: print what is there
        return flatten(env)


def code_summary(runs: list[RunSummary]) -> list[tuple[str, str]]:
    """Where the runs' attention code came from: each plugin and each backend's source digest."""
    rows: list[tuple[str, str]] = []
    plugins = {(p.path, p.sha256): p for run in runs for p in run.plugins}
    for plugin in plugins.values():
        what = f"; registers {', '.join(plugin.registers)}" if plugin.registers else ""
        rows.append((f"plugin {plugin.ref}", f"{plugin.path} (sha256 {plugin.sha256[:16]}){what}"))
    code = {f"{name} {digest[:16]}" for run in runs for name, digest in run.code.items()}
    if code:
        rows.append(("backend source sha256", ", ".join(sorted(code))))
    return rows


def flatten(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            rows.extend(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(obj, list) and any(isinstance(x, dict | list) for x in obj):
        for i, v in enumerate(obj):
            rows.extend(flatten(v, f"{prefix}[{i}]"))
    else:
        text = ", ".join(map(str, obj)) if isinstance(obj, list) else str(obj)
        rows.append((prefix, text if len(text) <= 300 else text[:297] + "..."))
    return rows


def scenario_rules(scenario: dict[str, Any], source: str) -> VerdictRules:
    """The scenario's ``verdict`` block, else the defaults; one it cannot read refused in one line."""
    block = scenario.get("verdict") or {}
    if not isinstance(block, dict):
        raise HarnessError(f"{source}: scenario.verdict: not a mapping (got {type(block).__name__})")
    block = dict(block)
    try:
        block["accepted_baseline"] = accepted_baseline(scenario)  # either key feeds both readings
    except ScenarioError as err:
        raise HarnessError(f"{source}: scenario.{err}") from None
    try:
        return VerdictRules.model_validate(block)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(["scenario.verdict", *map(str, first["loc"])])
        what = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            what = "unknown key (not a verdict rule of this harness)"
        raise HarnessError(f"{source}: {where}: {what}") from None


def campaign_runs(
    campaign: CampaignDir, rec: CampaignRecord, hashes: FileHashes
) -> tuple[list[RunSummary], list[str]]:
    """Every arm planned (in scenario order), then any other run folder; a line per unreadable run.json."""
    runs: list[RunSummary] = []
    damaged: list[str] = []
    seen: set[str] = set()

    def add(r: RunSummary, st: ArmStatus | None) -> None:
        missing = missing_data(campaign, st, r)
        if missing:
            r.status, r.reason = "missing", missing
        if r.status in ("damaged", "missing"):
            damaged.append(f"{r.key}: {r.reason}")
        runs.append(r)
        seen.add(r.key)

    for st in rec.arms:
        try:
            r = summarize_run(campaign.run(st.key), st, hashes=hashes)
        except OSError as err:  # a file that went away between two looks at it
            r = RunSummary(key=st.key, path=str(campaign.run(st.key).path), arm=st.arm, seed=sample_label(st.seed, st.input),
                           repeat=st.repeat, role=st.role, attn_type=st.attn_type, status="missing",
                           reason=f"unreadable: {err.strerror or err}: {err.filename or ''}")  # fmt: skip
        add(r, st)
    for run in campaign.runs():
        if run.key in seen:
            continue
        try:
            r = summarize_run(run, hashes=hashes)
        except (HarnessError, OSError) as err:
            damaged.append(f"{run.key}: run.json unreadable: {err}")
            continue
        add(r, None)
    return runs, damaged


def missing_data(campaign: CampaignDir, st: ArmStatus | None, r: RunSummary) -> str | None:
    """What a run listed or ended ``ok`` lacks to be reported (its folder, run.json, output.mp4), or None."""
    run = campaign.run(r.key)
    listed_ok = st is not None and st.status.value == "ok"
    if listed_ok and not run.path.is_dir():
        return f"run folder {run.path} is missing (campaign.json lists the run as ok)"
    if listed_ok and not run.exists():
        return f"{run.run_json} is missing (campaign.json lists the run as ok)"
    if r.ok and r.output is None:
        return f"{run.output} is missing or empty (run.json says the run ended ok)"
    return None


def problem(res: ReportResults, line: str) -> None:
    """A problem met on the way: one of the report's errors (exit 3) and a note."""
    res.errors.append(line)
    res.notes.append(line)


def guarded(res: ReportResults, what: str, step: Callable[[], None]) -> None:
    """One stage of the analysis; a file that vanished or cannot be read becomes an error, not a traceback."""
    try:
        step()
    except (HarnessError, OSError) as err:
        problem(res, f"{what}: {err}")


def new_results(campaign: CampaignDir, rec: CampaignRecord, runs: list[RunSummary], rules: VerdictRules,
                problems: list[str]) -> ReportResults:  # fmt: skip
    """The campaign's facts and conventions, before anything is compared; ``problems``: damaged files."""
    from harness.collect.audio import CONVENTION as AUDIO_LAG_CONVENTION  # numpy: only when analysing

    env = with_analysis_commit(rec.env)  # the run recorded no commit: the analysing harness's, named so
    res = ReportResults(
        **{**{k: getattr(rec, k) for k in RECORD_FIELDS}, "env": env},
        campaign_path=str(campaign.path),
        env_summary=env_summary(env if rec.env else {}) + code_summary(runs),
        conventions=dict(CONVENTIONS),
        rules=rules,
        runs=runs,
    )
    res.conventions["audio_lag"] = AUDIO_LAG_CONVENTION
    res.conventions["stats_tolerance"] = rule_text(rules)
    half = rules.chaotic_band_db / 2
    res.conventions["verdict"] = (
        "identical (bitwise equal output) is decided first, per seed; the floor runs are checked against each "
        "other first (identical or outlying runs left out, named); per seed against the floor of that seed: error "
        "energy = video MSE and 1 - SSIM (pixel regime: the seed's "
        f"floor PSNR >= {rules.chaotic_below_db + half:g} dB; chaotic below {rules.chaotic_below_db - half:g} dB, "
        "transitional between), audio error energy 10^(-SNR/10) (the floor's waveform correlation >= "
        f"{rules.audio_coherent_min_corr:g}) or the mel spectral error (below); ratio to the mean of the seed's "
        f"floor runs, geometric mean over seeds, {100 * (1 - rules.alpha):.10g}% interval from the floor runs' "
        f"spread and the seeds'; {ratio_rule_text(rules.tolerance)}; every regime: the in-situ reading (a second "
        "reading), broken frames and the "
        "coarse layout; chaotic video: early-step latents (accepted baseline, else an absolute PSNR) and the "
        "statistics"
    )
    res.conventions["speed_significance"] = (
        f"{TEST_NAME} over runs (repeats x seeds; paired by seed and repeat where both ran every round, else "
        f"blocked by seed), Holm at alpha {rules.alpha:g} within each family (the candidates; the floors, "
        "schedules and shadowed copies apart); a speed word needs the whole "
        f"interval beyond the minimum effect {100 * rules.min_effect:g}%; 2 runs a side at least"
    )
    for line in problems:  # listed, never blocking the other arms
        problem(res, line)
    res.seeds = sorted({r.seed for r in runs if r.seed is not None}, key=sample_key)
    res.multi_seed = len(res.seeds) > 1
    res.repeats = max((r.repeat for r in runs), default=1)
    role_of = {r.arm: r.role for r in runs}  # in the order the arms first appear
    refs = [a for a, role in role_of.items() if role == "reference"]
    res.noise_floor_arms = [a for a, role in role_of.items() if role == "noise_floor"]
    if not refs:
        res.notes.append("no arm has role reference: nothing is compared; speed and statistics only")
    else:
        res.reference_arm = refs[0]
        if len(refs) > 1:
            res.notes.append(f"several reference arms ({', '.join(refs)}); {refs[0]} is used")
    return res


def compare_all(res: ReportResults, campaign: CampaignDir, hashes: FileHashes, say: Progress) -> None:
    """Each first repeat against its seed's reference; then each run's statistics."""
    primary = res.primary_runs
    ref_by_seed = {r.seed: r for r in primary if r.arm == res.reference_arm}
    todo = [r for r in primary if res.reference_arm and r.arm != res.reference_arm]
    for i, run in enumerate(todo, 1):
        ref = ref_by_seed.get(run.seed)
        if ref is None:
            res.notes.append(f"{run.key}: no reference run for seed {run.seed}")
            continue
        say(f"compare {run.key} against {ref.key} ({i}/{len(todo)})")
        try:
            cmp = compare_summaries(ref, run, metrics_dir=campaign.metrics_dir, hashes=hashes)
        except OSError as err:  # a file removed while it was read
            problem(
                res, f"{run.key} against {ref.key}: not compared: {err.strerror or err}: {err.filename or ''}"
            )
            continue
        write_comparison(cmp, campaign.metrics_dir)
        res.comparisons.append(cmp)
        res.errors.extend(e for e in cmp.errors if e not in res.errors)

    stats_of = {s.key: s.stats for c in res.comparisons for s in (c.a, c.b) if s.stats is not None}
    for r in primary:
        r.stats = stats_of.get(r.key)
        if r.stats is None and r.ok and r.output is not None:
            say(f"statistics of {r.key}")
            try:
                r.stats = run_stats(r, campaign.metrics_dir)
            except HarnessError as err:
                r.notes.append(f"no statistics: {err}")
                res.notes.append(f"{r.key}: no statistics: {err}")
                if str(err) not in res.errors:
                    res.errors.append(str(err))


def measures_in_situ(res: ReportResults, campaign: CampaignDir) -> bool:
    """Whether a run shadowed its calls or followed a schedule (the in-situ readers import torch)."""
    specs = (run_spec(campaign, r.key) for r in res.primary_runs if measured_in_situ(r, campaign))
    return any(s is not None and (s.shadows or s.insitu or s.schedule is not None) for s in specs)


def holm_families(res: ReportResults, campaign: CampaignDir) -> dict[str, str]:
    """arm -> the Holm family of its speed tests: the schedules and the reference's shadowed copies apart."""
    ref = next((r for r in res.runs if r.arm == res.reference_arm), None)
    schedules, copies = set(), set()
    for r in res.primary_runs:
        spec = run_spec(campaign, r.key)
        if spec is None:
            continue
        on_ref = ref is not None and r.attn_type == ref.attn_type and not r.perturbation
        if spec.schedule is not None:
            schedules.add(r.arm)
        elif (spec.shadows or spec.insitu) and on_ref:
            copies.add(r.arm)
    return speed_families({r.arm: r.role for r in res.runs}, schedules=schedules, shadowed_copies=copies)


def aggregate_all(res: ReportResults, families: dict[str, str] | None = None) -> None:
    """Per-arm aggregates (speed tests in ``families``), latent series, the floor band, exact attention."""
    runs = res.runs
    res.arms = arm_aggregates(runs, res.comparisons, res.reference_arm, res.rules, families)
    res.repeat_notes = repeat_notes(runs)
    if res.scenario.get("repeats") == "auto":
        auto = res.scenario.get("repeats_auto") or {}
        res.repeat_notes.append(
            auto_note({a.arm: a.speed for a in res.arms}, {a.arm: a.role for a in res.arms}, res.repeats,
                      float(auto.get("target", 0.02)), int(auto.get("max", 10)))
        )  # fmt: skip
    res.latents = [  # judged again (judge_again): the series are made anew, never appended twice
        LatentSeries(key=c.b.key, arm=c.b.arm, seed=c.b.seed, role=c.b.role, points=c.latents)
        for c in res.comparisons
        if c.latents
    ]
    floors = [c for c in res.comparisons if c.b.role == "noise_floor" and c.measured]
    res.floor = floor_summary(floors, res.rules)
    base_arm = res.rules.accepted_baseline
    if base_arm and base_arm not in {r.arm for r in runs}:
        res.notes.append(
            f"accepted_baseline: no arm named {base_arm!r} in this campaign; no baseline reading"
        )
    exact = [r for r in runs if r.role in ("reference", "noise_floor")]
    _, text = attention_verdict(exact)
    res.exact_attention = f"exact runs ({', '.join(r.key for r in exact) or 'none'}): {text}"
    if not res.noise_floor_arms and res.reference_arm:
        res.notes.append("no noise_floor arm: candidates cannot be judged against a noise floor")


def judge_candidates(res: ReportResults, insitu: dict[str, InsituReading] | None = None) -> None:
    """``res.verdicts``: one per candidate, against its seeds' floors, the baseline and its in-situ reading."""
    floors = [c for c in res.comparisons if c.b.role == "noise_floor" and c.measured]
    base_arm = res.rules.accepted_baseline
    base = [c for c in res.comparisons if c.b.arm == base_arm]
    res.verdicts = []
    for a in res.arms:
        if a.role != "candidate":
            continue
        cmps = [c for c in res.comparisons if c.b.arm == a.arm]
        arm_runs = [r for r in res.runs if r.arm == a.arm]
        res.verdicts.append(
            judge(a.arm, cmps, floors, runs=arm_runs, rules=res.rules,
                  baseline=base if a.arm != base_arm else None, insitu=(insitu or {}).get(a.arm))
        )  # fmt: skip


def judge_campaign(
    res: ReportResults, campaign: CampaignDir, say: Progress | None = None, *, insitu: bool
) -> None:
    """Every judgement, once, in order: aggregates, in situ (the verdicts read it), verdicts, schedules."""
    aggregate_all(res, families=holm_families(res, campaign))
    if insitu:
        from harness.analysis.insitu import add_insitu  # torch: only for campaigns that need it

        add_insitu(res, campaign, say)
    found = res.insitu.readings if res.insitu is not None else []
    fields = set(InsituReading.model_fields)  # the in-situ readings by the arm each reads
    judge_candidates(res, {r.candidate: InsituReading(**r.model_dump(include=fields)) for r in found})
    measured = measured_readings(res.verdicts, res.latents, res.rules)  # what curves and predictions read
    res.dose_response, why = read_dose_response(
        res, found, campaign.path, measured, res.scenario.get("dose_response_from")
    )
    res.notes += [why] if why else []
    if insitu:
        res.schedules = schedule_rows(res, campaign, res.insitu)
    if res.dose_response is None and res.insitu is not None and res.insitu.readings:
        res.insitu.notes.append(unmeasured_rules(res.insitu.tolerance))
    if res.dose_response is not None:
        from harness.analysis.dose_schedule import kind_predictions, schedule_predictions

        res.dose_response.predictions += kind_predictions(res.dose_response, found, measured)
        res.dose_response.schedules = schedule_predictions(res.dose_response, found, res.schedules, measured)
    # A shadowed arm whose own attention is exact measures in situ on the exact trajectory: no candidate.
    runs = res.insitu.runs if res.insitu is not None else []
    copies = {i.arm for i in runs if i.primary_exact and i.arm != res.reference_arm}
    for v in res.verdicts:
        if v.arm in copies:
            v.role = "insitu"


def analyze_campaign(
    campaign: CampaignDir, *, progress: Progress | None = None, rules: VerdictRules | None = None
) -> ReportResults:
    """The campaign's results, also written as its results.json (an unchanged campaign's is reused)."""
    say = progress or (lambda _msg: None)
    if not campaign.exists():
        raise HarnessError(f"{campaign.path}: not a campaign directory (no campaign.json)")
    hashes = FileHashes(campaign.metrics_dir / HASHES_JSON)
    digest = inputs_digest(campaign, hashes, rules)
    results_json = campaign.path / RESULTS_JSON
    done = reusable(results_json, digest)
    if done is not None:
        say("analysis unchanged: results.json reused")
        hashes.save()
        return done
    rec, damaged_campaign = campaign.record_or_rebuilt()
    runs, damaged_runs = campaign_runs(campaign, rec, hashes)
    problems = [p for p in (damaged_campaign, *damaged_runs) if p]
    rules = rules or scenario_rules(rec.scenario, str(campaign.campaign_json))
    res = new_results(campaign, rec, runs, rules, problems)
    cache = MetricsCache(campaign.metrics_dir)
    compare_all(res, campaign, hashes, say)
    judge_campaign(res, campaign, say, insitu=measures_in_situ(res, campaign))
    measured = [c for c in res.comparisons if c.measured]
    if measured:
        res.pixel_source = pixel_source(measured, res.primary_runs, cache)
        res.conventions["pixel_source"] = res.pixel_source
    guarded(res, "codec floor", lambda: codec_floor_row(res, campaign, cache, say))
    from harness.analysis.assets import media_assets  # numpy and OpenCV: not loaded when results are reused

    guarded(res, "frames and audio views", lambda: media_assets(res, campaign.path, cache, say))
    for r in res.runs:  # records and outputs removed while the report was built
        for path in (Path(r.path) / RUN_JSON_NAME, *([Path(r.output)] if r.output else [])):
            if r.ok and not path.is_file():
                problem(
                    res, f"{r.key}: {path} vanished while the report was built (its figures are incomplete)"
                )
    res.conventions["speedup"] = SPEEDUP_CONVENTION
    voice(res)
    res.pr = pr_lines(res)
    res.inputs_digest = digest
    hashes.save()
    try:
        write_record(results_json, res)
    except OSError as err:
        res.notes.append(f"{results_json}: not written ({err.strerror or err})")
    return res


def judge_again(campaign: CampaignDir) -> ReportResults:
    """The campaign's results.json judged again from what it holds, without the media; written back."""
    results_json = campaign.path / RESULTS_JSON
    res = read_results(results_json)
    judge_campaign(res, campaign, insitu=True)
    voice(res)
    res.pr = pr_lines(res)
    write_record(results_json, res)
    return res


# 2: a shadowed copy of the exact trajectory is no candidate; 3: the headline ratio is the decisive one
ANALYSIS_VERSION = 3
PACKAGE = Path(__file__).resolve().parents[1]
RENDERERS = ("report", "cli")  # their code changes no result


@functools.cache
def code_digest() -> str:
    """sha256 of the harness source that computes results (sorted paths and contents)."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in RENDERERS or rel.parts[0].startswith(RENDERERS):
            continue
        h.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def campaign_json_digest(path: Path) -> str:
    """campaign.json's content but its ``updated_at`` (all a ``harness run`` that reruns nothing changes)."""
    data = path.read_bytes()
    try:
        record = json.loads(data)
        record.pop("updated_at", None)
        return canonical_hash(record)
    except (ValueError, AttributeError):  # damaged: its bytes
        return hashlib.sha256(data).hexdigest()


def inputs_digest(campaign: CampaignDir, hashes: FileHashes, rules: VerdictRules | None) -> str:
    files = {"campaign.json": campaign_json_digest(campaign.campaign_json)}
    if campaign.runs_dir.is_dir():
        for path in sorted(campaign.runs_dir.rglob("*")):
            if path.is_file():
                rel = path.relative_to(campaign.path).as_posix()
                try:
                    files[rel] = hashes.sha256(path)
                except OSError:  # removed meanwhile (the analysis names what is missing)
                    files[rel] = "unreadable"
    return canonical_hash(
        {
            "analysis": ANALYSIS_VERSION,
            "code": code_digest(),
            "campaign": str(campaign.path.resolve()),
            "rules": rules.model_dump() if rules is not None else None,
            "files": files,
        }
    )


def reusable(results_json: Path, digest: str) -> ReportResults | None:
    """The results.json at ``results_json`` when it is this digest's analysis with every asset present."""
    try:
        res = ReportResults.model_validate_json(results_json.read_bytes())
    except (OSError, ValueError):
        return None
    if res.schema_version != RESULTS_SCHEMA or res.inputs_digest != digest:
        return None
    root = results_json.parent
    if not all((root / rel).is_file() for rel in res.assets.values()):
        return None
    return res
