"""pr.md: the pull request's compact tables, report.md's figures rounded as the pull request did;
benchmark.json: each arm's timings (mean, sd over its runs) in github-action-benchmark's custom format."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import TypeAdapter

from harness.analysis.model import ArmAggregate, ReportResults, is_emulator, is_shadowed_copy
from harness.compare.significance import SpeedTest
from harness.compare.summary import RunSummary, stat_fields
from harness.metrics.metric import METRICS, Metric, pr_metrics
from harness.number_format import NA, fmt_db, fmt_rounded, fmt_speedup, fmt_time
from harness.records import Record
from harness.report.accuracy import run_label
from harness.report.cells import MARKS
from harness.safe_write import atomic_write_text
from harness.text_table import md_escape, md_rows, md_text

IDENTICAL = "identical"  # the pull request's word for +inf dB (report.md: 'inf (identical)')
# The timings pr.md's speed table and benchmark.json give: (key, what, unit).
TIMINGS = (("s_per_step", "DiT s/step", "s"), ("pipeline_total_s", "pipeline total", "s"))


def _mean(a: ArmAggregate | None, key: str) -> float | None:
    s = a.metrics.get(key) if a is not None else None
    return None if s is None or s.n == 0 else s.mean


def timing_whose(res: ReportResults, arm: str) -> str:
    """Whose timing a candidate's is where it is no kernel's: an emulator's, a shadowed copy's."""
    if is_shadowed_copy(res, arm):
        return "a shadowed copy's timing"
    return "an emulator's timing" if is_emulator(res, arm) else ""


def speed_table(res: ReportResults) -> list[str]:
    ref = res.reference_arm or "the reference"
    arms = [a for a in res.arms if a.runs_ok and _mean(a, "s_per_step") is not None]
    if not arms:
        return ["No speed table: no run measured here recorded its timing."]
    steps = max((int(_mean(a, "dit_steps") or 0) for a in arms), default=0)
    many_runs = any(a.runs_ok > 1 for a in arms)  # repeats or seeds: means over runs, as report.md's
    long_run = steps > 3 or many_runs
    what = f"DiT s/step (mean of steps 2-{steps}{', mean over runs' if many_runs else ''})"
    head = [
        "attention" if long_run else "attn_type",
        what if long_run else "DiT s/step (steps 1/2/3)",
        "pipeline total",
        f"speed-up vs {ref} (s/step / total)",
    ]
    rows, notes = [], []
    for a in arms:
        first_steps = " / ".join(fmt_time(_mean(a, f"step_{i}")) for i in (1, 2, 3))
        step_cell = fmt_time(_mean(a, "s_per_step")) if long_run else first_steps
        total = _mean(a, "pipeline_total_s")
        if a.arm == res.reference_arm:
            vs = "reference"
        elif a.role == "noise_floor":
            vs = "noise floor"  # an exact run: its time says nothing about a kernel
        else:
            step_test, total_test = (a.speed.get(k) or SpeedTest(what=what) for k, what, _ in TIMINGS)
            vs = f"{fmt_speedup(step_test.speedup)} / {fmt_speedup(total_test.speedup)}"
            whose = timing_whose(res, a.arm)  # an emulator's or a shadowed copy's time is no kernel's
            vs += f" ({whose})" if whose else ""
            name = f"{a.arm} ({whose})" if whose else a.arm
            short = res.pr.speed.get(a.arm)  # no interval: the speed-ups as such, no finding
            words = short or f"DiT s/step {step_test.words}; pipeline total {total_test.words}"
            notes.append(f"{name}: {words}")
        rows.append([a.arm, step_cell, f"{fmt_time(total)} s" if total is not None else NA, vs])
    tests = f"Speed-up = {md_escape(ref)} time / arm time (above 1 = faster){'; the speed tests:' if notes else ''}"
    return [*md_rows(head, rows), "", tests, *(f"- {md_text(n)}" for n in notes)]


def _pr_cell(a: ArmAggregate, m: Metric) -> str:
    """A metric's cell with the one beside it (``PrColumn``), rounded as the pull request did."""
    other = METRICS.get(m.pr.beside)

    def fmt(x: Metric) -> str:
        value = _mean(a, x.key)
        return fmt_db(value, IDENTICAL) if x.unit == "dB" else fmt_rounded(value, 3, x.digits)

    if _mean(a, m.key) is None:
        return NA
    beside = fmt(other).removesuffix(f" {m.unit}") if other.unit == m.unit and m.unit else fmt(other)
    return m.pr.joint.format(fmt(m), beside)


def accuracy_table(res: ReportResults) -> list[str]:
    ref = res.reference_arm or "the reference"
    columns = pr_metrics()
    head = [f"decoded output vs {ref}", *(m.pr.head for m in columns)]
    measured = [a for a in res.arms if a.arm != res.reference_arm and _mean(a, columns[0].key) is not None]
    ordered = sorted(measured, key=lambda a: a.role == "noise_floor")  # stable: the floors last
    rows = [[run_label(res, a.arm, a.arm, a.role), *(_pr_cell(a, m) for m in columns)] for a in ordered]
    return (
        md_rows(head, rows) if rows else [f"No accuracy table: no output was compared with {md_text(ref)}'s."]
    )


# pr.md's statistics columns: head, the statistics it shows (joined by ' / ') and their decimals
STATS_COLUMNS = (
    ("luma mean / std", ("luma_mean", "luma_std"), 1),
    ("sharpness (Laplacian var.)", ("sharpness",), 1),
    ("mean frame-to-frame abs diff", ("motion",), 2),
    ("audio RMS / peak", ("audio_rms", "audio_peak"), 3),
)


def stats_table(res: ReportResults) -> list[str]:
    """report.md's statistics (the first repeat of each seed) where they differ: the columns and runs
    whose rounded cells are not their seed's reference run's, the reference runs beside them."""
    runs = [r for r in res.primary_runs if r.stats is not None]
    cells = {}
    for r in runs:
        f = stat_fields(r.stats)
        cells[r.key] = [" / ".join(fmt_rounded(f[k], d, 4) for k in keys) for _, keys, d in STATS_COLUMNS]
    ref = {r.seed: cells[r.key] for r in runs if r.arm == res.reference_arm}
    differ = {
        r.key: [i for i, x in enumerate(cells[r.key]) if x != ref.get(r.seed, cells[r.key])[i]] for r in runs
    }
    shown = sorted({i for found in differ.values() for i in found})
    same = [head for i, (head, _, _) in enumerate(STATS_COLUMNS) if i not in shown]
    keep = [r.key for r in runs if differ[r.key] or r.arm == res.reference_arm or r.seed not in ref]
    table = md_rows(
        ["run", *(STATS_COLUMNS[i][0] for i in shown)], [[k, *(cells[k][i] for i in shown)] for k in keep]
    )
    agree = f"{', '.join(same)}: every run's equals its seed's reference run's to the digits shown"
    return (table if shown else []) + ([""] if shown and same else []) + ([agree] if same and runs else [])


def _run_facts(r: RunSummary) -> list[str]:
    """The attention facts of one candidate run, without its name."""
    if r.attn is None:
        return ["attention calls not recorded"]
    per_rank = {rank: rc.calls.get(r.attn.requested, 0) for rank, rc in sorted(r.attn.ranks.items())}
    counts = sorted(set(per_rank.values()))
    n = str(counts[0]) if len(counts) == 1 else " / ".join(str(per_rank[k]) for k in per_rank)
    out = [
        f"{n} DiT attention calls per rank went through {r.attn.requested}, "
        f"{r.attn.fallbacks} fallbacks ({len(per_rank)} rank(s))"
    ]
    checks = [rc.direct_check for rc in r.attn.ranks.values() if rc.direct_check is not None]
    if checks:  # one reading for all ranks when they read alike, else each distinct one
        readings = sorted({c.reading() for c in checks})
        ranks = f" ({len(checks)} rank(s))" if len(r.attn.ranks) > 1 else ""
        out.append(f"backend output vs a direct op call: {'; '.join(readings)}{ranks}")
    return out


def facts(res: ReportResults) -> list[str]:
    out: list[str] = []
    by_arm: dict[str, list[RunSummary]] = {}
    for r in (r for r in res.runs if r.ok and r.role == "candidate"):
        by_arm.setdefault(r.arm, []).append(r)
    for arm, runs in by_arm.items():
        per_run = [_run_facts(r) for r in runs]
        if len(runs) > 1 and all(f == per_run[0] for f in per_run):  # every run of the arm reads alike
            out += [f"{arm} (each of its {len(runs)} runs): {line}" for line in per_run[0]]
        else:
            out += [f"{r.key}: {line}" for r, lines in zip(runs, per_run, strict=True) for line in lines]
    same = [c for c in res.comparisons if c.bitwise.identical]
    for c in same:
        what = (
            "video and audio" if c.bitwise.audio else "output files" if c.bitwise.video is None else "video"
        )
        out.append(f"{what} bitwise identical: {c.a.key} and {c.b.key}")
    if not same and res.comparisons:
        out.append(f"video and audio bitwise identical to {res.reference_arm}: no run")
    if res.frame_indices:
        seed = res.primary_seed
        cols = " | ".join(r.key for r in res.primary_runs if r.seed == seed and r.ok and r.output)
        shown = " / ".join(map(str, res.frame_indices))
        out.append(
            f"frames {shown} side by side in the CI artifacts' report.md and index.html, columns: {cols}"
        )
    return out


def verdict_lines(res: ReportResults) -> list[str]:
    """The summary's line per candidate, its word's mark and name first; each warning a line of its own."""
    out = []
    for r in res.review:
        line, name = r.line, r.name  # the badge may hold ': ' (it is read from records)
        name, rest = (name, line[len(name) + 2 :]) if line.startswith(f"{name}: ") else line.split(": ", 1)
        out.append(f"- {MARKS.get(r.word, '')} **{md_escape(name)}**: {md_text(rest)}")
        out += [f"  - {md_text(x)}" for x in res.pr.readings.get(r.arm, [])]
        out += [f"- **WARNING**: {md_text(w)}" for w in r.warning_lines]
    return out


def provenance(res: ReportResults) -> list[str]:
    """Where and with what the figures were made, and the design: device, torch, harness and commit,
    each plugin's sha256, seeds x floor runs x repeats and the file scored."""
    env = dict(res.env_summary)
    gpu = env.get("gpu", "none")
    device = gpu if gpu != "none" else f"CPU {env.get('cpu')}" if res.env.get("cpu") else "not recorded"
    commit = "commit not recorded (not run from a git checkout)"
    for key, how in (
        ("analysis_harness_git", " (recorded at analysis, not by the run)"),
        ("harness_git", ""),
    ):
        got = res.env.get(key)  # the run's wins
        if isinstance(got, dict) and isinstance(got.get("sha"), str):
            commit = f"commit {got['sha'][:12]}{' (dirty)' if got.get('dirty') else ''}{how}"
    plugins = {(p.path, p.sha256): p for r in res.runs for p in r.plugins}.values()
    named = ", ".join(f"{Path(p.path).name} sha256 {p.sha256[:12]}" for p in plugins) or "none"
    floors = Counter(r.seed for r in res.primary_runs if r.role == "noise_floor")
    scored = "lossless" if res.pixel_source.startswith("lossless") else "H.264/AAC (output.mp4)"
    design = (
        f"{len(res.seeds)} seed(s) ({', '.join(map(str, res.seeds))}) x {max(floors.values(), default=0)} floor "
        f"run(s) x {res.repeats} repeat(s), {f'scored on {scored}' if res.pixel_source else 'no output scored'}"
    )
    return [
        f"device: {device}; torch {env.get('torch', 'not recorded')}",
        f"harness {res.harness_version or 'version not recorded'}, {commit}",
        f"plugins: {named}",
        f"design: {design}",
        *([res.pr.codec] if res.pr.codec else []),
    ]


def render_pr(res: ReportResults) -> str:
    lines = [f"## {md_escape(res.scenario_name)} / {md_escape(res.campaign_id)}", ""]
    if res.summary.incomplete:
        lines += [f"**{md_text(res.summary.incomplete)}**", ""]
    lines += [f"- {md_text(x)}" for x in provenance(res)] + [""]
    verdicts = verdict_lines(res) + [f"- {md_text(f)}" for f in res.summary.findings + res.summary.intervals]
    # an emulator arm with a provenance: what it models, how far its numerics were checked
    emulators = [f"- {md_text(r.emulator_detail)}" for r in res.review if r.emulator_detail]
    for part in (verdicts, speed_table(res), accuracy_table(res), emulators, stats_table(res)):
        lines += part + ([""] if part else [])  # the tables are never empty: a line says why there is none
    lines += [f"- {md_text(f)}" for f in facts(res)]
    return "\n".join(lines).rstrip() + "\n"


class BenchmarkEntry(Record):
    name: str
    unit: str
    value: float
    range: str | None = None
    extra: str | None = None


def benchmark_entries(res: ReportResults) -> list[BenchmarkEntry]:
    out = []
    for a in res.arms:
        for key, what, unit in TIMINGS:
            s = a.metrics.get(key)
            if s is None or s.n == 0 or s.mean is None:
                continue
            extra = f"mean over {s.n} run(s) (repeats x seeds) of {res.scenario_name}/{res.campaign_id}"
            extra += f"; {a.role}" if a.role != "candidate" else ""
            extra += "" if a.timing_baseline else f"; {a.timing_label}"
            spread = f"± {s.std:.6g}" if s.n >= 2 and s.std is not None else None
            mean = round(s.mean, 6)
            out.append(
                BenchmarkEntry(name=f"{a.arm}: {what}", unit=unit, value=mean, range=spread, extra=extra)
            )
    return out


def write_benchmark(res: ReportResults, path: Path) -> Path:
    entries = TypeAdapter(list[BenchmarkEntry]).dump_json(benchmark_entries(res), indent=2, exclude_none=True)
    atomic_write_text(Path(path), entries.decode() + "\n")
    return Path(path)
