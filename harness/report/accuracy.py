"""The report's judgement sections (accuracy, latent PSNR, global statistics, verdicts) and how every part
of the report names a run's role (``role_text``)."""

from __future__ import annotations

from types import SimpleNamespace

from harness.analysis.model import ReportResults, Verdict, is_shadowed_copy
from harness.compare.pairwise import Comparison
from harness.compare.summary import RunSummary, stat_fields
from harness.metrics.metric import Metric, accuracy_metrics, table_metrics
from harness.number_format import NA, fmt_db, fmt_stat, ratio_text
from harness.report.cells import ROLE_LABEL, Section, row_css, spread_text
from harness.rule import IDENTICAL, INCOMPLETE, INVALID, OUTSIDE, verdict_rule_text
from harness.text_table import TextTable

# A shadowed run of the exact trajectory (its verdict's role "insitu"): its output is the reference's,
# so it is no candidate; the summary, the tables, the figures and the players all call it this.
SHADOWED_COPY = "shadowed copy"


def role_text(res: ReportResults, arm: str, role: str) -> str:
    """An arm's role as every part of the report names it (``role`` is its runs' role)."""
    if is_shadowed_copy(res, arm):
        return SHADOWED_COPY
    return ROLE_LABEL.get(role, role)


def run_label(res: ReportResults, key: str, arm: str, role: str) -> str:
    """A run (or arm) with its role where it is a floor or copy: 'x (noise floor)', 'x (shadowed copy)'."""
    shown = role_text(res, arm, role)
    return key + (f" ({shown})" if shown in (ROLE_LABEL["noise_floor"], SHADOWED_COPY) else "")


# The per-run table's columns: the metric registry's in its order, and two of the run's own among
# them (placed by the same order: identical frames after the PSNR columns, bitwise last).
IDENTICAL_FRAMES, BITWISE = "identical frames", "bitwise"
_RUN_COLUMNS = ((25, IDENTICAL_FRAMES), (1_000, BITWISE))


def acc_columns() -> list[Metric | str]:
    placed = [(m.order, m) for m in table_metrics()] + list(_RUN_COLUMNS)
    return [col for _, col in sorted(placed, key=lambda p: p[0])]


def acc_headers() -> list[str]:
    return [col if isinstance(col, str) else col.column for col in acc_columns()]


def _acc_cells(c: Comparison | None, r: RunSummary, reference: bool) -> list[str]:
    columns = acc_columns()
    n = len(columns)
    if reference:
        return ["reference"] * n
    if c is None or c.video is None:
        why = "not compared" if c is None else "not measured"
        if not r.ok:
            why += f": {r.status}" + (f" ({r.reason})" if r.reason and c is not None else "")
        return [why] + [""] * (n - 1)
    v = c.video
    bitwise = f"video {'yes' if c.bitwise.video else 'no'}, audio " + (
        NA if c.bitwise.audio is None else ("yes" if c.bitwise.audio else "no")
    )

    def cell(col: Metric | str) -> str:
        if col == IDENTICAL_FRAMES:
            return f"{v.identical_frames} of {v.frames}"
        if isinstance(col, str):
            return bitwise
        record = col.record(c)
        note = col.note(record) if col.note is not None and record is not None else ""
        return col.cell(record) + note

    return [cell(col) for col in columns]


def _floor_band(res: ReportResults, key: str, fmt) -> str:
    band = res.floor.band.get(key) if res.floor else None
    if not band:
        return NA
    lo, med, hi = band
    return fmt(lo) if lo == hi else f"{fmt(lo)} / {fmt(med)} / {fmt(hi)}"


def _codec_cells(res: ReportResults) -> list[str]:
    cf = res.codec_floor
    # Its row names the video figures as a comparison's video record does, the two audio ones apart.
    records = {
        "video": cf,
        "audio": SimpleNamespace(snr_db=cf.audio_snr, logmel_cosine=cf.audio_logmel_cosine),
    }

    def cell(col: Metric | str) -> str:
        if isinstance(col, str) or not hasattr(records[col.modality], col.field):
            return ""  # not measured on the codec
        return col.cell(records[col.modality])

    return [cell(col) for col in acc_columns()]


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
    t = TextTable(title="Per run", headers=["run", "role", *acc_headers()])
    for r in res.primary_runs:
        c = res.comparison_for(r.key)
        role = role_text(res, r.arm, r.role)
        role += f" ({r.perturbation})" if r.role == "noise_floor" and r.perturbation else ""
        t.add([r.key, role, *_acc_cells(c, r, r.arm == res.reference_arm)], row_css(r))
    if res.codec_floor is not None:
        cf = res.codec_floor
        t.add([f"codec floor ({cf.key})", f"codec, {cf.method}", *_codec_cells(res)], "band")
        t.notes += [n for n in (cf.text, f"decoding: {cf.decode}" if cf.decode else "") if n]
    sec.tables.append(t)
    if res.floor is not None:
        band = TextTable(
            title="Noise floor band: min / median / max over perturbations x seeds",
            headers=["floor runs", "PSNR of their pooled MSE", *[m.label for m in accuracy_metrics()]],
        )
        cells = [_floor_band(res, m.key, m.fmt) for m in accuracy_metrics()]
        band.add([str(len(res.floor.keys)), fmt_db(res.floor.psnr_pooled), *cells], "noise-floor")
        band.notes.append(res.floor.text)
        sec.tables.insert(0, band)
    if res.multi_seed:
        agg = TextTable(
            title="Per arm over seeds: mean [min..max]",
            headers=["arm", "role", "seeds measured", *[m.label for m in accuracy_metrics()]],
        )
        for a in (a for a in res.arms if a.arm != res.reference_arm):
            m = a.metrics
            cells = [spread_text(m.get(x.key), x.fmt) for x in accuracy_metrics()]
            measured = m["psnr"].n if "psnr" in m else 0
            agg.add(
                [a.arm, role_text(res, a.arm, a.role), f"{measured}/{len(a.seeds)}", *cells],
                "noise-floor" if a.role == "noise_floor" else "",
            )
        sec.tables.insert(1 if res.floor is not None else 0, agg)
    for c in res.comparisons:
        sec.bullets += [f"{c.b.key}: {n}" for n in c.notes]
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
    t = TextTable(title="", headers=["step", *[run_label(res, s.key, s.arm, s.role) for s in res.latents]])

    def cell(p) -> str:
        if p is None or not p.parts:
            return NA if p is None else fmt_db(p.psnr)
        return f"{fmt_db(p.psnr)} (" + ", ".join(f"{n} {fmt_db(v)}" for n, v in sorted(p.parts.items())) + ")"

    for step in steps:
        t.add([str(step), *(cell(next((p for p in s.points if p.step == step), None)) for s in res.latents)])
    sec.tables.append(t)
    return sec


def stats_section(res: ReportResults) -> Section:
    sec = Section("stats", "3. Global statistics")
    sec.paragraphs.append("Convention: " + res.conventions.get("stats", ""))
    names = list(stat_fields(None))
    sec.paragraphs.append("Rule: " + res.conventions.get("stats_tolerance", ""))
    t = TextTable(title="Every run", headers=["run", "role", "frames", "size", *names])
    for r in res.primary_runs:
        s = r.stats
        vals = stat_fields(s)
        if s is None:
            why = "not measured" + (
                f" ({r.status})" if not r.ok else (" (no output)" if r.output is None else "")
            )
            t.add([r.key, role_text(res, r.arm, r.role), why, "", *[""] * len(names)], row_css(r))
            continue
        cells = [s.frames, f"{s.width}x{s.height}", *[fmt_stat(n, vals[n]) for n in names]]
        t.add([r.key, role_text(res, r.arm, r.role), *cells], row_css(r))
    # The intervals candidates are judged against, per seed (every candidate of a seed shares them).
    first = next((v for v in res.verdicts if v.stats), None)
    for seed in res.seeds or [None]:
        checks = {c.stat: c for c in (first.stats if first else []) if c.seed == seed and c.lo is not None}
        if not checks:
            continue
        cells = [
            f"{fmt_stat(n, checks[n].lo)}..{fmt_stat(n, checks[n].hi)}" if n in checks else NA for n in names
        ]
        exact = max(c.exact_runs for c in checks.values())
        label = f"prediction interval: {exact} exact run(s){f', seed {seed}' if res.multi_seed else ''}"
        t.add([label, "band", "", "", *cells], "band")
    sec.tables.append(t)
    return sec


def _ci(ci: list[float] | None) -> str:
    return f" ({ci[0]:.3g}-{ci[1]:.3g})" if ci else ""


def _energy_cell(v: Verdict) -> str:
    if v.word == IDENTICAL:
        n = len(v.identical_seeds)
        return f"no error: output bitwise the reference's on {n} of {len(v.per_seed) or n} seed(s)"
    if not v.energy:
        chaotic = any(sv.regime.get("video") == "chaotic" for sv in v.per_seed)
        return "pixel metrics uninformative (chaotic floor)" if chaotic else "not judged"
    parts = [f"{r.label} {ratio_text(r.ratio)}{_ci(r.ratio_ci)} {r.word}" for r in v.energy]
    if v.insitu is not None and v.insitu.word:  # the second reading, beside the end-to-end ones
        parts.append(f"in situ {ratio_text(v.insitu.ratio)}{_ci(v.insitu.ratio_ci)} {v.insitu.word}")
    return "; ".join(parts)


def _seed_cell(v: Verdict) -> str:
    return "; ".join(
        f"{sv.seed}: {'/'.join(sv.regime.values())} {ratio_text(sv.ratio)} {sv.word}" for sv in v.per_seed
    )


def verdict_section(res: ReportResults) -> Section:
    sec = Section("verdicts", "6. Verdicts")
    rules = res.rules
    half = rules.chaotic_band_db / 2
    sec.paragraphs.append(
        "Each candidate is judged seed by seed against the noise floor of that seed (every exact perturbation of the "
        "reference with that seed), per modality: video by video MSE and 1 - SSIM where the seed's floor PSNR is at "
        f"least {rules.chaotic_below_db + half:g} dB (chaotic below {rules.chaotic_below_db - half:g} dB, both kinds "
        "of evidence between); audio by its waveform error energy where the floor's waveform correlation is at least "
        f"{rules.audio_coherent_min_corr:g}, else by the mel spectral error. Each ratio carries its "
        f"{100 * (1 - rules.alpha):.10g}% interval (the floor runs' spread and the seeds'); the seeds combine by "
        "geometric mean, every seed required to pass. " + verdict_rule_text(rules.tolerance)
    )
    t = TextTable(
        title="",
        headers=["arm", "verdict", "error energy vs floor (interval)", "per seed", "statistics", "attention"],
    )
    for v in res.verdicts:
        bad = v.word in (OUTSIDE, INVALID, INCOMPLETE) or v.attention_ok is False or bool(v.warnings)
        energy = _energy_cell(v) if v.measured else "not measured"
        attention = {True: "valid", False: "INVALID", None: "not verified"}[v.attention_ok]
        cells = [v.arm, v.word, energy, _seed_cell(v), v.stats_word or "not judged", attention]
        t.add(cells, "bad" if bad else "")
    if res.verdicts:
        sec.tables.append(t)
    else:
        sec.paragraphs.append("No candidate arm in this campaign.")
    sec.verdicts = list(res.verdicts)
    sec.bullets.append(res.exact_attention)
    sec.bullets.append("statistics rule: " + res.conventions.get("stats_tolerance", ""))
    return sec
