"""The report as sections of string tables: one view rendered by both markdown.py and html.py, so
the pull-request tables and the CI page always say the same thing. This module: the campaign
overview, speed, attention calls, frames, failures, conventions and the reading order; the
accuracy, statistics and verdict sections are ``report.accuracy``'s."""

from __future__ import annotations

from harness.analysis.model import ArmAggregate, FrameGrid, ReportResults, worst_frames
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
from harness.report.insitu import insitu_section, schedules_section
from harness.store import EXTRAPOLATED
from harness.text_table import TextTable


def _vs_ref_test(t: SpeedTest | None, a: ArmAggregate) -> str:
    """The speed-up with its interval and word; a floor arm's timing is marked as no baseline."""
    if t is None or not t.measured:
        return NA
    return t.words if a.timing_baseline else f"{a.timing_label}; {t.words}"


def _pairs_table(*rows: tuple[str, str], title: str = "", headers: list[str] | None = None) -> TextTable:
    """A two-column table of (name, value) rows."""
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
        "own process, in interleaved order (A B C A B C ...). Per arm: mean ± sd (n) over runs (repeats x seeds). "
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
        ref = a.arm == res.reference_arm
        role = role_text(res, a.arm, a.role)
        if not a.timing_baseline:
            role += f" ({a.timing_label}: {a.timing_note})"
        steps = spread_text(m["dit_steps"], lambda x: f"{x:g}")
        times = [mean_sd_cell(m[k]) for k in ("s_per_step", "step_1", "pipeline_total_s")]
        tests = [
            "reference" if ref else _vs_ref_test(a.speed.get(k), a)
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
        if r.arm == res.reference_arm:
            rs = rt = "1 (reference)"
        else:
            rs = _ratio_cell(ref.s_per_step if ref else None, r.s_per_step)
            rt = _ratio_cell(ref.pipeline_total_s if ref else None, r.pipeline_total_s)
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
    """Per DiT layer, for arms whose runs timed their blocks; the released depth extrapolated."""
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
    """One run's speed-up: the reference's time over the run's."""
    return fmt_ratio(ref / run) if ref is not None and run else NA


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
            valid = "unknown" if r.valid is None else str(r.valid)
            t.add([r.key, r.attn_type or NA, NA, why, "", "", "", valid], row_css(r))
            continue
        for rank, rc in sorted(r.attn.ranks.items()):
            calls = ", ".join(f"{k}: {n}" for k, n in sorted(rc.calls.items())) or "0"
            fallbacks = ", ".join(f"{k}: {n}" for k, n in sorted(rc.fallbacks.items()) if n) or "0"
            direct = rc.direct_check.reading() if rc.direct_check else "not checked"
            cells = [r.key, r.attn.requested, rank, calls, fallbacks, "; ".join(rc.errors), direct]
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
    more = (insitu_section(res, images), schedules_section(res), failures_section(res))
    return secs + [s for s in more if s is not None] + [conventions_section(res)]
