"""The review at a glance, read off the verdicts and speed tests: per candidate its word, the reading that
decides it with its interval, the other reading, the warnings and the speed-ups (``sentences`` words them)."""

from __future__ import annotations

import math
import unicodedata
from typing import Any

from harness.analysis.model import (
    INSITU_WHAT,
    FloorPoint,
    Reading,
    ReportResults,
    SpeedTest,
    Terms,
    Verdict,
    is_emulator,
)
from harness.analysis.verdict_model import largest
from harness.emulator_provenance import Provenance, provenance_of
from harness.metrics.metric import energy_metrics, judged_energies
from harness.rule import IDENTICAL, NOT_RUN, known


def pair(x: Any) -> tuple[float, float] | None:
    if isinstance(x, list | tuple) and len(x) == 2 and all(isinstance(v, int | float) for v in x):
        return float(x[0]), float(x[1])
    return None


def terms(value: float, ci: Any, alpha: float, word: str = "") -> Terms:
    """A figure with its interval (where it is a pair) at ``1 - alpha`` and its word."""
    ci = pair(ci)
    return Terms(value=float(value), ci=ci, ci_what=f"{100 * (1 - alpha):.10g} % CI" if ci else "", word=word)


def regime(v: Verdict) -> str:
    """The video regime of a verdict's seeds: one word when they agree, else "mixed"."""
    found = {sv.regime.get("video", "") for sv in v.per_seed}
    return found.pop() if len(found) == 1 else ("mixed" if found else "not measured")


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
    label = next((r.label for r in v.energy if r.metric == v.ratio_metric), "error energy")
    level = next((r.alpha for r in v.energy if r.metric == v.ratio_metric), 0.05)
    return word, terms(v.ratio, v.ratio_ci, level), f"{label} / the floor's"


def end_to_end_terms(v: Verdict) -> tuple[Terms, str]:
    """The decoded output's reading alone (everything but in situ): its word and deciding ratio."""
    word = v.end_to_end_word or ("" if v.decided_by == "insitu" else v.word)
    r = next((r for r in v.energy if r.metric == v.decided_by), None)
    if r is None:
        ratios = [r for r in v.energy if r.ratio is not None]
        same = [r for r in ratios if r.word == word] or ratios
        r = largest(same) if same else None
    if r is None or r.ratio is None:
        return Terms(word=word), ""
    return terms(r.ratio, r.ratio_ci, r.alpha, word), f"{r.label} / the floor's"


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


def plain_words(text: str, width: int = 0) -> str:
    """Text read from a record as words on one line (a control or format character a space), ``fit``."""
    flat = "".join(" " if unicodedata.category(c).startswith("C") else c for c in str(text))
    out = " ".join(flat.split())
    return fit(out, width) if width else out


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


def readings(res: ReportResults) -> list[Reading]:
    """One reading per candidate verdict, in the report's order."""
    base = res.rules.accepted_baseline  # the scenario names it (top level or verdict block)
    out = []
    for v in res.verdicts:
        if v.role != "candidate":
            continue
        word, ratio, what = verdict_terms(v)
        e2e, e2e_what = end_to_end_terms(v)
        agg = res.arm(v.arm)
        tests = agg.speed if agg is not None else {}
        runs = [r for r in res.runs if r.arm == v.arm]
        text = v.text or v.summary
        if word == NOT_RUN and runs:
            r = runs[0]
            text = r.status + (f": {r.reason}" if r.reason else "")
        out.append(
            Reading(
                **v.model_dump(include={"arm", "tolerance", "decided_by", "identical_seeds", "warnings"}),
                word=word,
                ratio=ratio,
                ratio_what=what,
                regime=regime(v),
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
