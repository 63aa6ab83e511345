"""The in-situ section (each shadowed candidate's error on the real calls, against the exact floor,
the accepted baseline and an absolute tolerance; per step, per block, the worst calls; the
shadows' cost), the hybrid-schedules section, and the figures they show."""

from __future__ import annotations

from harness.analysis.model import InSituPart, InSituReading, InSituResults, ReportResults
from harness.number_format import NA, fmt_ratio
from harness.report.cells import Section
from harness.text_table import TextTable

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
