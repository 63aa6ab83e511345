"""The report as sections of string tables (render.py and html.py render the same view); the judgement
sections live in ``report.accuracy``."""

from __future__ import annotations

from harness.analysis.model import (
    ArmAggregate,
    FrameGrid,
    InSituPart,
    InSituReading,
    InSituResults,
    ReportResults,
    worst_frames,
)
from harness.compare.significance import SpeedTest
from harness.number_format import NA, fmt_ratio, fmt_s
from harness.report.accuracy import (
    accuracy_section,
    latent_section,
    role_text,
    stats_section,
    verdict_section,
)
from harness.report.cells import Section, mean_sd_cell, role_css, row_css, spread_text, status_text
from harness.report.comparison import rank_cells
from harness.store import EXTRAPOLATED
from harness.text_table import TextTable


def _vs_ref_test(t: SpeedTest | None, a: ArmAggregate) -> str:
    if t is None or not t.measured:
        return NA
    return t.words if a.timing_baseline else f"{a.timing_label}; {t.words}"


def _pairs_table(*rows: tuple[str, str], title: str = "", headers: list[str] | None = None) -> TextTable:
    t = TextTable(title=title, headers=headers or ["", ""])
    for k, v in rows:
        t.add([k, v])
    return t


def overview_section(res: ReportResults) -> Section:
    info = _pairs_table(
        ("scenario", res.scenario_name),
        ("scenario file", res.scenario_file or NA),
        ("campaign", res.campaign_id),
        ("profile", res.profile or NA),
        ("runner / executor", f"{res.runner} / {res.executor}"),
        ("reference arm", res.reference_arm or "none"),
        ("noise floor", ", ".join(res.noise_floor_arms) or "none"),
        ("seeds", ", ".join(map(str, res.seeds)) or NA),
        ("created / report generated", f"{res.created_at or NA} / {res.generated_at}"),
    )
    runs = TextTable(title="Runs", headers=["run", "arm", "seed", "role", "attention", "status"])
    for r in res.runs:
        attn = f"{r.attn_type}{f' ({r.perturbation})' if r.perturbation else ''}"
        seed, role = r.seed if r.seed is not None else NA, role_text(res, r.arm, r.role)
        runs.add([r.key, r.arm, seed, role, attn, status_text(r)], row_css(r))
    return Section("overview", "Campaign", tables=[info, runs], bullets=list(res.notes))


def speed_section(res: ReportResults) -> Section:
    sec = Section("speed", "1. Speed")
    runs = "1 run" if res.repeats == 1 else f"up to {res.repeats} runs"
    r = res.rules
    sec.paragraphs.append(
        f"DiT s/step is the mean of steps 2..N (step 1 carries warm-up). Each arm ran {runs} per seed, each in its "
        "own process, in interleaved rounds, each in the reverse order of the one before (A B C, C B A, ...). Per arm: mean ± sd (n) over runs (repeats x seeds). "
        "Speed-up = reference time / arm time (above 1: the arm is faster), the ratio of the runs' geometric means, "
        f"with its {100 * (1 - r.alpha):.10g}% interval from the runs (paired by seed and repeat where both ran every "
        "round, else blocked by seed). 'faster' or 'slower' only when the whole interval lies beyond the minimum "
        f"effect ({100 * r.min_effect:g}%) and the test, Holm-adjusted over this report's tests, rejects equal "
        f"times at alpha {r.alpha:g}; 'no meaningful difference' when the interval lies inside the minimum effect; "
        "else 'no difference detected' with the change this design could detect; under 2 runs a side 'too few runs'."
    )
    agg = TextTable(
        title="Per arm: mean ± sd (n) over runs",
        headers=["arm", "role", "runs ok", "DiT steps", "s/step", "step 1", "pipeline total (s)",
                 "s/step speed-up vs reference", "total speed-up vs reference"],
    )  # fmt: skip
    for a in res.arms:
        m = a.metrics
        role = role_text(res, a.arm, a.role)
        if not a.timing_baseline:
            role += f" ({a.timing_label}: {a.timing_note})"
        steps = spread_text(m["dit_steps"], lambda x: f"{x:g}")
        times = [mean_sd_cell(m[k]) for k in ("s_per_step", "step_1", "pipeline_total_s")]
        tests = [
            "reference" if a.arm == res.reference_arm else _vs_ref_test(a.speed.get(k), a)
            for k in ("s_per_step", "pipeline_total_s")
        ]
        agg.add([a.arm, role, f"{a.runs_ok}/{len(a.keys)}", steps, *times, *tests], role_css(a.role))
    t = TextTable(
        title="Every run (one sample each: speed-ups without a test)",
        headers=["run", "role", "repeat", "DiT steps", "s/step", "step 1", "step 2", "step 3",
                 "pipeline total (s)", "s/step speed-up", "total speed-up"],
    )  # fmt: skip
    ref_of = {(r.seed, r.repeat): r for r in res.runs if r.arm == res.reference_arm}
    for r in res.runs:
        ref = ref_of.get((r.seed, r.repeat)) or ref_of.get((r.seed, 1))
        ups = [_ratio_cell(getattr(ref, k, None), getattr(r, k)) for k in ("s_per_step", "pipeline_total_s")]
        rs, rt = ("1 (reference)",) * 2 if r.arm == res.reference_arm else ups
        steps = r.dit_steps if r.dit_steps is not None else NA
        times = [fmt_s(x) for x in (r.s_per_step, r.step(1), r.step(2), r.step(3), r.pipeline_total_s)]
        t.add([r.key, role_text(res, r.arm, r.role), r.repeat, steps, *times, rs, rt], row_css(r))
    sec.tables = [table for table in (agg, t, _layers_table(res)) if table is not None]
    sec.bullets += [
        f"{a.arm} vs {res.reference_arm}: {test.line}" + ("" if a.timing_baseline else f" [{a.timing_label}]")
        for a in res.arms
        for key in ("s_per_step", "pipeline_total_s")
        if (test := a.speed.get(key)) is not None and test.measured
    ]
    sec.bullets += [f"repeats: {n}" for n in res.repeat_notes]
    return sec


def _layers_table(res: ReportResults) -> TextTable | None:
    timed = [a for a in res.arms if a.layers_timed and "layer_s" in a.metrics]
    if not timed:
        return None
    depth = {a.released_layers for a in timed}
    released = f"step of {depth.pop()} layers" if len(depth) == 1 else "step of the released depth"
    t = TextTable(
        title=(
            f"Per DiT layer (every block timed, the device synchronised around it; {EXTRAPOLATED} = extrapolated "
            "from the layers timed: the rest of a step plus the released depth times one layer)"
        ),
        headers=["arm", "layers timed", "rows per call", "s per layer and step", "rest of a step (s)",
                 "s/step as run", f"{released} (s, extrapolated)"],
    )  # fmt: skip
    for a in timed:
        m = a.metrics
        rows = f"{a.layer_seq_len:,}" if a.layer_seq_len else NA
        times = [mean_sd_cell(m[k]) for k in ("layer_s", "outside_layers_s", "s_per_step")]
        released = f"{mean_sd_cell(m['released_step_s'])} {EXTRAPOLATED}"
        t.add([a.arm, a.layers_timed, rows, *times, released], role_css(a.role))
    return t


def _ratio_cell(ref: float | None, run: float | None) -> str:
    return fmt_ratio(ref / run) if ref is not None and run else NA


def attention_section(res: ReportResults) -> Section:
    sec = Section("attention", "4. Attention calls and environment")
    headers = [
        "run",
        "requested",
        "rank",
        "calls",
        "fallbacks",
        "errors",
        "backend vs direct op call",
        "valid",
    ]
    t = TextTable(title="Attention calls per rank", headers=headers)
    for r in res.runs:
        if r.attn is None:
            why = "not recorded" if r.ok else f"not run ({r.status})"
            valid = "unknown" if r.valid is None else str(r.valid)
            t.add([r.key, r.attn_type or NA, NA, why, "", "", "", valid], row_css(r))
            continue
        for rank, rc in sorted(r.attn.ranks.items()):
            direct = rc.direct_check.reading() if rc.direct_check else "not checked"
            cells = [r.key, r.attn.requested, rank, *rank_cells(rc), direct]
            t.add([*cells, "yes" if r.valid else "NO"], row_css(r) if r.valid else "not-ok")
        if not r.attn.ranks:
            t.add([r.key, r.attn.requested, NA, "no rank recorded", "", "", "", "NO"], "not-ok")
    sec.tables.append(t)
    sec.bullets += [f"{r.key}: " + "; ".join(r.invalid_reasons) for r in res.runs if r.valid is False]
    env = res.env_summary or [("environment", "not recorded in campaign.json")]
    sec.tables.append(_pairs_table(*env, title="Environment"))
    return sec


def frames_section(res: ReportResults, grids: list[FrameGrid]) -> Section:
    idx = ", ".join(map(str, res.frame_indices)) or NA
    text = f"Frames {idx} (evenly spaced over the reference's length), one column per run"
    worst = [
        f"{run} " + ", ".join(f"{m} {i}" for i, marks in sorted(frames.items()) for m in marks)
        for seed in res.seeds or [None]
        for run, frames in worst_frames(res, seed).items()
    ]
    if worst and any(set(g.indices) - set(res.frame_indices) for g in grids):
        text += (
            "; and each candidate's worst frame against the reference by PSNR and by SSIM, its row showing "
            "the reference and that candidate: " + "; ".join(worst)
        )
    return Section("frames", "5. Frames side by side", paragraphs=[text + "."], frame_grids=grids)


def failures_section(res: ReportResults) -> Section | None:
    bad = [r for r in res.runs if not r.ok]
    if not bad:
        return None
    t = TextTable(title="", headers=["run", "status", "reason"])
    for r in bad:
        t.add([r.key, r.status, r.reason or "no reason recorded"], "not-ok")
    logs = [(f"{r.key}: log tail", r.log_tail) for r in bad if r.log_tail.strip()]
    return Section("failures", "Runs that did not finish ok", tables=[t], logs=logs)


def conventions_section(res: ReportResults) -> Section:
    table = _pairs_table(*res.conventions.items(), headers=["what", "convention"])
    return Section("conventions", "Conventions", tables=[table])


STEPS_FIGURE = "insitu_steps"


def _g(x: float | None, fmt: str = ".3g") -> str:
    return NA if x is None else format(x, fmt)


def _part_cell(part: InSituPart | None) -> str:
    if part is None:
        return NA
    ci = f" [{part.ci[0]:.3g}-{part.ci[1]:.3g}]" if part.ci else ""
    return f"{_g(part.value)}{ci}: {part.word}"


def _part(r: InSituReading, prefix: str) -> InSituPart | None:
    return next((p for p in r.parts if p.against.startswith(prefix)), None)


def _runs_table(ins: InSituResults) -> TextTable:
    t = TextTable(
        title="Shadowed runs (never a timing baseline: the shadows run inside the steps they measure)",
        headers=["run", "attention (primary)", "shadows", "calls", "steps x blocks", "rows sampled", "cost"],
    )
    for info in ins.runs:
        dropped = {n: f"; dropped: no call measured, {why}" for n, why in info.dropped.items()}
        shadows = [f"{n} ({role}{dropped.get(n, '')})" for n, role in info.ops.items() if role != "primary"]
        kind = f"{info.primary}{' (exact)' if info.primary_exact else ''}"
        grid, rows = f"{len(info.steps)} x {len(info.blocks)}", f"{info.sample_rows} ({info.yardstick})"
        t.add([info.key, kind, ", ".join(shadows) or "none", info.calls, grid, rows, info.cost_text])
    return t


def _readings_table(ins: InSituResults) -> TextTable:
    tol = ins.tolerance
    base = ins.accepted_baseline
    absolute = [x for x in (f"max rel L1 {tol.max_rel_l1:g}" if tol.max_rel_l1 else "",
                            f"min cosine {tol.min_cosine:g}" if tol.min_cosine is not None else "") if x]  # fmt: skip
    t = TextTable(
        title="In-situ reading per candidate (95 % intervals over calls)",
        headers=[
            "candidate", "calls", "rel L1", "cosine", "worst rows (p1 cos)", "exact floor rel L1",
            f"vs floor (at most {tol.floor_ratio:g}x)",
            f"vs {base} (at most {tol.baseline_ratio:g}x)" if base else "vs accepted baseline",
            f"absolute ({', '.join(absolute)})" if absolute else "absolute", "reading",
        ],
    )  # fmt: skip
    for r in ins.readings:
        s = r.stats
        absolute_parts = [p for p in r.parts if p.against in ("max rel L1", "min cosine")]
        t.add(
            [
                r.candidate,
                f"{r.calls}" + (f" ({r.failed} not measured)" if r.failed else ""),
                _g(s.rel_l1, ".4g"),
                _g(s.cosine, ".6f"),
                _g(s.row_cos_p1, ".5f"),
                _g(r.floor.rel_l1 if r.floor else None, ".3g"),
                _part_cell(_part(r, "exact floor")),
                _part_cell(_part(r, "accepted baseline")) if base and base != r.candidate else
                ("the baseline" if base else "none named"),
                "; ".join(_part_cell(p) for p in absolute_parts) or "none given",
                r.word,
            ],
            "bad" if r.word == "outside" else "",
        )  # fmt: skip
    return t


def _steps_table(ins: InSituResults) -> TextTable | None:
    steps = sorted({s.step for r in ins.readings for s in r.per_step if s.step is not None})
    if not steps:
        return None
    t = TextTable(
        title="rel L1 per DiT step (pooled over blocks)",
        headers=["step", *[r.candidate for r in ins.readings], "exact floor"],
    )
    floor: dict = {}
    for s in (s for r in ins.readings for s in r.per_step if s.floor_rel_l1 is not None):
        floor.setdefault(s.step, s.floor_rel_l1)
    for step in steps:
        cells = [
            _g(next((s.rel_l1 for s in r.per_step if s.step == step), None), ".4g") for r in ins.readings
        ]
        t.add([step, *cells, _g(floor.get(step), ".3g")])
    return t


def _kinds_table(ins: InSituResults) -> TextTable | None:
    """Per call kind: a kernel that fails on short sequences (a token refiner's) shows here."""
    if not any(len(r.per_kind) > 1 for r in ins.readings):
        return None
    t = TextTable(
        title="rel L1 per call kind (pooled over steps and blocks)",
        headers=["candidate", "kind", "calls", "query length", "rel L1", "exact floor rel L1", "vs floor", "cosine",
                 "scale", "rel L1 unscaled"],
    )  # fmt: skip
    for r in ins.readings:
        for k in r.per_kind:
            t.add([r.candidate, k.kind, k.calls, f"{k.q_len:,}" if k.q_len else NA, _g(k.rel_l1, ".4g"),
                   _g(k.floor_rel_l1), f"{k.ratio:.3g}x" if k.ratio is not None else NA, _g(k.cosine, ".6f"),
                   _g(k.scale, ".3f"), _g(k.rel_l1_unscaled, ".4g")])  # fmt: skip
    return t


def _worst_table(ins: InSituResults) -> TextTable:
    t = TextTable(
        title="Worst calls per candidate (by rel L1)",
        headers=["candidate", "run", "rank", "call", "step", "block", "kind", "rel L1", "floor rel L1", "cosine",
                 "p1 row cos", "scale"],
    )  # fmt: skip
    for r in ins.readings:
        for w in r.worst:
            t.add([r.candidate, w.run, w.rank, w.call, _g(w.step, "d"), _g(w.block, "d"), w.kind,
                   f"{w.rel_l1:.4g}", _g(w.floor_rel_l1), f"{w.cosine:.6f}", f"{w.row_cos_p1:.5f}",
                   _g(w.scale, ".3f")])  # fmt: skip
    return t


def insitu_section(res: ReportResults, images: dict[str, str]) -> Section | None:
    ins = res.insitu
    if ins is None:
        return None
    sec = Section("insitu", "In-situ attention accuracy (shadows on the real calls)")
    sec.paragraphs.append(
        "Every attention call of a shadowed run was also computed by each shadow on copies of the same q/k/v (the "
        "run's own output is unchanged) and measured, with the run's own attention, against exact attention on "
        "sampled query rows. Pixel metrics against one reference stop measuring the kernel once exact runs "
        "diverge (a chaotic trajectory); this does not. " + ins.convention + "."
    )
    sec.tables = [_runs_table(ins)]
    if ins.readings:
        tables = (_readings_table(ins), _steps_table(ins), _kinds_table(ins), _worst_table(ins))
        sec.tables += [t for t in tables if t is not None]
    else:
        sec.paragraphs.append("No candidate was shadowed (only exact ops were measured).")
    sec.bullets += [r.text for r in ins.readings]
    sec.bullets += [f"finding: {f.text}" for r in ins.readings for f in r.findings]
    sec.bullets += [f.text for f in ins.fidelity]
    if ins.floor is not None and ins.floor.rel_l1 is not None:
        sec.bullets.append(
            f"exact floor ({', '.join(ins.floor_ops)}): rel L1 {ins.floor.rel_l1:.3g} over {ins.floor.calls} call(s)"
        )
    for info in ins.runs:
        if info.captured:
            sec.bullets.append(f"{info.key}: captured q/k/v for `harness kernels` (kernels.captured): " + ", ".join(
                f"runs/{info.key}/{c}" for c in info.captured))  # fmt: skip
        sec.bullets += [f"{info.key}: {n}" for n in info.notes]
    sec.bullets += ins.notes
    if STEPS_FIGURE in images:
        sec.images.append(("In-situ rel L1 per step, exact floor dashed", images[STEPS_FIGURE]))
    heatmaps = [r for r in ins.readings if r.heatmap in images]
    sec.images += [(f"{r.candidate}: rel L1 per step x block", images[r.heatmap]) for r in heatmaps]
    return sec


def schedules_section(res: ReportResults) -> Section | None:
    if not res.schedules:
        return None
    sec = Section("schedules", "Hybrid schedules")
    sec.paragraphs.append(
        "Arms that route attention by DiT step, beside the same backend on every step, fastest first. Routing is "
        "proven from the per-step call counts of every rank. The in-situ estimate is the candidate's in-situ rel L1 "
        "on the steps the schedule leaves to it and the exact floor's on the others (from a shadowed exact run)."
    )
    t = TextTable(
        title="",
        headers=["arm", "schedule", "exact steps", "routing", "s/step speed-up", "accuracy (verdict)",
                 "in-situ estimate (rel L1)", "pick"],
    )  # fmt: skip
    for row in res.schedules:
        exact = ", ".join(map(str, row.exact_steps)) or NA
        speed = f"{fmt_ratio(row.speedup)} ({row.speed_words})" if row.speedup else NA
        pick = "cheapest within tolerance" if row.cheapest else ""
        accuracy, estimate = row.accuracy or "not judged", _g(row.insitu_estimate, ".4g")
        cells = [row.arm, row.schedule, exact, row.routing, speed, accuracy, estimate, pick]
        t.add(cells, "bad" if row.routing == "NOT as scheduled" else "")
    sec.tables.append(t)
    sec.bullets += [f"{row.arm}: {row.routing_text}" for row in res.schedules if row.routing_text]
    if not any(row.cheapest for row in res.schedules):
        sec.bullets.append("no schedule is equivalent at the verdict's tolerance")
    return sec


def dose_figure(metric: str) -> str:
    """The figure of one reading's dose-response curves (assets/<name>.png)."""
    return f"dose_{metric}"


def dose_response_section(res: ReportResults, images: dict[str, str]) -> Section | None:
    dr = res.dose_response
    if dr is None:
        return None
    sec = Section("dose_response", "Dose-response: the per-call error the pipeline absorbs")
    sec.paragraphs.append(
        "Exact attention with a planted error of known per-call rel L1 (the dose) on every call, judged end "
        "to end like a candidate: error energy over the floor's per dose, with its interval. The tolerated "
        "dose is where the interval's upper bound reaches the tolerance (log-log between doses, bounds made "
        "monotone); an in-situ candidate's per-call rel L1 read on the noise curve predicts its end-to-end error."
    )
    if any(not c.site.everywhere for c in dr.curves):
        sec.paragraphs.append(
            "A curve 'on' a site (call kind, DiT step, block) has the error planted on those calls alone, the "
            "others exact. Curves planted on one step each, read at a candidate's per-step in-situ errors, "
            "predict a hybrid schedule's error (the steps' errors taken to add in energy; a hybrid arm that "
            "ran is set beside its prediction) and propose the fewest exact steps within the tolerance."
        )
    if dr.source:
        sec.paragraphs.append(f"The curves were measured in another campaign: {dr.source}.")
    t = TextTable(
        title="", headers=["shape", "reading", "dose (per-call rel L1)", "ratio to the floor's", "word"]
    )
    for c in dr.curves:
        for p in c.points:
            ci = f" ({_g(p.ratio_ci[0], '.3g')} to {_g(p.ratio_ci[1], '.3g')})" if p.ratio_ci else ""
            t.add([c.name, c.label, f"{p.dose:g}", f"{_g(p.ratio, '.3g')}x{ci}", p.word])
    sec.tables.append(t)
    for metric, label in dict.fromkeys((c.metric, c.label) for c in dr.curves):
        if dose_figure(metric) in images:
            caption = (
                f"Dose-response, {label}: ratio to the floor's per dose (interval shaded; a dose that left it "
                "equal on the bottom edge), tolerance dashed, tolerated dose dotted; in-situ candidates "
                "predicted (dark, with its interval) and measured (hollow red), a marker each"
            )
            sec.images.append((caption, images[dose_figure(metric)]))
    sec.bullets += [c.text for c in dr.curves] + dr.unread + dr.sensitivity + dr.statistics_text
    sec.bullets += [p.text for p in dr.predictions]
    sec.bullets += [s.text for s in dr.schedules]
    return sec


# The figures shown in a section, by its id: (figure name, caption), in the order shown.
SECTION_FIGURES = {
    "speed": [("step_times", "Seconds per DiT step")],
    "accuracy": [
        ("seeds", "Video PSNR per seed, noise floor as a band"),
        ("per_frame", "Per-frame PSNR and SSIM"),
        ("audio", "Audio waveform and spectrogram"),
    ],
    "latents": [("latents", "Latent PSNR per step")],
}


def build_sections(res: ReportResults, grids: list[FrameGrid], images: dict[str, str]) -> list[Section]:
    """All sections in reading order; ``images`` maps figure names to asset paths."""
    secs = [overview_section(res), speed_section(res), accuracy_section(res), latent_section(res)]
    secs += [stats_section(res), attention_section(res), frames_section(res, grids), verdict_section(res)]
    secs += [insitu_section(res, images), dose_response_section(res, images), schedules_section(res)]
    secs += [failures_section(res), conventions_section(res)]
    for sec in (sec for sec in secs if sec is not None):
        sec.images += [(caption, images[n]) for n, caption in SECTION_FIGURES.get(sec.id, []) if n in images]
    return [sec for sec in secs if sec is not None]
