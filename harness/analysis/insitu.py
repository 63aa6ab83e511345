"""In-situ readings of a campaign (docs/insitu.md; the rule in words: ``insitu_model.CONVENTION``), and an
emulator's fidelity to the kernel it reproduces, both shadowing a run: its verdict predicts the kernel's
only that far."""

from __future__ import annotations

import math
from collections import Counter
from statistics import median
from typing import Any

import numpy as np

from harness.analysis.findings import Observation, find, rule, scale_of, scale_words
from harness.analysis.insitu_cost import measure_per_step, measured_in_situ, run_spec, shadow_costs
from harness.analysis.insitu_model import (
    BOOTSTRAP,
    CONVENTION,
    WORST,
    Fidelity,
    InSituCell,
    InSituKind,
    InSituPart,
    InSituReading,
    InSituResults,
    InSituRunInfo,
    InSituStep,
    WorstCall,
)
from harness.attention.insitu.recorder import InSituRun, grouped, pool, read_insitu_or_note
from harness.insitu_records import INSITU_DIR, InSituCall, InSituOp, InSituStats
from harness.number_format import range_text, ratio_text, ratio_value
from harness.rule import INCONCLUSIVE, OUTSIDE, WITHIN, combine, severity, word
from harness.scenario.insitu import InSituTolerance
from harness.scenario.verdict import accepted_baseline
from harness.store import CampaignDir


def _l1(call: InSituCall, op: str) -> float | None:
    e = call.errors.get(op)
    if e is None or not e.finite:  # a NaN or Inf anywhere in the output is no value, nor floor
        return None
    return e.rel_l1 * call.ref_l1


def _site(c: InSituCall) -> str:
    bits = [f"rank {c.rank}"] if c.rank != "0" else []
    bits.append(f"call {c.call}")
    bits += [f"step {c.step}"] if c.step is not None else []
    bits += [f"block {c.block}"] if c.block is not None else []
    return ", ".join([*bits, f"kind {c.kind}"])


def _floor_l1(call: InSituCall, floor_ops: list[str]) -> float | None:
    vals = [x for x in (_l1(call, op) for op in floor_ops) if x is not None]
    return sum(vals) / len(vals) if vals else None


def _floor_pool(calls: list[InSituCall], floor_ops: list[str], name: str | None = None) -> InSituStats:
    """The exact floor pooled over ``calls`` (those ``name`` measured finite, where named)."""
    both = [(c.ref_l1, f) for c in calls if (name is None or _l1(c, name) is not None)
            and (f := _floor_l1(c, floor_ops)) is not None]  # fmt: skip
    ref = sum(r for r, _ in both)
    return InSituStats(calls=len(both), rel_l1=sum(f for _, f in both) / ref if both and ref > 0 else None)


def _ratio_ci(pairs: list[tuple[float, float]]) -> tuple[float | None, list[float] | None]:
    """sum(num) / sum(den) over the (num, den) pairs, with its 95 % bootstrap interval over them."""
    num, den = (np.array([p[i] for p in pairs], dtype=float) for i in (0, 1))
    if not len(num) or den.sum() <= 0:
        return None, None
    ratio = float(num.sum() / den.sum())
    if len(num) < 2:
        return ratio, None
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(num), size=(BOOTSTRAP, len(num)))
    boots = num[idx].sum(axis=1) / np.maximum(den[idx].sum(axis=1), np.finfo(float).tiny)
    return ratio, [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))]


def _ci_text(ci: list[float] | None, fmt=ratio_value) -> str:
    return f" [95 % {range_text(ci[0], ci[1], fmt)}]" if ci else ""


def _part(against: str, value, ci, limit, unit: str, higher_is_worse: bool = True) -> InSituPart:
    lo, hi = ci if ci is not None else (value, value)  # the point where there is no interval
    w = INCONCLUSIVE if value is None else word(lo, hi, limit, higher_is_worse=higher_is_worse)
    shown = ratio_text(value) if unit == "x" else "n/a" if value is None else f"{value:.3g}{unit}"
    rule = f"{'at most' if higher_is_worse else 'at least'} {limit:g}{unit}"
    return InSituPart(
        against=against, word=w, value=value, ci=ci, limit=limit,
        text=f"{against}: {shown}{_ci_text(ci, ratio_value if unit == 'x' else lambda x: format(x, '.3g'))}, {rule}: {w}",
    )  # fmt: skip


KIND_LABELS = {"dit_self": "DiT self-attention", "cross": "cross-attention"}


def _judge(
    name: str, calls: list[InSituCall], floor_ops: list[str], base: str | None, tol: InSituTolerance
) -> list[InSituPart]:
    """The judged parts of ``name`` on ``calls`` (finite calls only): the floor, the baseline, the limits."""
    rows = [(c, _l1(c, name), _floor_l1(c, floor_ops)) for c in calls]
    ratio, ci = _ratio_ci([(x, f) for _, x, f in rows if x is not None and f is not None])
    parts = [_part("exact floor", ratio, ci, tol.floor_ratio, "x")]
    if base is not None and base != name:
        pairs = [(x, b) for c, x, _ in rows if x is not None and (b := _l1(c, base)) is not None]
        parts.append(_part(f"accepted baseline {base}", *_ratio_ci(pairs), tol.baseline_ratio, "x"))
    good = [(c, x) for c, x, _ in rows if x is not None]
    far = call_outlier(calls, name, floor_ops)
    if far is not None:  # one call far off is not drowned by the many pooled with it
        parts.append(
            _part("worst call over the median call, each over its floor", far[2], None, tol.call_ratio, "x")
        )
    if tol.max_call_rel_l1 is not None and good:
        worst = max(x / c.ref_l1 for c, x in good if c.ref_l1 > 0)
        parts.append(_part("worst call's rel L1", worst, None, tol.max_call_rel_l1, ""))
    if tol.max_rel_l1 is not None:
        parts.append(_part("max rel L1", *_ratio_ci([(x, c.ref_l1) for c, x in good]), tol.max_rel_l1, ""))
    if tol.min_cosine is not None:
        value, ci = _ratio_ci([(c.errors[name].cosine, 1.0) for c, _ in good])
        parts.append(_part("min cosine", value, ci, tol.min_cosine, "", higher_is_worse=False))
    return parts


def call_outlier(
    calls: list[InSituCall], name: str, floor_ops: list[str]
) -> tuple[InSituCall, float, float] | None:
    """(the call furthest over its own exact floor, that ratio, the ratio over the median call's, at
    least 1): a call the kernel gets far more wrong than its other calls."""
    rows = [(c, x / f) for c in calls if (x := _l1(c, name)) is not None and (f := _floor_l1(c, floor_ops))]
    if not rows:
        return None
    call, ratio = max(rows, key=lambda t: t[1])
    return call, ratio, ratio / max(1.0, median(r for _, r in rows))


def observations(name: str, calls: list[InSituCall], floor_ops: list[str]) -> list[Observation]:
    """``name``'s finite calls as observations for ``analysis.findings``."""
    out = []
    for c in calls:
        x = _l1(c, name)
        if x is None:
            continue
        e = c.errors[name]
        attrs = {"kind": c.kind, "k_len": c.k_len, "q_len": c.q_len, "step": c.step, "block": c.block,
                 "rank": c.rank}  # fmt: skip
        out.append(Observation(attrs=attrs, l1=x, ref=c.ref_l1, floor_l1=_floor_l1(c, floor_ops),
                               scale=e.scale, unscaled=e.rel_l1_unscaled))  # fmt: skip
    return out


def _kind(
    name: str, kind: str, on: list[InSituCall], floor_ops, base, tol, obs: list[Observation]
) -> InSituKind:
    """One call kind judged on its own calls: a few short calls far off are not drowned by long ones."""
    st = pool(on, name)
    scale, unscaled = scale_of([o for o in obs if o.attrs["kind"] == kind])
    parts = _judge(name, on, floor_ops, base, tol)
    return InSituKind(
        kind=kind, calls=st.calls, q_len=max((c.q_len for c in on), default=None),
        rows=sum(c.q_len for c in on if name in c.errors), rel_l1=st.rel_l1,
        floor_rel_l1=_floor_pool(on, floor_ops, name).rel_l1,
        ratio=parts[0].value, ratio_ci=parts[0].ci, cosine=st.cosine, scale=scale, rel_l1_unscaled=unscaled,
        word=combine([p.word for p in parts], empty=INCONCLUSIVE), parts=parts,
    )  # fmt: skip


def _deciding(kinds: list[InSituKind]) -> tuple[str, InSituKind | None]:
    """The word over kinds and the deciding kind; one without a floor can make it outside, never within."""
    measured = [k for k in kinds if k.rel_l1 is not None]
    floored = [k for k in measured if k.ratio is not None]
    words = [k.word for k in measured if k.word == OUTSIDE] + [k.word for k in floored]
    overall = combine(words, empty=INCONCLUSIVE)
    eligible = [k for k in measured if k.ratio is not None or k.word == OUTSIDE] or measured
    top = max(eligible, key=lambda k: (severity(k.word), k.ratio or 0.0), default=None)
    return overall, top


def _kind_head(k: InSituKind) -> str:
    return f"{KIND_LABELS.get(k.kind, k.kind)} ({k.calls} call(s), {k.rows:,} rows)"


def _kind_brief(k: InSituKind) -> str:
    floor = f"{ratio_text(k.ratio)} the floor{_ci_text(k.ratio_ci)}" if k.ratio is not None else "no floor"
    if k.rel_l1 is None:
        floor = "not measured"
    others = [p.text.removesuffix(f": {p.word}") for p in k.parts[1:] if p.word != WITHIN]
    if k.rel_l1 is not None and (scaled := scale_words(k.rel_l1, k.scale, k.rel_l1_unscaled)):
        others.append(scaled)
    return f"{_kind_head(k)}: " + ", ".join([floor, *others]) + f": {k.word or INCONCLUSIVE}"


def candidate_reading(
    name: str,
    items: list[tuple[str, InSituCall]],
    floor_ops: list[str],
    base: str | None,
    tol: InSituTolerance,
    attn_type: str = "",
) -> InSituReading:
    """The reading of candidate ``name`` over (run key, call) pairs (module docstring)."""
    calls = [c for _, c in items]
    r = InSituReading(candidate=name, attn_type=attn_type, runs=sorted({k for k, _ in items}))
    r.stats = pool(calls, name)
    r.calls = r.stats.calls
    mine = [(k, c, c.errors[name]) for k, c in items if name in c.errors]
    bad = [(k, c) for k, c, _ in mine if c.returned_nonfinite(name)]
    broke = [(k, c, e.error) for k, c, e in mine if e.error and not e.error.startswith("refused:")]
    r.nonfinite, r.failed = len(bad), len(broke)
    r.refused = sum(1 for *_, e in mine if (e.error or "").startswith("refused:"))
    floor = _floor_pool(calls, floor_ops, name)
    r.floor = floor if floor.calls else None
    obs = observations(name, calls, floor_ops)
    for kind in dict.fromkeys(c.kind for c in calls):
        r.per_kind.append(_kind(name, kind, [c for c in calls if c.kind == kind], floor_ops, base, tol, obs))
    r.word, top = _deciding(r.per_kind)
    r.parts = top.parts if top is not None else _judge(name, calls, floor_ops, base, tol)
    r.ratio, r.ratio_ci = r.parts[0].value, r.parts[0].ci
    r.decided_by = top.kind if top is not None else ""
    problems = []
    if broke:
        key, c, why = broke[0]
        problems.append(
            f"{len(broke)} of {r.calls} call(s) failed (first: run {key} {_site(c)}: {why}): {OUTSIDE}"
        )
        r.word, r.decided_by = OUTSIDE, "failed calls"
    if bad:  # a NaN in the output fails the kernel whatever its error on the other calls
        key, c = bad[0]
        problems.insert(0, f"{len(bad)} of {r.calls} call(s) returned non-finite values (first: run {key} "
                           f"{_site(c)}): {OUTSIDE}")  # fmt: skip
        r.word, r.decided_by = OUTSIDE, "non-finite output"
    far = call_outlier(calls, name, floor_ops)
    if far is not None and far[2] > tol.call_ratio:
        key = next(k for k, c in items if c is far[0])
        problems.append(f"one call far off: run {key} {_site(far[0])}: rel L1 {far[0].errors[name].rel_l1:.3g}, "
                        f"{ratio_text(far[1])} its floor, {ratio_text(far[2])} the median call's: {OUTSIDE}")  # fmt: skip
    _shape(r, items, name, floor_ops, base)
    r.findings = find(name, obs)
    s = r.stats
    refused = f", {r.refused} not measured (refused)" if r.refused else ""
    where = f"{r.calls} call(s) of {', '.join(r.runs)}{refused}"
    pooled = f" (pooled over the {r.calls - s.failed} call(s) measured finite)" if bad or broke else ""
    head = f"not measured on {where}"
    if s.rel_l1 is not None:
        head = f"in situ rel L1 {s.rel_l1:.3g}, cosine {s.cosine:.6f} (worst row p1 {s.row_cos_p1:.4f}) on "
        head += f"{where}{pooled}"
    judged = [p.text for p in r.parts]
    if len(r.per_kind) > 1 and top is not None:  # the kind that decides (a failed call first), the others
        lead = "by call kind, worst first" if bad or broke else "decided by kind"
        judged[0] = f"{lead} {_kind_head(top)}: {judged[0]}"
        rest = sorted(
            (k for k in r.per_kind if k is not top), key=lambda k: (-severity(k.word), -(k.ratio or 0.0))
        )
        judged += [_kind_brief(k) for k in rest]
    r.text = f"{name}: " + "; ".join([*problems, head, *judged]) + f"; in-situ reading: {r.word}"
    return r


def nonfinite_floor_notes(key: str, calls: list[InSituCall], floor_ops: list[str]) -> list[str]:
    """Each exact op of run ``key`` that returned NaN/Inf on some calls: left out of the floor there."""
    notes = []
    for op in floor_ops:
        bad = [c for c in calls if c.returned_nonfinite(op)]
        if bad:
            n = sum(1 for c in calls if op in c.errors)
            notes.append(f"{key}: exact op {op} returned non-finite values on {len(bad)} of {n} call(s) (first: "
                         f"{_site(bad[0])}): left out of the floor on those calls")  # fmt: skip
    return notes


def _shape(r: InSituReading, items, name: str, floor_ops: list[str], base: str | None) -> None:
    """Per step (with the floor and baseline beside), per step x block, and the worst calls."""
    calls = [c for _, c in items]
    for step, st in grouped(calls, name, lambda c: c.step).items():
        on = [c for c in calls if c.step == step]
        baseline = pool(on, base).rel_l1 if base and base != name else None
        shown = st.model_dump(include={"rel_l1", "cosine", "calls"})
        floor = _floor_pool(on, floor_ops).rel_l1
        r.per_step.append(InSituStep(step=step, floor_rel_l1=floor, **shown, baseline_rel_l1=baseline))
    for (step, block), st in grouped(calls, name, lambda c: (c.step, c.block)).items():
        on = [c for c in calls if (c.step, c.block) == (step, block)]
        pairs = [(_l1(c, name), _floor_l1(c, floor_ops)) for c in on]
        pairs = [(x, f) for x, f in pairs if x is not None and f is not None]
        den = sum(f for _, f in pairs)
        ratio = sum(x for x, _ in pairs) / den if den > 0 else None
        r.cells.append(InSituCell(step=step, block=block, rel_l1=st.rel_l1, ratio=ratio, calls=st.calls))
    scored = [(k, c, c.errors[name]) for k, c in items if _l1(c, name) is not None]
    scored.sort(key=lambda t: t[2].rel_l1, reverse=True)
    for key, c, e in scored[:WORST]:
        f = _floor_l1(c, floor_ops)
        r.worst.append(
            WorstCall(
                run=key, call=c.call, rank=c.rank, step=c.step, block=c.block, kind=c.kind, rel_l1=e.rel_l1,
                cosine=e.cosine, row_cos_p1=e.row_cos_p1, floor_rel_l1=f / c.ref_l1 if f is not None else None,
                scale=e.scale, rel_l1_unscaled=e.rel_l1_unscaled,
            )
        )  # fmt: skip
    if r.cells:
        r.heatmap = f"insitu_heatmap_{name}"


def shadowed_run_info(key: str, arm: str, run: InSituRun, folder_rel: str) -> InSituRunInfo:
    primary = run.op(run.primary)
    info = InSituRunInfo(
        key=key, arm=arm, primary=run.primary, primary_exact=bool(primary and primary.exact),
        calls=len(run.calls), steps=run.steps(), blocks=run.blocks(),
        sample_rows=run.metas[0].settings.sample_rows, yardstick=run.metas[0].settings.yardstick,
        notes=list(run.notes) + [n for m in run.metas for n in m.notes],
    )  # fmt: skip
    for name in run.op_names():
        op = run.op(name)
        info.ops[name] = "primary" if name == run.primary else ("exact" if op and op.exact else "candidate")
        measured = [c.errors[name] for c in run.calls if name in c.errors]
        if name != run.primary and measured and all(e.error for e in measured):
            info.dropped[name] = measured[0].error
    info.kinds = dict(Counter(c.kind for c in run.calls))
    info.captured = [f"{folder_rel}/{c.file}" for m in run.metas for c in m.captured]
    info.measure_s_per_step = measure_per_step(run.calls)
    return info


def exact_ops(info: InSituRunInfo) -> list[str]:
    """The ops of a shadowed run that make its exact floor: its own attention when exact, exact shadows."""
    exact = ("exact", "primary") if info.primary_exact else ("exact",)
    return [n for n, role in info.ops.items() if role in exact and n not in info.dropped]


def insitu_results(res: Any, campaign: CampaignDir) -> InSituResults | None:
    """The in-situ readings of the shadowed first repeats (None: no in-situ record), and their cost."""
    notes: list[str] = []
    found: list[tuple[Any, InSituRun]] = []
    specs = {r.key: run_spec(campaign, r.key) for r in res.runs}
    for r in res.primary_runs:
        spec = specs.get(r.key)
        if not measured_in_situ(r, campaign) or spec is None or not (spec.shadows or spec.insitu):
            continue  # a folder left by an earlier, shadowed run of the arm is not this run's
        run = read_insitu_or_note(campaign.run(r.key).path / INSITU_DIR, notes)
        if run is not None and run.metas:
            found.append((r, run))
    if not found:
        return None
    scen = res.scenario or {}
    try:
        tol = InSituTolerance.model_validate(scen.get("insitu_tolerance") or {})
    except ValueError:
        tol = InSituTolerance()
        notes.append("insitu_tolerance in campaign.json unreadable: the defaults are used")
    out = InSituResults(
        accepted_baseline=accepted_baseline(scen), tolerance=tol, notes=notes,
        convention=f"{CONVENTION}; findings: {rule()}",
    )  # fmt: skip
    items: dict[str, list[tuple[str, InSituCall]]] = {}
    attn_types: dict[str, str] = {}
    floor_items: list[tuple[InSituCall, list[str]]] = []
    pairs: dict[tuple[str, str], list[tuple[str, InSituCall]]] = {}
    for summary, run in found:
        info = shadowed_run_info(summary.key, summary.arm, run, INSITU_DIR)
        out.runs.append(info)
        floor_ops = exact_ops(info)
        out.floor_ops += [n for n in floor_ops if n not in out.floor_ops]
        for name in (n for n, role in info.ops.items() if role == "candidate" and n not in info.dropped):
            op = run.op(name)
            attn_types[name] = op.attn_type if op else ""
            items.setdefault(name, []).extend((summary.key, c) for c in run.calls)
        floor_items += [(c, floor_ops) for c in run.calls]
        ops = [op for n in run.op_names() if n not in info.dropped and (op := run.op(n)) is not None]
        for emulator, kernel in emulator_pairs(ops):
            pairs.setdefault((emulator, kernel), []).extend((summary.key, c) for c in run.calls)
        out.notes += nonfinite_floor_notes(summary.key, run.calls, floor_ops)
        if not floor_ops:
            out.notes.append(f"{summary.key}: no exact op measured (its attention is no exact backend, no exact "
                             "shadow): its candidates have no floor")  # fmt: skip
    good = [(c, f) for c, ops in floor_items if (f := _floor_l1(c, ops)) is not None]
    if good:
        rel_l1 = sum(f for _, f in good) / sum(c.ref_l1 for c, _ in good)
        out.floor = InSituStats(calls=len(good), rel_l1=rel_l1)
    for name, its in items.items():  # an op absent from a call adds nothing to its floor
        out.readings.append(
            candidate_reading(name, its, out.floor_ops, out.accepted_baseline, tol, attn_types[name])
        )
    out.fidelity = [fidelity(emulator, kernel, its) for (emulator, kernel), its in pairs.items()]
    if out.accepted_baseline and not any(out.accepted_baseline in info.ops for info in out.runs):
        out.notes.append(
            f"accepted baseline {out.accepted_baseline} was not shadowed: no in-situ comparison against it "
            "(name it in the shadowed arm's shadows)"
        )
    shadow_costs(res, out.runs, specs)
    return out


def add_insitu(res: Any, campaign: CampaignDir, say: Any = None) -> None:
    """``res.insitu`` of the campaign, its convention and notes (before the verdicts: they read it)."""
    res.insitu = insitu_results(res, campaign)
    if res.insitu is not None:
        if say is not None:
            say(f"in-situ readings of {len(res.insitu.runs)} shadowed run(s)")
        res.conventions["insitu"] = res.insitu.convention
        res.notes.extend(n for n in res.insitu.notes if n not in res.notes)


AGREE = 0.2  # per-call rel L1 ratio within 1 +/- this, and scales within SCALE_AGREE: "agrees"
SCALE_AGREE = 0.02


def emulator_pairs(ops: list[InSituOp]) -> list[tuple[str, str]]:
    """(emulator, kernel) names among one run's ops."""
    emulators = [e for e in ops if e.params.get("models") or e.params.get("sageattention") == "emulator"]
    kernels = [k for k in ops if not (k.kv_reversed or k in emulators)]  # an emulator is never a kernel
    pairs = []
    for e in emulators:
        target, lightx2v = e.params.get("models"), e.params.get("sageattention") == "emulator"
        for k in kernels:
            by_package = k.attn_type == e.attn_type and k.params.get("sageattention") == "package"
            if (target and k.params.get("backend") == target) or (lightx2v and by_package):
                pairs.append((e.name, k.name))
    return pairs


def fidelity(emulator: str, kernel: str, items: list[tuple[str, InSituCall]]) -> Fidelity:
    """How closely ``emulator``'s error follows ``kernel``'s on the calls both measured."""
    both = []
    for key, c in items:
        e, k = c.errors.get(emulator), c.errors.get(kernel)
        if e is None or k is None or not (e.finite and k.finite) or k.rel_l1 <= 0:
            continue
        gap = abs(e.scale - k.scale) if e.scale is not None and k.scale is not None else None
        both.append((e.rel_l1 / k.rel_l1, gap, key, c))
    f = Fidelity(emulator=emulator, kernel=kernel, calls=len(both))
    if not both:
        f.text = f"emulator fidelity: {emulator} beside {kernel}: no call measured by both"
        return f
    ratios = [r for r, *_ in both]
    gaps = [g for _, g, *_ in both if g is not None]
    f.ratio_median, f.ratio_min, f.ratio_max = median(ratios), min(ratios), max(ratios)
    f.scale_diff_max = max(gaps) if gaps else None
    r, _, key, c = max(both, key=lambda t: abs(math.log(t[0])) if t[0] > 0 else math.inf)
    f.worst = f"run {key}, call {c.call}, {c.kind}, {c.k_len:,} keys: ratio {r:.3g}"
    agrees = all(abs(x - 1) <= AGREE for x in ratios) and all(g <= SCALE_AGREE for g in gaps)
    scales = f"; scales within {f.scale_diff_max:.3g}" if f.scale_diff_max is not None else ""
    word = (
        "agrees call by call"
        if agrees
        else f"does NOT follow the kernel on every call (worst: {f.worst}): its verdicts do not predict the kernel's"
    )
    f.text = (
        f"emulator fidelity: {emulator} beside {kernel} on {f.calls} call(s): its rel L1 over the kernel's, per call, "
        f"median {f.ratio_median:.3g} ({f.ratio_min:.3g} to {f.ratio_max:.3g}){scales}: {word} (agreement: within "
        f"{AGREE:.0%} and {SCALE_AGREE:g} in scale on every call)"
    )
    return f
