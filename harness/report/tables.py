"""The report as sections of string tables: one view rendered by both markdown.py and html.py,
so the pull-request tables and the CI page always say the same thing."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.compare.metrics import ACCURACY_METRICS
from harness.compare.pairwise import Comparison
from harness.compare.summary import RunSummary, stat_fields
from harness.compare.verdict import Verdict
from harness.number_format import NA, fmt_db, fmt_ratio, fmt_s, fmt_stat, speed_words
from harness.report.results import ReportResults, Spread
from harness.report.text import TextTable

SPEED_HEADERS = [
    "s/step",
    "step 1",
    "step 2",
    "step 3",
    "pipeline total (s)",
    "s/step vs ref",
    "total vs ref",
]
ROLE_LABEL = {"reference": "reference", "noise_floor": "noise floor", "candidate": "candidate"}


@dataclass
class FrameGrid:
    """Rows are frame indices, columns are runs; cells are asset paths (None: not available)."""

    title: str
    indices: list[int]
    columns: list[str]
    cells: dict[str, dict[int, str]]
    missing: dict[str, str] = field(default_factory=dict)  # run -> why it has no frames


@dataclass
class Section:
    id: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[TextTable] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)  # (caption, asset path)
    frame_grids: list[FrameGrid] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    logs: list[tuple[str, str]] = field(default_factory=list)  # (title, text)
    bullets: list[str] = field(default_factory=list)


def _spread_text(s: Spread | None, fmt) -> str:
    if s is None or s.n == 0:
        return NA
    if s.n == 1 or s.min == s.max:
        return fmt(s.values[0] if s.n == 1 else s.min)
    mean = fmt(s.mean) if s.mean is not None else NA
    return f"{mean} [{fmt(s.min)}..{fmt(s.max)}]"


def _band_text(s: Spread | None, fmt) -> str:
    if s is None or s.n == 0:
        return NA
    return fmt(s.min) if s.min == s.max else f"{fmt(s.min)}..{fmt(s.max)}"


def _role(r: RunSummary) -> str:
    return ROLE_LABEL.get(r.role, r.role)


def _css(r: RunSummary) -> str:
    if not r.ok:
        return "not-ok"
    return {"reference": "reference", "noise_floor": "noise-floor"}.get(r.role, "")


def _status(r: RunSummary) -> str:
    return r.status if r.ok else f"{r.status}: {r.reason or 'no reason recorded'}"


def _vs_ref(ratio: float | None) -> str:
    return NA if ratio is None else f"{fmt_ratio(ratio)} ({speed_words(ratio)})"


def overview_section(res: ReportResults) -> Section:
    sec = Section("overview", "Campaign")
    info = TextTable(title="", headers=["", ""])
    for k, v in (
        ("scenario", res.scenario_name),
        ("scenario file", res.scenario_file or NA),
        ("campaign", res.campaign_id),
        ("profile", res.profile or NA),
        ("runner / executor", f"{res.runner} / {res.executor}"),
        ("reference arm", res.reference_arm or "none"),
        ("noise floor", ", ".join(res.noise_floor_arms) or "none"),
        ("seeds", ", ".join(map(str, res.seeds)) or NA),
        ("created / report generated", f"{res.created_at or NA} / {res.generated_at}"),
    ):
        info.add([k, v])
    runs = TextTable(title="Runs", headers=["run", "arm", "seed", "role", "attention", "status"])
    for r in res.runs:
        attn = f"{r.attn_type}{' (K/V reversed)' if r.kv_reversed else ''}"
        runs.add([r.key, r.arm, r.seed if r.seed is not None else NA, _role(r), attn, _status(r)], _css(r))
    sec.tables = [info, runs]
    sec.bullets = list(res.notes)
    return sec


def speed_section(res: ReportResults) -> Section:
    sec = Section("speed", "1. Speed")
    sec.paragraphs.append(
        "DiT s/step is the mean of steps 2..N (step 1 carries warm-up); ratios are run / reference of the same "
        "seed (below 1 = faster)."
    )
    t = TextTable(
        title="Per run",
        headers=["run", "role", "DiT steps", *SPEED_HEADERS],
    )
    for r in res.runs:
        c = res.comparison_for(r.key)
        if r.arm == res.reference_arm:
            rs, rt = "1 (reference)", "1 (reference)"
        else:
            rs = _vs_ref(c.speed.s_per_step_ratio) if c else NA
            rt = _vs_ref(c.speed.total_ratio) if c else NA
        t.add(
            [
                r.key,
                _role(r),
                r.dit_steps if r.dit_steps is not None else NA,
                fmt_s(r.s_per_step),
                fmt_s(r.step(1)),
                fmt_s(r.step(2)),
                fmt_s(r.step(3)),
                fmt_s(r.pipeline_total_s),
                rs,
                rt,
            ],
            _css(r),
        )
    if res.multi_seed:
        agg = TextTable(
            title="Per arm over seeds: mean [min..max]",
            headers=["arm", "role", "runs ok", *SPEED_HEADERS],
        )
        for a in res.arms:
            m = a.metrics
            ref = a.arm == res.reference_arm
            agg.add(
                [
                    a.arm,
                    ROLE_LABEL.get(a.role, a.role),
                    f"{a.runs_ok}/{len(a.keys)}",
                    _spread_text(m["s_per_step"], fmt_s),
                    _spread_text(m["step_1"], fmt_s),
                    _spread_text(m["step_2"], fmt_s),
                    _spread_text(m["step_3"], fmt_s),
                    _spread_text(m["pipeline_total_s"], fmt_s),
                    "1 (reference)" if ref else _spread_text(m.get("s_per_step_ratio"), fmt_ratio),
                    "1 (reference)" if ref else _spread_text(m.get("total_ratio"), fmt_ratio),
                ],
                {"reference": "reference", "noise_floor": "noise-floor"}.get(a.role, ""),
            )
        agg.notes.append("1-3 runs per arm are too few for a significance test: the spread is indicative")
        sec.tables = [agg, t]
    else:
        sec.tables = [t]
    for c in res.comparisons:
        if c.speed.s_per_step_line:
            sec.bullets.append(f"{c.b.key} vs {c.a.key}: {c.speed.s_per_step_line}")
    return sec


def _acc_cells(c: Comparison | None, r: RunSummary, reference: bool) -> list[str]:
    n = len(ACCURACY_METRICS) + 1
    if reference:
        return ["reference"] * n
    if c is None:
        return [f"not compared: {r.status}" if not r.ok else "not compared"] + [""] * (n - 1)
    if c.video is None:
        why = (
            f"not measured: {r.status}" + (f" ({r.reason})" if r.reason else "")
            if not r.ok
            else "not measured"
        )
        return [why] + [""] * (n - 1)
    cells = []
    for m in ACCURACY_METRICS:
        frame = f" (frame {m.worst_frame(c)})" if m.worst_frame is not None else ""
        cells.append(m.fmt(m.get(c)) + frame)
    bitwise = f"video {'yes' if c.bitwise.video else 'no'}, audio " + (
        NA if c.bitwise.audio is None else ("yes" if c.bitwise.audio else "no")
    )
    return [*cells, bitwise]


ACC_HEADERS = [
    "PSNR mean",
    "PSNR min (frame)",
    "SSIM mean",
    "SSIM min (frame)",
    "audio SNR",
    "audio cosine",
    "log-mel cosine",
    "bitwise",
]


def accuracy_section(res: ReportResults) -> Section:
    sec = Section("accuracy", "2. Accuracy against the reference")
    sec.paragraphs.append(
        f"Each run against {res.reference_arm or 'the reference'} of the same seed, decoded output. The noise floor "
        "row is the exact backend with K/V order reversed: only floating-point summation order differs, so a "
        "candidate at or above it is as close as two exact runs are to each other."
    )
    t = TextTable(title="Per run", headers=["run", "role", *ACC_HEADERS])
    for r in res.runs:
        c = res.comparison_for(r.key)
        role = _role(r) + (" (K/V reversed)" if r.role == "noise_floor" and r.kv_reversed else "")
        t.add([r.key, role, *_acc_cells(c, r, r.arm == res.reference_arm)], _css(r))
    sec.tables.append(t)
    if res.multi_seed:
        agg = TextTable(
            title="Per arm over seeds: mean [min..max]; noise floor as a band (min..max)",
            headers=["arm", "role", "seeds measured", *ACC_HEADERS[:-1]],
        )
        for a in res.arms:
            if a.arm == res.reference_arm:
                continue
            m = a.metrics
            floor = a.role == "noise_floor"
            cells = []
            for metric in ACCURACY_METRICS:
                fmt = metric.fmt
                cells.append(
                    _band_text(m.get(metric.key), fmt) if floor else _spread_text(m.get(metric.key), fmt)
                )
            measured = m["psnr_mean"].n if "psnr_mean" in m else 0
            label = "noise floor band" if floor else ROLE_LABEL.get(a.role, a.role)
            agg.add([a.arm, label, f"{measured}/{len(a.keys)}", *cells], "noise-floor" if floor else "")
        sec.tables.insert(0, agg)
    for c in res.comparisons:
        for n in c.notes:
            sec.bullets.append(f"{c.b.key}: {n}")
    return sec


def latent_section(res: ReportResults) -> Section | None:
    if not res.latents:
        return None
    sec = Section("latents", "2b. Latent PSNR per step")
    sec.paragraphs.append(
        "Latents saved by the pipeline at every step, against the reference's latent of the same step: where the "
        "trajectories part. Convention: " + res.conventions.get("latent", "")
    )
    steps = sorted({p.step for s in res.latents for p in s.points})
    t = TextTable(
        title="",
        headers=[
            "step",
            *[s.key + (" (noise floor)" if s.role == "noise_floor" else "") for s in res.latents],
        ],
    )
    for step in steps:
        row = [str(step)]
        for s in res.latents:
            p = next((p for p in s.points if p.step == step), None)
            if p is None:
                row.append(NA)
            elif p.parts:
                row.append(
                    f"{fmt_db(p.psnr)} ("
                    + ", ".join(f"{n} {fmt_db(v)}" for n, v in sorted(p.parts.items()))
                    + ")"
                )
            else:
                row.append(fmt_db(p.psnr))
        t.add(row)
    sec.tables.append(t)
    return sec


def stats_section(res: ReportResults) -> Section:
    sec = Section("stats", "3. Global statistics")
    sec.paragraphs.append("Convention: " + res.conventions.get("stats", ""))
    names = list(stat_fields(None))
    t = TextTable(title="Every run", headers=["run", "role", "frames", "size", *names])
    for r in res.runs:
        s = r.stats
        vals = stat_fields(s)
        if s is None:
            why = "not measured" + (
                f" ({r.status})" if not r.ok else (" (no output)" if r.output is None else "")
            )
            t.add([r.key, _role(r), why, "", *[""] * len(names)], _css(r))
            continue
        t.add(
            [r.key, _role(r), s.frames, f"{s.width}x{s.height}", *[fmt_stat(n, vals[n]) for n in names]],
            _css(r),
        )
    # The spread of the exact runs per seed: the band candidates are judged against.
    for seed in res.seeds:
        exact = [r for r in res.runs if r.seed == seed and r.role in ("reference", "noise_floor") and r.stats]
        if len(exact) < 2:
            continue
        cells = []
        for n in names:
            xs = [stat_fields(r.stats)[n] for r in exact]
            xs = [x for x in xs if x is not None]
            cells.append(f"{fmt_stat(n, min(xs))}..{fmt_stat(n, max(xs))}" if xs else NA)
        t.add(
            [f"exact runs spread{f' (seed {seed})' if res.multi_seed else ''}", "band", "", "", *cells],
            "band",
        )
    sec.tables.append(t)
    return sec


def attention_section(res: ReportResults) -> Section:
    sec = Section("attention", "4. Attention calls and environment")
    t = TextTable(
        title="Attention calls per rank",
        headers=["run", "requested", "rank", "calls", "fallbacks", "errors", "valid"],
    )
    for r in res.runs:
        if r.attn is None:
            why = "not recorded" if r.ok else f"not run ({r.status})"
            t.add(
                [r.key, r.attn_type or NA, NA, why, "", "", "unknown" if r.valid is None else str(r.valid)],
                _css(r),
            )
            continue
        for rank, rc in sorted(r.attn.ranks.items()):
            calls = ", ".join(f"{k}: {n}" for k, n in sorted(rc.calls.items())) or "0"
            fallbacks = ", ".join(f"{k}: {n}" for k, n in sorted(rc.fallbacks.items()) if n) or "0"
            t.add(
                [
                    r.key,
                    r.attn.requested,
                    rank,
                    calls,
                    fallbacks,
                    "; ".join(rc.errors),
                    "yes" if r.valid else "NO",
                ],
                _css(r) if r.valid else "not-ok",
            )
        if not r.attn.ranks:
            t.add([r.key, r.attn.requested, NA, "no rank recorded", "", "", "NO"], "not-ok")
    sec.tables.append(t)
    for r in res.runs:
        if r.valid is False:
            sec.bullets.append(f"{r.key}: " + "; ".join(r.invalid_reasons))
    env = TextTable(title="Environment", headers=["", ""])
    for k, v in res.env_summary:
        env.add([k, v])
    if not res.env_summary:
        env.add(["environment", "not recorded in campaign.json"])
    sec.tables.append(env)
    return sec


def frames_section(res: ReportResults, grids: list[FrameGrid]) -> Section:
    sec = Section("frames", "5. Frames side by side")
    idx = ", ".join(map(str, res.frame_indices)) or NA
    sec.paragraphs.append(f"Frames {idx} (evenly spaced over the reference's length), one column per run.")
    sec.frame_grids = grids
    return sec


def verdict_section(res: ReportResults) -> Section:
    sec = Section("verdicts", "6. Verdicts")
    t = TextTable(
        title="", headers=["arm", "within the noise floor", "global statistics", "attention", "summary"]
    )

    def yn(x: bool | None, yes: str, no: str) -> str:
        return "not judged" if x is None else (yes if x else no)

    for v in res.verdicts:
        css = (
            ""
            if v.within_noise_floor is not False
            and v.stats_inside is not False
            and v.attention_ok is not False
            else "bad"
        )
        t.add(
            [
                v.arm,
                yn(v.within_noise_floor, "yes", "NO"),
                yn(v.stats_inside, "inside", "OUTSIDE"),
                yn(v.attention_ok, "valid", "INVALID"),
                v.summary,
            ],
            css,
        )
    if res.verdicts:
        sec.tables.append(t)
    else:
        sec.paragraphs.append("No candidate arm in this campaign.")
    sec.verdicts = list(res.verdicts)
    sec.bullets.append(res.exact_attention)
    sec.bullets.append("statistics tolerance: " + res.conventions.get("stats_tolerance", ""))
    return sec


def failures_section(res: ReportResults) -> Section | None:
    bad = [r for r in res.runs if not r.ok]
    if not bad:
        return None
    sec = Section("failures", "Runs that did not finish ok")
    t = TextTable(title="", headers=["run", "status", "reason"])
    for r in bad:
        t.add([r.key, r.status, r.reason or "no reason recorded"], "not-ok")
        if r.log_tail.strip():
            sec.logs.append((f"{r.key}: log tail", r.log_tail))
    sec.tables.append(t)
    return sec


def conventions_section(res: ReportResults) -> Section:
    sec = Section("conventions", "Conventions")
    t = TextTable(title="", headers=["what", "convention"])
    for k, v in res.conventions.items():
        t.add([k, v])
    sec.tables.append(t)
    return sec


def build_sections(res: ReportResults, grids: list[FrameGrid], images: dict[str, str]) -> list[Section]:
    """All sections in reading order; ``images`` maps figure names to asset paths."""
    secs: list[Section] = [overview_section(res)]
    sp = speed_section(res)
    if "step_times" in images:
        sp.images.append(("Seconds per DiT step", images["step_times"]))
    acc = accuracy_section(res)
    for name, caption in (
        ("seeds", "Video PSNR per seed, noise floor as a band"),
        ("per_frame", "Per-frame PSNR and SSIM"),
        ("audio", "Audio waveform and spectrogram"),
    ):
        if name in images:
            acc.images.append((caption, images[name]))
    secs += [sp, acc]
    lat = latent_section(res)
    if lat is not None:
        if "latents" in images:
            lat.images.append(("Latent PSNR per step", images["latents"]))
        secs.append(lat)
    secs += [stats_section(res), attention_section(res), frames_section(res, grids), verdict_section(res)]
    fail = failures_section(res)
    if fail is not None:
        secs.append(fail)
    secs.append(conventions_section(res))
    return secs
