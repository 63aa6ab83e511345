"""Every sentence said of a verdict, written once and stored in results.json so that report.md, pr.md, the
page and the job summary say it in the same words, and the review (``Reading``) they are read off."""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence

from harness.analysis.model import (
    INSITU_WHAT,
    Finding,
    FloorPoint,
    Reading,
    ReportResults,
    SpeedTest,
    Summary,
    Terms,
    Verdict,
    is_emulator,
)
from harness.analysis.verdict_model import agreeing, clearest, deciding_interval
from harness.compare.significance import fmt_speedup_value
from harness.emulator_provenance import Provenance, provenance_of
from harness.metrics.metric import energy_metrics, judged_energies
from harness.number_format import NA, fmt_speedup, level_text, range_text, ratio_text, ratio_value
from harness.rule import IDENTICAL, INCOMPLETE, INCONCLUSIVE, INVALID, NOT_RUN, OUTSIDE, WITHIN, known
from harness.tiny_ref2av.config import PRESETS


def terms(value: float, ci: Sequence[float] | None, alpha: float, word: str = "") -> Terms:
    """A figure with its interval (where it has one) at ``1 - alpha`` and its word."""
    ci = ci or None
    return Terms(value=float(value), ci=ci, ci_what=f"{100 * (1 - alpha):.10g} % CI" if ci else "", word=word)


def insitu_terms(v: Verdict) -> Terms | None:
    """The verdict's own in-situ reading (ratio to the exact floor's, its 95 % interval and word), if any."""
    got = v.insitu
    if got is None or not got.word:
        return None
    return terms(got.ratio, got.ratio_ci, 0.05, got.word) if got.ratio is not None else Terms(word=got.word)


def verdict_terms(v: Verdict) -> tuple[str, Terms, str]:
    """(word, ratio with its interval, what it is) of the reading that decides a verdict."""
    word = known(v.word)
    if word == IDENTICAL:
        return word, Terms(), ""
    insitu = insitu_terms(v)
    by_insitu = v.decided_by == "insitu" or v.ratio_metric == "insitu"
    if by_insitu and insitu is not None and insitu.value is not None:
        return word, insitu, INSITU_WHAT
    if v.ratio is None or v.ratio_metric == "insitu":
        return word, Terms(), ""
    r = next((r for r in v.energy if r.metric == v.ratio_metric), None)
    return (word, *deciding_terms(r, word)) if r is not None else (word, Terms(value=v.ratio), "")


def deciding_terms(r, word: str, said: str = "") -> tuple[Terms, str]:  # deciding_interval, as terms
    ratio, ci, alpha, what = deciding_interval(r, word)
    return terms(ratio, ci, alpha, said), f"{what} / the floor's"


def end_to_end_terms(v: Verdict) -> tuple[Terms, str]:
    """The decoded output's reading alone (everything but in situ): its word and deciding ratio."""
    word = v.end_to_end_word or ("" if v.decided_by == "insitu" else v.word)
    r = next((r for r in v.energy if r.metric == v.decided_by), None)
    if r is None:
        ratios = [r for r in v.energy if r.ratio is not None]
        same = [r for r in ratios if r.word == word] or ratios
        r = clearest(agreeing(same, word), word) if same else None
    if r is None or r.ratio is None:
        return Terms(word=word), ""
    return deciding_terms(r, word, word)


def speed_terms(t: SpeedTest | None) -> Terms:
    """Speed-up (reference time / arm time) with its interval and the test's word."""
    if t is None or not t.measured or t.speedup is None:
        return Terms(word="no timing")
    return terms(t.speedup, t.speedup_ci, t.alpha, t.word)


NO_SPEED = "no speed-up: an emulator's timing is no kernel's"


LINE = 200  # a summary line's most characters: each is read at a glance; the sections below hold the rest


def fit(text: str, width: int = LINE) -> str:
    """``text`` cut at a word to ``width`` characters, ' ...' marking the cut."""
    if len(text) <= width:
        return text
    cut = text[: width - 4].rsplit(" ", 1)[0] if " " in text[: width - 4] else text[: width - 4]
    return cut.rstrip(" ;,:") + " ..."


def plain_words(text: str, width: int) -> str:
    """Text read from a record as words on one line (a control or format character a space), ``fit``."""
    flat = "".join(" " if unicodedata.category(c).startswith("C") else c for c in str(text))
    return fit(" ".join(flat.split()), width)


def emulator_provenance(res: ReportResults, arm: str) -> Provenance | None:
    """The first provenance the arm's runs' attention records carry (None: none)."""
    found = (provenance_of(r.attn.backend) for r in res.runs if r.arm == arm and r.attn is not None)
    return next((p for p in found if p is not None), None)


BADGE_WIDTH = 80  # the badge's most characters: it stands after a name in a line read at a glance


def emulator_badge(res: ReportResults, arm: str) -> str:
    """The words after an emulator's name: its provenance's badge, else 'emulator'; '' for no emulator."""
    if not is_emulator(res, arm):
        return ""
    found = emulator_provenance(res, arm)
    return plain_words(found.badge(), BADGE_WIDTH) if found is not None else "emulator"


def emulator_detail(res: ReportResults, arm: str) -> str:
    """'arm: emulator of <kernel>, <fidelity>' ('' where no provenance is recorded)."""
    found = emulator_provenance(res, arm) if is_emulator(res, arm) else None
    if found is None:
        return ""
    fidelity = found.fidelity.text()
    if found.changed:  # the variant's figures no longer apply
        fidelity = f"not measured with {', '.join(found.changed)} changed (the variant: {fidelity})"
    return plain_words(f"{arm}: emulator of {found.kernel.text() or found.kernel.short}, {fidelity}", 600)


def floor_note(res: ReportResults, r: Reading) -> str:
    """That a low-precision kernel cannot read within an fp32 floor (float32 on a CPU, scored lossless)."""
    block, gpu = res.scenario.get("builtin") or {}, bool(res.env.get("torch", {}).get("gpus"))
    cfg = PRESETS.get(block.get("preset", "cpu"), PRESETS["cpu"]).model_dump() | (block.get("params") or {})
    cfg |= res.scenario.get("profiles", {}).get(res.profile) or {}
    floor = (cfg["dtype"], cfg["device"], gpu, res.runner, res.pixel_source[:8])  # an mp4's is the codec's
    if floor != ("float32", "cpu", False, "builtin", "lossless") or r.word not in (OUTSIDE, INCONCLUSIVE):
        return ""
    base = res.rules.accepted_baseline if res.rules.accepted_baseline != r.arm else None
    ask = "the accepted baseline answers" if base else "an accepted_baseline would answer"
    return (
        "the floor is fp32 rounding (float32 on the CPU, lossless): no bf16, FP8 or INT8 kernel can read "
        f'{WITHIN} against it; {ask} "as good as {base or "it"}?" instead'
    )


def readings(res: ReportResults) -> list[Reading]:
    """One reading per candidate verdict, in the report's order."""
    base = res.rules.accepted_baseline  # the scenario names it (top level or verdict block)
    out = []
    for v in (v for v in res.verdicts if v.role == "candidate"):
        word, ratio, what = verdict_terms(v)
        e2e, e2e_what = end_to_end_terms(v)
        agg = res.arm(v.arm)
        tests = agg.speed if agg is not None else {}
        first = next((r for r in res.runs if r.arm == v.arm), None)
        text = v.text or v.summary
        regimes = {sv.regime.get("video", "") for sv in v.per_seed}  # one word where the seeds agree
        if word == NOT_RUN and first is not None:
            text = first.status + (f": {first.reason}" if first.reason else "")
        out.append(
            Reading(
                **v.model_dump(include={"arm", "tolerance", "decided_by", "identical_seeds", "warnings"}),
                word=word,
                ratio=ratio,
                ratio_what=what,
                regime=regimes.pop() if len(regimes) == 1 else ("mixed" if regimes else "not measured"),
                step=speed_terms(tests.get("s_per_step")),
                total=speed_terms(tests.get("pipeline_total_s")),
                baseline=v.arm == base,
                text=text,
                end_to_end=e2e,
                end_to_end_what=e2e_what,
                insitu=insitu_terms(v) if word != NOT_RUN else None,
                seeds=len({sv.seed for sv in v.per_seed}) or len(v.seeds) or v.measured,
                missing=list(dict.fromkeys(v.missing)),
                attention=v.attention if v.attention_ok is False else "",
                emulator=is_emulator(res, v.arm),
                badge=emulator_badge(res, v.arm),
                emulator_detail=emulator_detail(res, v.arm),
            )
        )
    return out


def floor_points(res: ReportResults) -> list[FloorPoint]:
    """The noise-floor arms on the speed figure's axes, on the metric the verdicts judge most."""
    judged = judged_energies()
    checks = [r for v in res.verdicts for r in v.energy if r.metric in judged]
    if not checks:
        return []
    names = [c.metric for c in checks]
    metric = max(set(names), key=lambda m: (names.count(m), m == "video_mse"))
    floors = [s.floor for s in next(c for c in checks if c.metric == metric).per_seed if s.floor]
    pooled = sum(floors) / len(floors) if floors else None
    out = []
    m = energy_metrics()[metric]  # its error energy, read off each comparison as the verdict reads it
    for arm in res.noise_floor_arms:
        vals = [(m.energy_value(c), m.weight(c)) for c in res.comparisons if c.b.arm == arm and c.measured]
        vals = [(x, w) for x, w in vals if x is not None and math.isfinite(x)]
        if not vals or not pooled:
            continue
        energy = sum(x * w for x, w in vals) / sum(w for _, w in vals)
        agg = res.arm(arm)
        sp = speed_terms(agg.speed.get("s_per_step") if agg is not None else None)
        out.append(FloorPoint(arm=arm, speedup=sp, ratio=energy / pooled, metric=metric))
    return out


def interval_text(t: Terms, fmt, what: str = "") -> str:
    """' (95 % CI 0.31 to 1.05[; what])', or ' (what)' without an interval, or ''."""
    bits = [f"{t.ci_what} {range_text(t.ci[0], t.ci[1], lambda x: fmt(x).removesuffix('x'))}"] if t.ci else []
    bits += [what] if what else []
    return f" ({'; '.join(bits)})" if bits else ""


def floor_ratio(r: Reading, t: Terms, what: str) -> str:
    """'27.5x the floor's (range over seeds 12.1 to 40.2; video MSE), tolerance 2x', or no ratio."""
    tolerance = f"tolerance {r.tolerance:g}x"
    if t.value is None:
        return f"no error ratio ({r.regime}), {tolerance}"
    return f"{ratio_text(t.value)} the floor's{interval_text(t, ratio_text, what)}, {tolerance}"


def ratio_line(r: Reading) -> str:
    """The deciding ratio (``floor_ratio``); an identical reading's seeds instead (it has no ratio)."""
    if r.word == IDENTICAL:
        return identical_line(r)
    return floor_ratio(
        r, r.ratio, r.ratio_what.removesuffix(" / the floor's").removesuffix(" / the exact floor's")
    )


def identical_line(r: Reading) -> str:
    """'identical on 2 of 2 seed(s): output bitwise equal to the reference's' (every seed), else which."""
    n, of = len(r.identical_seeds), r.seeds or len(r.identical_seeds)
    if r.word == IDENTICAL:
        return f"{IDENTICAL} on {n} of {of} seed(s): output bitwise equal to the reference's"
    return f"{IDENTICAL} on seed(s) {', '.join(map(str, r.identical_seeds))} ({n} of {of}); the others judged"


def accuracy_lines(r: Reading, bare: bool = False) -> list[str]:
    """A badge's accuracy lines: both readings where there is an in-situ one (the deciding one first):
    'end to end: outside 3.07x the floor's (...), tolerance 2x', 'in situ: outside 3.20x the exact floor's'."""
    if r.word == IDENTICAL:
        return [identical_line(r)]
    if r.insitu is not None:
        t, i = r.end_to_end, r.insitu
        ratio = floor_ratio(r, t, r.end_to_end_what.removesuffix(" / the floor's"))
        ins = f" {ratio_text(i.value)} the exact floor's{interval_text(i, ratio_text)}"  # None: no ratio
        both = [
            f"end to end: {t.word or NA}{': ' if t.value is None else ' '}{ratio}",
            f"in situ: {i.word or NA}{ins if i.value is not None else ': no ratio'}",
        ]
        lines = both[::-1] if r.decided_by == "insitu" else both
    else:
        lines = [ratio_line(r) if bare else f"error: {ratio_line(r)}"]
    if r.identical_seeds:
        lines.append(identical_line(r))
    return lines


def speed_cell(t: Terms) -> str:
    """'0.57x (95 % CI 0.31 to 1.05): no significant difference', or 'no timing'."""
    if t.value is None:
        return t.word or "no timing"
    return f"{fmt_speedup(t.value)}{interval_text(t, fmt_speedup_value)}: {t.word or NA}"


def speed_line(what: str, t: Terms) -> str:
    """'DiT s/step speed-up 0.57x (95 % CI 0.31 to 1.05): no significant difference'."""
    return f"{what}: {speed_cell(t)}" if t.value is None else f"{what} speed-up {speed_cell(t)}"


def _range(t: Terms, fmt) -> str:
    return f" ({range_text(t.ci[0], t.ci[1], fmt)})" if t.ci is not None else ""


def accuracy_words(r: Reading) -> str:
    """The word that decides, with its ratio and interval; the other reading's word beside it."""
    if r.word == IDENTICAL:
        return identical_line(r)
    if r.word == INVALID:  # the attention the arm asked for did not run; what was measured, beside it
        why = r.attention.split(": ", 1)[0] or "attention calls not served by the requested op"
        measured = (
            f"; as measured {ratio_text(r.ratio.value)} the floor's" if r.ratio.value is not None else ""
        )
        return f"{INVALID}: {why}{measured}"
    if r.word == INCOMPLETE and r.missing:
        more = f" and {len(r.missing) - 1} more" if len(r.missing) > 1 else ""
        return f"{INCOMPLETE}: missing {r.missing[0]}{more}"
    t = r.ratio
    if t.value is None:  # no reading to quote (an older harness's verdict): the verdict's own line
        why = r.text.split("; WARNING: ")[0] if r.text else f"no error ratio ({r.regime})"
        return why if why.startswith(r.word) else f"{r.word}: {why}"
    if r.ratio_what == INSITU_WHAT:  # the other reading's word (and ratio) beside the deciding one
        head = f"{r.word} in situ: {ratio_text(t.value)} the exact floor's{_range(t, ratio_value)}"
        other, other_name = r.end_to_end, "end to end"
    else:
        what = r.ratio_what.removesuffix(" / the floor's")
        inner = f"{range_text(t.ci[0], t.ci[1], ratio_value)}; {what}" if t.ci is not None else what
        head = f"{r.word}: {ratio_text(t.value)} the floor's ({inner}), tolerance {r.tolerance:g}x"
        other, other_name = r.insitu, "in situ"
    if other is not None and other.word:
        other_ratio = f" {ratio_text(other.value)}" if other.value is not None else ""
        head += f"; {other_name} {other.word}{other_ratio}"
    if r.identical_seeds:
        head += f"; {IDENTICAL} on seed(s) {', '.join(map(str, r.identical_seeds))}"
    return head


def speed_words(t: Terms, emulator: bool) -> str:
    """The DiT s/step speed-up with its interval and word, or why there is none."""
    if emulator:
        return NO_SPEED
    if t.value is None:
        return f"DiT s/step: {t.word or 'no timing'}"
    bound = lambda x: fmt_speedup_value(x).removesuffix("x")  # noqa: E731  three figures, as the speed section
    return f"DiT s/step speed-up {fmt_speedup(t.value)}{_range(t, bound)}: {t.word or NA}"


def candidate_line(r: Reading) -> str:
    """'arm: <word>: <ratio> the floor's (...), tolerance 2x; DiT s/step speed-up ...', fitted."""
    warned = f"; {len(r.warnings)} WARNING(s) below" if r.warnings else ""
    rest = f"; {speed_words(r.step, r.emulator)}{warned}"
    # the accuracy words give way first: the speed-up and the warning count always show
    return fit(f"{r.name}: {fit(accuracy_words(r), max(40, LINE - len(r.name) - 2 - len(rest)))}{rest}")


def warning_text(arm: str, warning: str) -> str:
    """A warning led by its arm's name (once: most warnings name it already)."""
    return warning if warning.startswith(f"{arm}:") else f"{arm}: {warning}"


def interval_levels(found: list[Reading], alpha: float) -> str:
    """The confidence of the summary's intervals, said once, or each level where they differ."""
    levels: dict[str, str] = {}
    for r in found:
        shown = [("speed-ups", r.step), ("in situ", r.insitu), ("end to end", r.end_to_end)]
        for what, t in shown + ([("end to end", r.ratio)] if r.ratio_what != INSITU_WHAT else []):
            if t is not None and t.ci is not None and t.ci_what:
                levels.setdefault(what, t.ci_what.removesuffix(" CI"))
    if not levels:
        return ""
    if len(set(levels.values())) == 1:
        return f"intervals: {next(iter(levels.values()))} confidence"
    per = ", ".join(f"{what} {level}" for what, level in levels.items())
    note = f" per modality (together at {level_text(alpha)})" if "end to end" in levels else ""
    return f"intervals: {per}{note}"


def scored_on(res: ReportResults) -> str:
    """What the pixel and audio metrics were taken on, in one line: the file a reader must know."""
    if res.pixel_source.startswith("lossless"):
        return "scored on lossless copies (output_lossless.mkv): the kernel's error, not the codec's"
    return (
        "scored on output.mp4 (H.264/AAC): the codec's error is in every reading "
        "(the builtin and diffusers runners' lossless copies take it out)"
    )


def summary_lines(res: ReportResults) -> list[str]:
    """The campaign line, a line per candidate, copies, findings, warnings and the intervals' confidence."""
    cands = [v for v in res.verdicts if v.role == "candidate"]
    head = (
        f"{res.scenario_name} / {res.campaign_id}: reference {res.reference_arm or 'none'}, "
        f"noise floor {', '.join(res.noise_floor_arms) or 'none'}, seeds {', '.join(map(str, res.seeds)) or 'n/a'}, "
        f"{len(cands)} candidate(s)"
    )
    lines = [fit(head)]
    found = res.review
    reading = {r.arm: r for r in found}
    if res.errors:  # missing or unreadable data: said first, so that no reader takes the rest as whole
        lines.append(fit(res.summary.incomplete))
    lines += [scored_on(res)] if res.pixel_source else []
    for v in cands:
        r = reading.get(v.arm)
        lines.append(r.line if r is not None else fit(f"{v.arm}: {v.word}"))
    lines += [insitu_copy_line(res, v) for v in res.verdicts if v.role == "insitu"]
    lines += [fit(f"{r.arm}: {r.note}") for r in found if r.word not in (NOT_RUN, INVALID) and r.note]
    lines += res.summary.findings
    lines += [fit(f"WARNING: {warning_text(r.arm, w)}") for r in found for w in r.warnings]
    return lines + res.summary.intervals


def finding_text(f: Finding) -> str:
    """A finding, short (the in-situ section gives it whole)."""
    scaled = f"; outputs scaled by {f.scale:.2f}" if f.scale is not None and abs(f.scale - 1) >= 0.02 else ""
    where = " ".join(x for x in (f"{f.count} {f.what}", f.group, f"({f.facts})" if f.facts else "") if x)
    if f.ratio is None:
        return f"{f.candidate}: rel L1 {f.rel_l1:.3g} on {where}{scaled}"
    ci = f" ({range_text(*f.ratio_ci)})" if f.ratio_ci else ""
    return f"{f.candidate}: error {ratio_text(f.ratio)} the other {f.what}'{ci} on {where}{scaled}"


def insitu_copy_line(res: ReportResults, v) -> str:
    """A shadowed copy of the exact trajectory: no candidate, its output bitwise the reference's or not."""
    cmps = [
        c for c in res.comparisons if c.b.arm == v.arm and c.a.arm == res.reference_arm and c.b.repeat == 1
    ]
    compared = [c for c in cmps if c.measured]  # a pair with media missing is no evidence either way
    same = [c for c in compared if c.bitwise.identical]
    info = next((i for i in (res.insitu.runs if res.insitu else []) if i.arm == v.arm), None)
    shadows = [name for name, role in (info.ops if info else {}).items() if role != "primary"]
    unmeasured = len(cmps) - len(compared)
    not_compared = f", not compared on {unmeasured}" if unmeasured else ""
    same_text = "output not compared"
    if compared:
        same_text = f"output bitwise the reference's on {len(same)} of {len(compared)} seed(s){not_compared}"
    return fit(
        f"{v.arm} (shadowed copy, not a candidate): {same_text}; shadows {', '.join(shadows) or 'none'}; "
        "see the in-situ section"
    )


def arm_problems(res: ReportResults) -> list[str]:
    """A line per run that did not end ok (nor skipped) and is not among the errors yet."""
    out = []
    for r in res.runs:
        if r.status in ("ok", "skipped") or any(e.startswith(f"{r.key}: ") for e in res.errors):
            continue
        if r.status in ("pending", "running") and res.executor == "slurm":
            why = f"still {r.status} (its Slurm job has not ended; report again when it has)"
        elif r.status in ("pending", "running"):
            why = (f"left {r.status} by a harness run that is gone (killed, or its machine stopped; "
                   "the same harness run resumes it)")  # fmt: skip
        else:
            why = f"ended {r.status}, not ok"
        out.append(f"{r.key}: {why}: not measured")
    return out


def voice(res: ReportResults) -> None:
    """Word the results, once: ``res.review`` and ``res.summary`` (the runs not ok join the errors first)."""
    res.errors += arm_problems(res)
    res.review = readings(res)
    for r in res.review:
        r.name = f"{r.arm} ({r.badge})" if r.badge else r.arm  # an emulator's badge after its name
        if r.word == NOT_RUN:  # no run ended ok: its status and reason (``Reading.text``)
            r.line = fit(f"{r.arm}: {NOT_RUN}" + (f" ({r.text})" if r.text else ""))
            r.note = r.text
        else:
            r.line = candidate_line(r)
            r.note = "attention INVALID: see the attention calls" if r.word == INVALID else floor_note(res, r)
        r.ratio_line, r.lines = ratio_line(r), accuracy_lines(r)
        r.bare_lines = accuracy_lines(r, bare=True)
        r.step_line = NO_SPEED if r.emulator else speed_line("DiT s/step", r.step)
        r.total_line = "" if r.emulator else speed_line("pipeline total", r.total)
        r.step_cell, r.total_cell = speed_cell(r.step), speed_cell(r.total)
        r.warning_lines = [fit(warning_text(r.arm, w)) for w in r.warnings]
    # the intervals the lines show (an emulator's speed-up is not shown), their confidence said once
    shown = [
        r.model_copy(update={"step": Terms()}) if r.emulator else r for r in res.review if r.word != NOT_RUN
    ]
    levels = interval_levels(shown, res.rules.alpha)
    more = f"; and {len(res.errors) - 3} more" if len(res.errors) > 3 else ""  # report.md lists them all
    incomplete = f"INCOMPLETE: {len(res.errors)} problem(s): {'; '.join(res.errors[:3])}{more}"
    insitu = res.insitu.readings if res.insitu else []
    res.summary = Summary(
        incomplete=incomplete if res.errors else "",
        findings=[fit(f"finding: {finding_text(f)}") for r in insitu for f in r.findings],
        intervals=[levels] if levels else [],
    )
    res.summary.lines = summary_lines(res)
    res.floor_points = floor_points(res)
