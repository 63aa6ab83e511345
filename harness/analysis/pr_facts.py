"""What pr.md says of the verdicts beyond the summary's lines, worded once and stored (``ReportResults.pr``):
a word per modality and per reading, the codec caveat, the speed-ups of a test without an interval."""

from __future__ import annotations

from harness.analysis.model import PrLines, Reading, ReportResults, Terms, Verdict
from harness.analysis.sentences import floor_ratio, interval_text, scored_on, terms
from harness.analysis.verdict_model import clearest
from harness.compare.significance import MIN_SAMPLES, SpeedTest
from harness.metrics.metric import energy_metrics
from harness.number_format import fmt_speedup, ratio_text
from harness.rule import IDENTICAL, NOT_RUN, combine


def modality_lines(r: Reading, v: Verdict) -> list[str]:
    """'video: outside: 14.3x the floor's (97.5 % CI 6.98 to 29.5; video MSE), tolerance 2x', then audio:
    the word of each modality's judged readings with the one that gives it."""
    modality = {key: m.modality for key, m in energy_metrics().items()}
    out = []
    for mod in ("video", "audio"):
        found = [e for e in v.energy if modality.get(e.metric) == mod]
        word = combine((e.word for e in found), empty="")
        shown = [e for e in found if e.word == word and e.ratio is not None]
        if not shown:
            out += [f"{mod}: {word}"] if word else []
            continue
        e = clearest(shown, word)
        out.append(f"{mod}: {word}: {floor_ratio(r, terms(e.ratio, e.ratio_ci, e.alpha, word), e.label)}")
    return out


def against_text(word: str, t: Terms, whose: str, bound: str) -> str:
    return f"{word}: {ratio_text(t.value)} {whose}{interval_text(t, ratio_text)}, {bound}"


def reading_lines(res: ReportResults, r: Reading, v: Verdict) -> list[str]:
    """A word per modality, in situ, and against the accepted baseline (end to end and in situ)."""
    if r.word in (IDENTICAL, NOT_RUN):
        return []
    out = modality_lines(r, v)
    i = r.insitu
    if i is not None and i.value is not None:
        line = against_text(i.word, i, "the exact floor's", f"tolerance {r.tolerance:g}x")
        out.append(f"in situ: {line}")
    base, b = res.rules.accepted_baseline, v.baseline
    if base and b is not None and b.ratio is not None:
        line = against_text(b.word, terms(b.ratio, b.ratio_ci, b.alpha), "its error", f"margin {b.bound:g}x")
        out.append(f"against the accepted baseline {base}, end to end ({b.label}): {line}")
    found = next((x for x in (res.insitu.readings if res.insitu else []) if x.candidate == v.arm), None)
    for p in found.parts if found is not None else []:
        if p.against.startswith("accepted baseline ") and p.value is not None:
            line = against_text(p.word, terms(p.value, p.ci, 0.05), "its error", f"at most {p.limit:g}x")
            out.append(f"against the {p.against}, in situ: {line}")
    return out


def speed_short(step: SpeedTest | None, total: SpeedTest | None) -> str:
    """'DiT s/step 1.61x, pipeline total 1.20x on one run a side: no interval' where the test has none."""
    if step is None or step.speedup is None or step.speedup_ci is not None or step.word != "too few runs":
        return ""
    both = f", pipeline total {fmt_speedup(total.speedup)}" if total is not None and total.speedup else ""
    sides = "one run a side" if step.n_ref == step.n_arm == 1 else f"{step.n_ref} and {step.n_arm} runs"
    need = "" if step.n_ref == step.n_arm == 1 else f" ({MIN_SAMPLES} a side needed)"
    return f"DiT s/step {fmt_speedup(step.speedup)}{both} on {sides}: no interval{need}"


def pr_lines(res: ReportResults) -> PrLines:
    verdicts = {v.arm: v for v in res.verdicts}
    speed = {a.arm: speed_short(a.speed.get("s_per_step"), a.speed.get("pipeline_total_s")) for a in res.arms}
    mp4 = res.pixel_source and not res.pixel_source.startswith("lossless")
    return PrLines(
        readings={r.arm: reading_lines(res, r, verdicts[r.arm]) for r in res.review if r.arm in verdicts},
        speed={arm: line for arm, line in speed.items() if line},
        codec=scored_on(res) if mp4 else "",
    )
