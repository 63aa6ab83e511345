"""One comparison as text for ``harness compare`` (a terminal table, markdown or JSON): headlines, then its
tables; a table of what neither side recorded is left out, a headline says so."""

from __future__ import annotations

import json

from harness.compare.gates import GateOutcome
from harness.compare.pairwise import Comparison
from harness.compare.summary import RunSummary, stat_fields
from harness.errors import HarnessError
from harness.metrics.metric import headline_metrics, table_metrics
from harness.number_format import NA, fmt_db, fmt_ratio, fmt_s, fmt_stat
from harness.text_table import TextTable, md_code, md_escape, md_table, md_text, terminal_text


def _yes_no(x: bool | None) -> str:
    return NA if x is None else ("yes" if x else "no")


def attn_text(s: RunSummary) -> str:
    if s.attn is None:
        return "not recorded"
    a = s.attn
    state = "valid" if a.valid else "INVALID"
    return f"{a.calls_requested} call(s) via {a.requested}, {a.fallbacks} fallback(s), {state}"


def rank_cells(rc) -> list[str]:
    """A rank's attention calls and fallbacks per op ('0': none) and its errors."""
    calls = ", ".join(f"{k}: {n}" for k, n in sorted(rc.calls.items())) or "0"
    fallbacks = ", ".join(f"{k}: {n}" for k, n in sorted(rc.fallbacks.items()) if n) or "0"
    return [calls, fallbacks, "; ".join(rc.errors)]


def _headline(cmp: Comparison, modality: str) -> str:
    """One modality's metrics in the accuracy line ('; video PSNR 40.00 dB pooled, ...'; empty: not measured)."""
    text = ""
    for m in headline_metrics(modality):
        h, record = m.headline, m.record(cmp)
        value = m.read(record)
        if h is None or value is None:
            continue
        text += ("; " if h.opens else ", ") + h.text.format(h.fmt(value) if h.fmt else m.fmt(value))
        text += f" (frame {getattr(record, m.worst_frame)})" if m.worst_frame else ""
        text += h.note(record) if h.note else ""
    return text


def _unrecorded(cmp: Comparison) -> list[str]:
    """What neither side recorded (timing, attention): its table is left out, one line says so."""
    none = {"timing": lambda s: s.timing_source is None, "attention": lambda s: s.attn is None}
    return [what for what, missing in none.items() if missing(cmp.a) and missing(cmp.b)]


def comparison_headlines(cmp: Comparison) -> list[str]:
    """The lines a reader looks at first (pyperf-style speed lines, bitwise, accuracy)."""
    lines = [line for line in (cmp.speed.s_per_step_line, cmp.speed.total_line) if line]
    if missing := _unrecorded(cmp):
        bare = all(s.role == "file" for s in (cmp.a, cmp.b))
        lines.append(
            f"no {' or '.join(missing)} records: A ({cmp.a.key}) and B ({cmp.b.key}) "
            + ("are bare files" if bare else "recorded none")
        )
    if cmp.video is not None:
        v = cmp.video
        if cmp.bitwise.identical:
            same = "bitwise identical: every decoded frame"
            same += " and audio sample" if cmp.bitwise.audio else ""
            same += " (files identical too)" if cmp.bitwise.files else " (files differ in bytes)"
            lines.append(same)
        else:
            label = "noise floor" if cmp.kind == "noise_floor" else "accuracy"
            txt = f"{label}: " + _headline(cmp, "video").removeprefix("; ")
            if v.identical_frames:
                txt += f"; {v.identical_frames} of {v.frames} frames identical"
            txt += _headline(cmp, "audio")
            lines.append(txt)
            lines.append(
                f"bitwise identical: video {_yes_no(cmp.bitwise.video)}, audio {_yes_no(cmp.bitwise.audio)}, "
                f"file {_yes_no(cmp.bitwise.files)}"
            )
        if cmp.kind == "noise_floor":
            how = cmp.b.perturbation or "no perturbation"
            lines.append(
                f"B ({cmp.b.key}) is a noise floor: the exact backend {cmp.b.attn_type} ({how}), so only "
                "rounding differs from A"
            )
    lines.extend(cmp.notes)
    return lines


def comparison_tables(cmp: Comparison) -> list[TextTable]:
    a, b = cmp.a, cmp.b
    ha, hb = f"A: {a.key}", f"B: {b.key}"
    runs = TextTable(title="Runs", headers=["", ha, hb])
    for label, cell in (
        ("role", lambda s: s.role),
        ("attention", lambda s: f"{s.attn_type}{' kv_reversed' if s.kv_reversed else ''}"),
        ("status", lambda s: s.status + (f": {s.reason}" if s.reason else "")),
        ("attention calls", attn_text),
        ("output sha256", lambda s: (s.output_sha256 or NA)[:16]),
    ):
        cells = [cell(a), cell(b)]
        if not set(cells) <= {"unknown", "not recorded"}:  # a row of nothing recorded: left out
            runs.add([label, *cells])

    sp = TextTable(title="Speed (B against A)", headers=["", ha, hb, "speed-up A/B", "B vs A"])
    sp.add(["DiT steps", *(NA if s.dit_steps is None else s.dit_steps for s in (a, b)), "", ""])
    step_test, total_test = cmp.speed.s_per_step_test, cmp.speed.total_test
    ups = [*cmp.speed.step_speedups, None, None, None]  # steps 1..3
    timings = [
        ("s/step (mean of steps 2..N)", a.s_per_step, b.s_per_step, cmp.speed.s_per_step_speedup, step_test),
        *((f"step {i}", a.step(i), b.step(i), ups[i - 1], None) for i in (1, 2, 3)),
        ("pipeline total (s)", a.pipeline_total_s, b.pipeline_total_s, cmp.speed.total_speedup, total_test),
    ]
    for label, x, y, r, test in timings:
        word = "one run a side: no speed word" if test is not None else ""
        sp.add([label, fmt_s(x), fmt_s(y), fmt_ratio(r), word])
    if cmp.speed.step_spread:
        sp.add(["steps 2..N of the run", *cmp.speed.step_spread, "", ""])
    sp.notes.append(
        "speed-up = A's time / B's (above 1: B faster). Runs are the samples of a speed test, never the steps of "
        "one process (they share its run-to-run noise): a campaign with repeats (`harness run --repeats N`) gives "
        "the interval and the word"
    )
    untimed = [f"{side} ({s.key})" for side, s in (("A", a), ("B", b)) if s.timing_source is None]
    if untimed:
        sp.notes.append(f"no timing: {' and '.join(untimed)} recorded no step times")
    unrecorded = _unrecorded(cmp)
    tables = [runs] + ([sp] if "timing" not in unrecorded else [])

    acc = TextTable(title="Accuracy (B against A)", headers=["metric", "value"])
    if cmp.video is not None:
        v = cmp.video
        acc.add(["frames compared", f"{v.frames} ({v.width}x{v.height} @ {v.fps:g} fps)"])
        for m in table_metrics("video"):  # the metric registry's, in its order
            acc.add([m.row or m.label, m.cell(v)])
        acc.add(["identical frames", f"{v.identical_frames} of {v.frames}"])
    if cmp.audio is not None:
        au = cmp.audio
        for m in table_metrics("audio"):
            acc.add([m.row or m.label, m.cell(au)])
            if m.key == "audio_snr":  # the alignment the audio figures are taken at, after the first
                acc.add(["audio alignment by timestamps (samples, B late > 0)", str(au.lag_samples)])
                corr = (
                    f" (correlation {au.residual_corr:.4f} there)"
                    if au.residual_lag_samples and au.residual_corr is not None
                    else ""
                )
                acc.add(["audio residual lag (samples, B late > 0)", f"{au.residual_lag_samples}{corr}"])
        acc.add(["audio", f"{au.channels} ch @ {au.sample_rate} Hz, {au.samples_compared} samples compared"])
    acc.add(["bitwise: file", _yes_no(cmp.bitwise.files)])
    acc.add(["bitwise: video frames", _yes_no(cmp.bitwise.video)])
    acc.add(["bitwise: audio samples", _yes_no(cmp.bitwise.audio)])
    tables.append(acc)  # the comparison's notes are headlines already: not repeated here

    st = TextTable(title="Global statistics", headers=["statistic", ha, hb, "B - A"])
    fa, fb = stat_fields(a.stats), stat_fields(b.stats)
    for name in fa:
        x, y = fa[name], fb[name]
        d = fmt_stat(name, y - x) if x is not None and y is not None else NA
        st.add([name, fmt_stat(name, x), fmt_stat(name, y), d])
    tables.append(st)

    at = TextTable(title="Attention calls per rank", headers=["run", "rank", "calls", "fallbacks", "errors"])
    for s in (a, b):
        if s.attn is None:
            at.add([s.key, NA, "not recorded", "", ""])
            continue
        for rank, rc in sorted(s.attn.ranks.items()):
            at.add([s.key, rank, *rank_cells(rc)])
    tables += [at] if "attention" not in unrecorded else []
    if cmp.latents:
        names = sorted({n for p in cmp.latents for n in p.parts})
        lt = TextTable(
            title="Latent PSNR per step (B against A)",
            headers=["step", "PSNR (all)", *[f"PSNR {n}" for n in names], "max |diff|"],
        )
        for p in cmp.latents:
            lt.add(
                [p.step, fmt_db(p.psnr), *[fmt_db(p.parts.get(n)) for n in names], f"{p.max_abs_diff:.3g}"]
            )
        tables.append(lt)
    return tables


def format_comparison(cmp: Comparison, fmt: str = "table", *, width: int | None = None) -> str:
    """``table`` (for ``width`` columns, default the terminal's; print it as is: it holds log text), ``md``
    or ``json``."""
    if fmt == "json":
        return cmp.model_dump_json(indent=2, by_alias=True) + "\n"
    tables = comparison_tables(cmp)
    heads = comparison_headlines(cmp)
    if fmt == "md":
        parts = [f"## {md_escape(cmp.b.key)} against {md_escape(cmp.a.key)} (reference)", ""]
        parts += [f"- {md_text(h)}" for h in heads]
        parts.append("")
        parts += [md_table(t) for t in tables]
        parts.append("Conventions:\n")
        parts += [f"- {md_text(k)}: {md_code(v)}" for k, v in cmp.conventions.items()]
        return "\n".join(parts) + "\n"
    if fmt == "table":
        return terminal_text(tables, heads, width)
    raise HarnessError(f"format: expected table, md or json (got {fmt!r})")


def format_compare_output(cmp: Comparison, fmt: str, gate: GateOutcome | None) -> str:
    """What ``harness compare`` prints; in JSON the gate's outcome travels with the numbers it judged."""
    text = format_comparison(cmp, fmt)
    if fmt == "json":
        data = json.loads(text)
        data["gate"] = None if gate is None else gate.model_dump()
        text = json.dumps(data, indent=2) + "\n"
    return text if text.endswith("\n") else text + "\n"
