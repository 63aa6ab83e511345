"""The summary a report opens with: one line for the campaign, then one per candidate arm, each at
most ``LINE`` characters (a reviewer reads it at a glance; the sections below hold the rest).

Per candidate: its name (with the emulator's badge where the backend is a numerics model: "(emulator of
SageAttention2 d1a57a5 Triton, measured on H200)", or "(emulator)" where no provenance is recorded,
``review.emulator_badge``), the verdict word
with the reading that decides it and its interval ("identical" alone, without a ratio; the other
reading's word beside it where an in-situ reading exists), then the DiT s/step speed-up with its
interval and word (``analysis.speed``), or why there is none (an emulator's timing is no kernel's).
The intervals' confidence is said once, in the last line. Ratios are written without exponents
(``number_format``). The verdict's whole line is in the verdicts section.
pr.md takes its speed-ups from ``arm_speed`` here, so both files print the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from harness.analysis.model import Finding, ReportResults
from harness.compare.significance import SpeedTest, fmt_speedup_value
from harness.number_format import NA, fmt_speedup, level_text, range_text, ratio_text, ratio_value
from harness.report.cells import Section
from harness.report.review import (
    INSITU_WHAT,
    NO_SPEED,
    Reading,
    Terms,
    emulator_badge,
    identical_line,
    is_emulator,
    readings,
)


@dataclass(frozen=True)
class ArmSpeed:
    """An arm's timing against the reference: the report's speed tests (samples: runs)."""

    step: SpeedTest
    total: SpeedTest

    @property
    def step_speedup(self) -> float | None:
        """Reference time / arm time (above 1: the arm is faster)."""
        return self.step.speedup

    @property
    def total_speedup(self) -> float | None:
        return self.total.speedup


def arm_speed(res: ReportResults, arm: str) -> ArmSpeed:
    agg = res.arm(arm)
    tests = agg.speed if agg is not None else {}
    return ArmSpeed(
        step=tests.get("s_per_step") or SpeedTest(what="DiT s/step"),
        total=tests.get("pipeline_total_s") or SpeedTest(what="pipeline total"),
    )


LINE = 200  # a summary line's most characters: each is read at a glance; the sections below hold the rest


def fit(text: str, width: int = LINE) -> str:
    """``text`` cut at a word to ``width`` characters, ' ...' marking the cut (names and reasons read
    from a campaign may be any length)."""
    if len(text) <= width:
        return text
    cut = text[: width - 4].rsplit(" ", 1)[0] if " " in text[: width - 4] else text[: width - 4]
    return cut.rstrip(" ;,:") + " ..."


def _range(t: Terms, fmt) -> str:
    return f" ({range_text(t.ci[0], t.ci[1], fmt)})" if t.ci is not None else ""


def accuracy_words(r: Reading) -> str:
    """The word that decides, with its ratio and interval; the other reading's word beside it."""
    if r.word == "identical":
        return identical_line(r)
    if r.word == "invalid":  # the attention the arm asked for did not run; what was measured, beside it
        why = r.attention.split(": ", 1)[0] or "attention calls not served by the requested op"
        measured = (
            f"; as measured {ratio_text(r.ratio.value)} the floor's" if r.ratio.value is not None else ""
        )
        return f"invalid: {why}{measured}"
    if r.word == "incomplete" and r.missing:
        return f"incomplete: missing {r.missing[0]}" + (
            f" and {len(r.missing) - 1} more" if len(r.missing) > 1 else ""
        )
    t = r.ratio
    if t.value is None:  # no reading to quote (an older harness's verdict): the verdict's own line
        why = r.text.split("; WARNING: ")[0] if r.text else f"no error ratio ({r.regime})"
        return why if why.startswith(r.word) else f"{r.word}: {why}"
    if r.ratio_what == INSITU_WHAT:
        head = f"{r.word} in situ: {ratio_text(t.value)} the exact floor's{_range(t, ratio_value)}"
        other = r.end_to_end
        if other.word:
            other_ratio = f" {ratio_text(other.value)}" if other.value is not None else ""
            head += f"; end to end {other.word}{other_ratio}"
    else:
        what = r.ratio_what.removesuffix(" / the floor's")
        inner = f"{range_text(t.ci[0], t.ci[1], ratio_value)}; {what}" if t.ci is not None else what
        head = f"{r.word}: {ratio_text(t.value)} the floor's ({inner}), tolerance {r.tolerance:g}x"
        if r.insitu is not None and r.insitu.word:
            ins = f" {ratio_text(r.insitu.value)}" if r.insitu.value is not None else ""
            head += f"; in situ {r.insitu.word}{ins}"
    if r.identical_seeds:
        head += f"; identical on seed(s) {', '.join(map(str, r.identical_seeds))}"
    return head


def speed_words(t: Terms, emulator: bool) -> str:
    """The DiT s/step speed-up with its interval and word, or why there is none."""
    if emulator:
        return NO_SPEED
    if t.value is None:
        return f"DiT s/step: {t.word or 'no timing'}"
    bound = lambda x: fmt_speedup_value(x).removesuffix("x")  # noqa: E731  three figures, as the speed section
    return f"DiT s/step speed-up {fmt_speedup(t.value)}{_range(t, bound)}: {t.word or NA}"


def candidate_name(arm: str, emulator: bool | str = False) -> str:
    """'arm', or 'arm (<badge>)' for an emulator: ``emulator`` is its badge words
    (``review.emulator_badge``), or True for the bare 'emulator'."""
    badge = emulator if isinstance(emulator, str) else ("emulator" if emulator else "")
    return f"{arm} ({badge})" if badge else arm


def candidate_line(r: Reading | None, v, emulator: bool | str = False) -> str:
    """'arm[ (emulator of ..., measured on H200)]: <word>: <ratio> the floor's (<lo> to <hi>; <metric>),
    tolerance 2x; DiT s/step speed-up ...[; WARNING below]', at most ``LINE`` characters. ``emulator``:
    the badge words (``review.emulator_badge``; True: 'emulator')."""
    name = candidate_name(v.arm, emulator)
    if r is None:
        return fit(f"{name}: {v.word}")
    rest = f"; {speed_words(r.step, emulator)}" + (
        f"; {len(r.warnings)} WARNING(s) below" if r.warnings else ""
    )
    # the accuracy words give way first: the speed-up and the warning count always show
    return fit(f"{name}: {fit(accuracy_words(r), max(40, LINE - len(name) - 2 - len(rest)))}{rest}")


def warning_text(arm: str, warning: str) -> str:
    """A warning led by its arm's name (once: most warnings name it already)."""
    return warning if warning.startswith(f"{arm}:") else f"{arm}: {warning}"


def interval_levels(found: list[Reading], alpha: float) -> str:
    """The confidence of the summary's intervals, said once: 'intervals: 95 % confidence', or each
    level where they differ (end to end is judged per modality, at alpha over the modalities)."""
    levels: dict[str, str] = {}
    for r in found:
        for what, t in (("speed-ups", r.step), ("in situ", r.insitu), ("end to end", r.end_to_end)):
            if t is not None and t.ci is not None and t.ci_what:
                levels.setdefault(what, t.ci_what.removesuffix(" CI"))
        if r.ratio.ci is not None and r.ratio.ci_what and r.ratio_what != INSITU_WHAT:
            levels.setdefault("end to end", r.ratio.ci_what.removesuffix(" CI"))
    if not levels:
        return ""
    if len(set(levels.values())) == 1:
        return f"intervals: {next(iter(levels.values()))} confidence"
    per = ", ".join(f"{what} {level}" for what, level in levels.items())
    note = f" per modality (together at {level_text(alpha)})" if "end to end" in levels else ""
    return f"intervals: {per}{note}"


def incomplete_line(res: ReportResults, shown: int = 3) -> str:
    """One line: the report is incomplete, and why (the first problems; report.md lists them all)."""
    more = f"; and {len(res.errors) - shown} more" if len(res.errors) > shown else ""
    return f"INCOMPLETE: {len(res.errors)} problem(s): {'; '.join(res.errors[:shown])}{more}"


def summary_lines(res: ReportResults) -> list[str]:
    """The campaign line, then one line per candidate arm (each at most ``LINE`` characters), the
    shadowed copies, the findings, the warnings and the intervals' confidence."""
    cands = [v for v in res.verdicts if v.role == "candidate"]
    head = (
        f"{res.scenario_name} / {res.campaign_id}: reference {res.reference_arm or 'none'}, "
        f"noise floor {', '.join(res.noise_floor_arms) or 'none'}, seeds {', '.join(map(str, res.seeds)) or 'n/a'}, "
        f"{len(cands)} candidate(s)"
    )
    lines = [fit(head)]
    found = readings(res)
    reading = {r.arm: r for r in found}
    if res.errors:  # missing or unreadable data: said first, so that no reader takes the rest as whole
        lines.append(fit(incomplete_line(res)))
    for v in cands:
        runs = [r for r in res.runs if r.arm == v.arm]
        if runs and not any(r.ok for r in runs):
            r = runs[0]
            lines.append(fit(f"{v.arm}: not run ({r.status}" + (f": {r.reason})" if r.reason else ")")))
            continue
        lines.append(candidate_line(reading.get(v.arm), v, emulator_badge(res, v.arm)))
    lines += [insitu_copy_line(res, v) for v in res.verdicts if v.role == "insitu"]
    lines += finding_lines(res)
    lines += [fit(f"WARNING: {warning_text(r.arm, w)}") for r in found for w in r.warnings]
    return lines + intervals_line(res, found)


def intervals_line(res: ReportResults, found: list[Reading] | None = None) -> list[str]:
    """The intervals' confidence as a line (none where no interval is shown)."""
    found = readings(res) if found is None else found
    # only the intervals the lines show: an emulator's speed-up is not shown
    shown = [replace(r, step=Terms()) if is_emulator(res, r.arm) else r for r in found if r.word != "not run"]
    levels = interval_levels(shown, res.rules.alpha)
    return [levels] if levels else []


def finding_text(f: Finding) -> str:
    """A finding, short: 'sage_attn2: error 84.4x the other calls' (63.9 to 116) on 4 calls whose ...
    (refiner; 74 keys, ...); outputs scaled by 0.70' (the in-situ section gives it whole)."""
    scaled = f"; outputs scaled by {f.scale:.2f}" if f.scale is not None and abs(f.scale - 1) >= 0.02 else ""
    where = " ".join(x for x in (f"{f.count} {f.what}", f.group, f"({f.facts})" if f.facts else "") if x)
    if f.ratio is None:
        return f"{f.candidate}: rel L1 {f.rel_l1:.3g} on {where}{scaled}"
    ci = f" ({range_text(*f.ratio_ci)})" if f.ratio_ci else ""
    return f"{f.candidate}: error {ratio_text(f.ratio)} the other {f.what}'{ci} on {where}{scaled}"


def finding_lines(res: ReportResults) -> list[str]:
    """Where a candidate's in-situ error concentrates (``analysis.findings``), one line per finding."""
    return [
        fit(f"finding: {finding_text(f)}")
        for r in (res.insitu.readings if res.insitu else [])
        for f in r.findings
    ]


def insitu_copy_line(res: ReportResults, v) -> str:
    """What a shadowed copy of the exact trajectory is: not a candidate, its output against the
    reference's (bitwise, seed by seed); its shadows and their cost are in the in-situ section."""
    cmps = [
        c for c in res.comparisons if c.b.arm == v.arm and c.a.arm == res.reference_arm and c.b.repeat == 1
    ]
    compared = [c for c in cmps if c.measured]  # a pair with media missing is no evidence either way
    same = [c for c in compared if c.bitwise.identical]
    info = next((i for i in (res.insitu.runs if res.insitu else []) if i.arm == v.arm), None)
    shadows = [name for name, role in (info.ops if info else {}).items() if role != "primary"]
    unmeasured = len(cmps) - len(compared)
    same_text = (
        f"output bitwise the reference's on {len(same)} of {len(compared)} seed(s)"
        + (f", not compared on {unmeasured}" if unmeasured else "")
        if compared
        else "output not compared"
    )
    return fit(
        f"{v.arm} (shadowed copy, not a candidate): {same_text}; shadows {', '.join(shadows) or 'none'}; "
        "see the in-situ section"
    )


def summary_section(res: ReportResults) -> Section:
    """The summary as the report's first section (markdown and HTML render it alike)."""
    sec = Section("summary", "Summary")
    sec.bullets = summary_lines(res)
    return sec
