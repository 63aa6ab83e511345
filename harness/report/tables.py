"""The report as sections of string tables: one view rendered by both markdown.py and html.py,
so the pull-request tables and the CI page always say the same thing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from harness.compare.metrics import ACCURACY_METRICS
from harness.compare.pairwise import Comparison
from harness.compare.significance import SpeedTest, mean_sd_text
from harness.compare.summary import RunSummary, stat_fields
from harness.compare.verdict import JUDGED_STATS, Verdict, ratio_text
from harness.number_format import NA, fmt_db, fmt_num, fmt_ratio, fmt_s, fmt_stat
from harness.report.results import ArmAggregate, ReportResults, Spread
from harness.report.text import TextTable

SPEED_HEADERS = [
    "s/step",
    "step 1",
    "step 2",
    "step 3",
    "pipeline total (s)",
    "s/step / ref",
    "total / ref",
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


def _role(r: RunSummary) -> str:
    return ROLE_LABEL.get(r.role, r.role)


def _css(r: RunSummary) -> str:
    if not r.ok:
        return "not-ok"
    return {"reference": "reference", "noise_floor": "noise-floor"}.get(r.role, "")


def _status(r: RunSummary) -> str:
    return r.status if r.ok else f"{r.status}: {r.reason or 'no reason recorded'}"


def _ms(s: Spread | None) -> str:
    """mean ± sd (n) over runs."""
    if s is None or s.n == 0:
        return NA
    return mean_sd_text(s.mean, s.std, s.n, unit="")


def _vs_ref_test(t: SpeedTest | None, a: ArmAggregate) -> str:
    """The ratio with its significance; a floor arm's timing is marked as no baseline."""
    if t is None or t.outcome == "not_measured":
        return NA
    text = f"{fmt_ratio(t.ratio)}: {t.words}"
    return text if a.timing_baseline else f"{a.timing_label}; {text}"


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
        attn = f"{r.attn_type}{f' ({r.perturbation})' if r.perturbation else ''}"
        runs.add([r.key, r.arm, r.seed if r.seed is not None else NA, _role(r), attn, _status(r)], _css(r))
    sec.tables = [info, runs]
    sec.bullets = list(res.notes)
    return sec


def speed_section(res: ReportResults) -> Section:
    sec = Section("speed", "1. Speed")
    runs = "1 run" if res.repeats == 1 else f"up to {res.repeats} runs"
    sec.paragraphs.append(
        f"DiT s/step is the mean of steps 2..N (step 1 carries warm-up). Each arm ran {runs} per seed, each in its "
        "own process, in interleaved order (A B C A B C ...). Per arm: mean ± sd (n) over runs (repeats x seeds). "
        f"A ratio to the reference is called faster or slower only when Welch's two-sided t-test over the runs "
        f"rejects equal means at alpha {res.rules.alpha:g}; otherwise it reads 'no significant difference', and "
        "with fewer than 2 runs a side 'too few samples'."
    )
    agg = TextTable(
        title="Per arm: mean ± sd (n) over runs",
        headers=["arm", "role", "runs ok", "DiT steps", "s/step", "step 1", "pipeline total (s)",
                 "s/step vs reference", "total vs reference"],
    )  # fmt: skip
    for a in res.arms:
        m = a.metrics
        ref = a.arm == res.reference_arm
        role = ROLE_LABEL.get(a.role, a.role)
        if not a.timing_baseline:
            role += f" ({a.timing_label}: {a.timing_note})"
        agg.add(
            [
                a.arm,
                role,
                f"{a.runs_ok}/{len(a.keys)}",
                _spread_text(m["dit_steps"], lambda x: f"{x:g}"),
                _ms(m["s_per_step"]),
                _ms(m["step_1"]),
                _ms(m["pipeline_total_s"]),
                "reference" if ref else _vs_ref_test(a.speed.get("s_per_step"), a),
                "reference" if ref else _vs_ref_test(a.speed.get("pipeline_total_s"), a),
            ],
            {"reference": "reference", "noise_floor": "noise-floor"}.get(a.role, ""),
        )
    t = TextTable(
        title="Every run (one sample each: ratios without a test)",
        headers=["run", "role", "repeat", "DiT steps", *SPEED_HEADERS],
    )
    ref_of = {(r.seed, r.repeat): r for r in res.runs if r.arm == res.reference_arm}
    for r in res.runs:
        ref = ref_of.get((r.seed, r.repeat)) or ref_of.get((r.seed, 1))
        if r.arm == res.reference_arm:
            rs = rt = "1 (reference)"
        else:
            rs = _ratio_cell(ref.s_per_step if ref else None, r.s_per_step)
            rt = _ratio_cell(ref.pipeline_total_s if ref else None, r.pipeline_total_s)
        t.add(
            [
                r.key,
                _role(r),
                r.repeat,
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
    sec.tables = [agg, t]
    for a in res.arms:
        for key in ("s_per_step", "pipeline_total_s"):
            test = a.speed.get(key)
            if test is not None and test.outcome != "not_measured":
                mark = "" if a.timing_baseline else f" [{a.timing_label}]"
                sec.bullets.append(f"{a.arm} vs {res.reference_arm}: {test.line()}{mark}")
    sec.bullets += [f"repeats: {n}" for n in res.repeat_notes]
    return sec


def _ratio_cell(a: float | None, b: float | None) -> str:
    return fmt_ratio(b / a) if a and b is not None else NA


def _acc_cells(c: Comparison | None, r: RunSummary, reference: bool) -> list[str]:
    n = len(ACC_HEADERS)
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
    m = {x.key: x for x in ACCURACY_METRICS}
    v, a = c.video, c.audio

    def cell(key: str) -> str:
        metric = m[key]
        frame = f" (frame {metric.worst_frame(c)})" if metric.worst_frame is not None else ""
        return metric.fmt(metric.get(c)) + frame

    snr = cell("audio_snr") + (f" (lag {a.lag_samples})" if a is not None and a.lag_samples else "")
    bitwise = f"video {'yes' if c.bitwise.video else 'no'}, audio " + (
        NA if c.bitwise.audio is None else ("yes" if c.bitwise.audio else "no")
    )
    return [
        cell("psnr"),
        cell("psnr_min"),
        f"{v.identical_frames} of {v.frames}",
        cell("ssim_mean"),
        cell("ssim_min"),
        snr,
        cell("audio_cosine"),
        cell("audio_logmel_cosine"),
        bitwise,
    ]


ACC_HEADERS = [
    "PSNR (pooled)",
    "PSNR min (frame)",
    "identical frames",
    "SSIM mean",
    "SSIM min (frame)",
    "audio SNR",
    "audio cosine",
    "log-mel cosine",
    "bitwise",
]


def _floor_band(res: ReportResults, key: str, fmt) -> str:
    band = res.floor.band.get(key) if res.floor else None
    if not band:
        return NA
    lo, med, hi = band
    return fmt(lo) if lo == hi else f"{fmt(lo)} / {fmt(med)} / {fmt(hi)}"


def _codec_cells(res: ReportResults) -> list[str]:
    cf = res.codec_floor
    assert cf is not None
    return [
        fmt_db(cf.psnr_pooled),
        f"{fmt_db(cf.psnr_min)} (frame {cf.psnr_min_frame})",
        "",
        fmt_num(cf.ssim_mean, 6),
        f"{fmt_num(cf.ssim_min, 6)} (frame {cf.ssim_min_frame})",
        fmt_db(cf.audio_snr),
        "",
        fmt_num(cf.audio_logmel_cosine, 6),
        "",
    ]


def accuracy_section(res: ReportResults) -> Section:
    sec = Section("accuracy", "2. Accuracy against the reference")
    floors = ", ".join(
        f"{arm} ({how})" for arm, how in (res.floor.perturbations.items() if res.floor else [])
    )
    sec.paragraphs.append(
        f"Each run against {res.reference_arm or 'the reference'} of the same seed. The noise floor is every exact "
        f"perturbation against the reference: {floors or 'none in this campaign'}. Exact attention is invariant "
        "to them, so only rounding differs: the floor is how far two exact runs are from each other. PSNR is pooled "
        "(from the mean MSE over frames); the worst frame keeps its index; identical frames are counted."
    )
    if res.pixel_source:
        sec.paragraphs.append(f"Pixel metrics taken on: {res.pixel_source}.")
    t = TextTable(title="Per run", headers=["run", "role", *ACC_HEADERS])
    for r in res.primary_runs:
        c = res.comparison_for(r.key)
        role = _role(r) + (f" ({r.perturbation})" if r.role == "noise_floor" and r.perturbation else "")
        t.add([r.key, role, *_acc_cells(c, r, r.arm == res.reference_arm)], _css(r))
    if res.codec_floor is not None:
        cf = res.codec_floor
        t.add([f"codec floor ({cf.key})", f"codec, {cf.method}", *_codec_cells(res)], "band")
        t.notes.append(cf.text)
        t.notes.append(f"decoding: {cf.decode}" if cf.decode else "")
        t.notes = [n for n in t.notes if n]
    sec.tables.append(t)
    if res.floor is not None:
        band = TextTable(
            title="Noise floor band: min / median / max over perturbations x seeds",
            headers=["floor runs", "PSNR of their pooled MSE", *[m.label for m in ACCURACY_METRICS]],
        )
        band.add(
            [
                str(len(res.floor.keys)),
                fmt_db(res.floor.psnr_pooled),
                *[_floor_band(res, m.key, m.fmt) for m in ACCURACY_METRICS],
            ],
            "noise-floor",
        )
        band.notes.append(res.floor.text)
        sec.tables.insert(0, band)
    if res.multi_seed:
        agg = TextTable(
            title="Per arm over seeds: mean [min..max]",
            headers=["arm", "role", "seeds measured", *[m.label for m in ACCURACY_METRICS]],
        )
        for a in res.arms:
            if a.arm == res.reference_arm:
                continue
            m = a.metrics
            cells = [_spread_text(m.get(x.key), x.fmt) for x in ACCURACY_METRICS]
            measured = m["psnr"].n if "psnr" in m else 0
            agg.add(
                [a.arm, ROLE_LABEL.get(a.role, a.role), f"{measured}/{len(a.seeds)}", *cells],
                "noise-floor" if a.role == "noise_floor" else "",
            )
        sec.tables.insert(1 if res.floor is not None else 0, agg)
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
    sec.paragraphs.append(
        "Judged (means, standard deviations, frame counts): " + ", ".join(JUDGED_STATS) + ". Shown only "
        "(extreme values, one sample decides them): "
        + ", ".join(n for n in names if n not in JUDGED_STATS)
        + ". "
        f"A judged statistic is inside when it lies in the exact runs' range widened by {res.rules.stats_rel_tol:g} "
        "of their mean on each side."
    )
    t = TextTable(title="Every run", headers=["run", "role", "frames", "size", *names])
    for r in res.primary_runs:
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
    # The band candidates are judged against: the exact runs' range per seed, widened by the tolerance.
    tol = res.rules.stats_rel_tol
    for seed in res.seeds or [None]:
        exact = [
            r
            for r in res.primary_runs
            if r.seed == seed and r.role in ("reference", "noise_floor") and r.stats
        ]
        if not exact:
            continue
        cells = []
        for n in names:
            xs = [stat_fields(r.stats)[n] for r in exact]
            xs = [x for x in xs if x is not None]
            if not xs:
                cells.append(NA)
                continue
            pad = tol * abs(sum(xs) / len(xs)) if n in JUDGED_STATS else 0.0
            txt = f"{fmt_stat(n, min(xs) - pad)}..{fmt_stat(n, max(xs) + pad)}"
            cells.append(txt if n in JUDGED_STATS else f"{txt} (not judged)")
        label = f"judged band: {len(exact)} exact run(s){f', seed {seed}' if res.multi_seed else ''}"
        t.add([label, "band", "", "", *cells], "band")
    sec.tables.append(t)
    return sec


def attention_section(res: ReportResults) -> Section:
    sec = Section("attention", "4. Attention calls and environment")
    t = TextTable(
        title="Attention calls per rank",
        headers=[
            "run",
            "requested",
            "rank",
            "calls",
            "fallbacks",
            "errors",
            "backend vs direct op call",
            "valid",
        ],
    )
    for r in res.runs:
        if r.attn is None:
            why = "not recorded" if r.ok else f"not run ({r.status})"
            t.add(
                [
                    r.key,
                    r.attn_type or NA,
                    NA,
                    why,
                    "",
                    "",
                    "",
                    "unknown" if r.valid is None else str(r.valid),
                ],
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
                    rc.direct_check.reading() if rc.direct_check else "not checked",
                    "yes" if r.valid else "NO",
                ],
                _css(r) if r.valid else "not-ok",
            )
        if not r.attn.ranks:
            t.add([r.key, r.attn.requested, NA, "no rank recorded", "", "", "", "NO"], "not-ok")
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


def _yn(x: bool | None, yes: str, no: str) -> str:
    return "not judged" if x is None else (yes if x else no)


def _energy_cell(v: Verdict) -> str:
    judged = [c for c in v.energy if c.judged and c.ratio is not None]
    if v.regime == "chaotic":
        lat = next((c for c in judged if c.metric == "latent"), None)
        head = f"pixel metrics uninformative (floor {fmt_db(v.floor_psnr)})"
        return head + (f"; latent {ratio_text(lat.ratio)}" if lat else "")
    if not judged:
        return "not judged"
    worst = max(judged, key=lambda c: c.ratio or 0.0)
    return f"{ratio_text(worst.ratio)} ({worst.label}): {'within' if v.within_noise_floor else 'OUTSIDE'}"


def verdict_section(res: ReportResults) -> Section:
    sec = Section("verdicts", "6. Verdicts")
    rules = res.rules
    sec.paragraphs.append(
        f"A candidate's error energy against the reference (video MSE, 1 - SSIM, audio error energy; pooled over "
        f"frames and seeds) is divided by the noise floor's (every exact perturbation x seed). Tolerance "
        f"{rules.tolerance:g}x ({10 * math.log10(rules.tolerance):.2f} dB of PSNR). When the floor's "
        f"pooled PSNR is below {rules.chaotic_below_db:g} dB, pixel and audio pair metrics are uninformative and the "
        "verdict rests on the earliest-step latents (where saved) and the global statistics."
    )
    t = TextTable(
        title="",
        headers=[
            "arm",
            "error energy vs floor",
            "statistics",
            f"equivalent at {rules.tolerance:g}x",
            "attention",
        ],
    )
    for v in res.verdicts:
        bad = v.equivalent is False or v.attention_ok is False
        t.add(
            [
                v.arm,
                _energy_cell(v) if v.measured else "not measured",
                _yn(v.stats_inside, "inside", "OUTSIDE"),
                _yn(v.equivalent, "yes", "NO"),
                _yn(v.attention_ok, "valid", "INVALID"),
            ],
            "bad" if bad else "",
        )
    if res.verdicts:
        sec.tables.append(t)
    else:
        sec.paragraphs.append("No candidate arm in this campaign.")
    sec.verdicts = list(res.verdicts)
    sec.bullets.append(res.exact_attention)
    sec.bullets.append("statistics rule: " + res.conventions.get("stats_tolerance", ""))
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
