"""A kernel benchmark as text: report.md (accuracy, emulators beside their kernels, speed, bitwise
checks, skipped rows) and index.html (the same tables as a static page, for CI artifacts). Every
figure and word comes from the records (kernels.json); nothing here judges."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import yaml

from harness import __version__
from harness.analysis.findings import rule
from harness.kernels.results import (
    CONVENTIONS,
    KERNELS_JSON,
    RULE,
    AccuracyMetrics,
    BitwiseCheck,
    KernelRow,
    KernelsResult,
    SpeedMetrics,
    bitwise_reading,
)
from harness.report.cells import Section
from harness.report.html import render_page
from harness.safe_write import atomic_write_text
from harness.text_table import TextTable, md_code, md_escape, md_rows, md_text, md_unescape

REPORT_MD = "report.md"
INDEX_HTML = "index.html"
BITWISE_CHECKS = {  # the checks' names in kernels.json -> their column in report.md
    "direct_vs_direct": "direct op vs direct op",
    "registry_vs_direct": "registry vs direct op",
    "packed_3d_vs_direct": "packed [N,H,D] vs direct",
    "packed_4d_vs_direct": "packed [B,N,H,D] vs direct",
}


def _f(x: float | None, fmt: str) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return format(x, fmt)


def _bit(checks: list[BitwiseCheck], name: str) -> str:
    c = next((c for c in checks if c.check == name), None)
    if c is None or c.identical is None:
        return (c and c.note) or "-"
    return "identical" if c.identical else f"differs (max {c.max_abs_diff:.3g})"


class ReportText:
    """report.md's lines and the page's section, written together from the records: the page shows
    each line as it reads (escapes undone; it escapes it as HTML)."""

    def __init__(self, title: str):  # markdown, escaped
        self.lines = [f"## {title}", ""]
        self.section = Section(id="s0", title=md_unescape(title.strip()))

    def para(self, line: str, *, gap: bool = False) -> None:  # gap: blank lines around it in report.md
        self.lines += ["", line, ""] if gap else [line]
        self.section.paragraphs.append(md_unescape(line.rstrip()))

    def bullet(self, line: str) -> None:
        self.lines.append(f"- {line}")
        self.section.bullets.append(md_unescape(line.rstrip()))

    def table(
        self, title: str, headers: list[str], rows: list[list[str]], *, empty_too: bool = False
    ) -> None:
        """A titled table, every cell escaped (labels, reasons and notes come from scenarios and
        errors), none without rows unless ``empty_too``."""
        if rows or empty_too:
            self.lines += ["", f"### {title}", "", *md_rows(headers, rows)]
            head, *body = [[md_unescape(md_escape(c).strip()) for c in row] for row in [headers, *rows]]
            table = TextTable(title=title, headers=head, rows=body, row_classes=[""] * len(body))
            self.section.tables.append(table)


def _accuracy_cells(r: KernelRow, a: AccuracyMetrics) -> list[str]:
    return [
        r.shape,
        r.label,
        f"{a.cosine:.6f}",
        f"{a.rel_l1:.4f}",
        f"{a.rmse:.3e}",
        f"{a.max_abs_err:.3g}",
        f"{a.row_cos_p10:.5f}",
        f"{a.row_cos_frac_gt_099:.4f}",
        f"{a.nan_count}/{a.inf_count}",
        str(a.zero_rows),
        _f(a.scale, ".3f"),
        _f(a.rel_l1_unscaled, ".4f"),
    ]


def of_peak(device: str, s: SpeedMetrics) -> str:
    """The share of the matmul peak; n/a where no peak is known (a CPU: ``no_peak`` says so) or the
    share is over 100 % (then the matmul measured was no peak)."""
    if device != "cuda":
        return "n/a"
    if s.frac_of_peak is None:
        return "-"
    return "n/a (over the measured matmul peak)" if s.frac_of_peak > 1 else f"{s.frac_of_peak:.1%}"


def no_peak(result: KernelsResult) -> str | None:
    """Why every share of the peak is n/a, where it is (a timed run off a GPU)."""
    if result.device == "cuda" or all(r.speed is None for r in result.rows):
        return None
    return f"Of peak: n/a, no matmul peak is known on {'a CPU' if result.device == 'cpu' else result.device}"


def _speed_cells(r: KernelRow, s: SpeedMetrics, device: str) -> list[str]:
    return [
        r.shape,
        f"{r.label} (emulator)" if r.emulated else r.label,
        _f(s.median_ms, ".3f"),
        _f(s.tflops, ".4g"),
        of_peak(device, s),
        _f(s.do_bench_ms, ".3f"),
        _f(s.do_bench_tflops, ".4g"),
        f"{s.do_bench_diff_pct:+.1f}%" if s.do_bench_diff_pct is not None else "-",
        _f(s.quant_ms, ".3f"),
        f"{s.timer} x{s.repeats}",
    ]


def _agreement(page: ReportText, result: KernelsResult) -> None:
    """Each emulator beside its kernel, shape by shape, and its summary; the emulators whose kernel
    did not run here in one line each (the section itself only where a pair was measured)."""
    pairs = result.agreement
    if pairs:
        page.table(
            "Emulators beside their kernels",
            ["shape", "emulator", "kernel", "kernel rel L1", "emulator rel L1", "ratio", "kernel scale",
             "emulator scale", "word"],
            [[s.shape, a.emulator, a.kernel, f"{s.kernel_rel_l1:.4f}", f"{s.emulator_rel_l1:.4f}", _f(s.ratio, ".3f"),
              f"{s.kernel_scale:.4f}", f"{s.emulator_scale:.4f}", s.word] for a in pairs for s in a.shapes],
        )  # fmt: skip
        where = f"{pairs[0].machine}, {pairs[0].date}"  # one run: one machine, one date
        page.para(md_text(f"Agreement: {RULE}; measured on {where}."), gap=True)
        for a in pairs:
            page.bullet(md_text(f"{a.summary}. Software: {a.software}."))
    for u in result.unpaired_emulators:  # a line of its own, not an item of the findings' list
        page.lines.append("")
        page.para(md_text(u.text))


def kernels_report(result: KernelsResult) -> ReportText:
    """The tables for a pull request: accuracy, speed, bitwise checks, skipped rows."""
    page = ReportText(f"Attention kernels: {md_escape(result.name)}")
    env = result.env
    versions = ", ".join(
        f"{k} {v}" for k, v in env.items() if v and k in ("torch", "triton", "sageattention", "amd-aiter")
    )
    arch = f", {env['gpu_arch']}" if env.get("gpu_arch") else ""
    page.para(md_text(f"Device: {result.device_name} ({result.device}{arch}); {versions}."))
    for p in result.peaks.values():
        db = f"; do_bench {p.do_bench_tflops:.1f}" if p.do_bench_tflops else ""
        page.para(md_text(f"Matmul peak {p.dtype} {p.size}^3: {p.tflops:.3g} TFLOP/s ({p.timer}{db})."))
    for s in result.shapes:
        sh = s.shape
        note = f" - {sh.note}" if sh.note else ""  # free text of the scenario: escaped with the rest
        what = f"B={sh.batch} H={sh.heads} Nq={sh.seq_q} Nk={sh.seq_k} D={sh.head_dim} {sh.dtype}, "
        page.para(f"Shape {md_code(sh.name)}: " + md_text(f"{what}reference {s.reference_dtype}{note}."))
    for n in result.notes:
        page.bullet(md_text(n))
    page.table(
        "Accuracy against the exact reference",
        ["shape", "backend", "cosine", "rel L1", "RMSE", "max abs", "row cos p10", "rows cos>0.99", "NaN/Inf",
         "zero rows", "scale", "rel L1 unscaled"],
        [_accuracy_cells(r, r.accuracy) for r in result.rows if r.accuracy is not None],
        empty_too=True,
    )  # fmt: skip
    if result.findings is not None:
        what = f"Findings (scale: out ~ scale x reference, least squares; rule: {rule('shapes')}):"
        page.para(md_text(what), gap=True)
        for f in result.findings:
            page.bullet(md_text(f.text))
        if not result.findings:
            page.bullet("none: no shape stands out, no output is scaled")
    _agreement(page, result)
    page.table(
        "Speed",
        ["shape", "backend", "median ms", "TFLOP/s", "of peak", "do_bench ms", "do_bench TFLOP/s", "diff",
         "quant ms", "timer"],
        [_speed_cells(r, r.speed, result.device) for r in result.rows if r.speed is not None],
    )  # fmt: skip
    if why := no_peak(result):
        page.para(md_text(f"{why}."), gap=True)
    page.table(
        "Bitwise checks",
        ["shape", "backend", *BITWISE_CHECKS.values(), "reading"],
        [
            [r.shape, r.label, *[_bit(r.bitwise, c) for c in BITWISE_CHECKS], bitwise_reading(r.bitwise)]
            for r in result.rows
            if r.bitwise
        ],
    )
    page.table(
        "Skipped or failed",
        ["shape", "backend", "status", "reason"],
        [[r.shape, r.label, r.status, r.reason or ""] for r in result.rows if r.status != "ok"],
    )
    took = f"Run took {result.duration_s:.1f} s."
    page.para(md_text(f"FLOPs: {CONVENTIONS['flops']}. Time: {CONVENTIONS['time']}. {took}"), gap=True)
    return page


def kernels_summary(result: KernelsResult) -> TextTable:
    """What report.md's tables lead with, per shape and backend: accuracy (cosine, rel L1) and speed
    (median ms, share of the peak); for the terminal."""
    peak = result.device == "cuda"  # elsewhere a column of n/a: a note instead
    headers = ["shape", "backend", "cosine", "rel L1", "median ms", *(["of peak"] if peak else [])]
    table = TextTable(title=f"{result.name} on {result.device_name}", headers=headers)
    for r in result.rows:
        acc = _accuracy_cells(r, r.accuracy)[2:4] if r.accuracy is not None else [r.status, "-"]
        speed = _speed_cells(r, r.speed, result.device)[2:5:2] if r.speed is not None else ["-", "-"]
        table.add([r.shape, r.label, *acc, *speed[: 1 + peak]])
    table.notes += [why] if (why := no_peak(result)) else []
    if any(r.status != "ok" for r in result.rows):
        table.notes.append("skipped or failed: the reason is in report.md")
    return table


def write_kernels_report(result: KernelsResult, out_dir: Path) -> dict[str, Path]:
    """Write report.md and index.html (report.md's section as a static page, the report's template)
    into ``out_dir``; returns {name: path}."""
    page = kernels_report(result)
    res = SimpleNamespace(
        scenario_name=result.name,
        campaign_id="kernels",
        generated_at=result.created_at,
        harness_version=__version__,
        schema_version=KERNELS_JSON,
    )
    html = render_page(
        res,
        [page.section],
        scenario_text=yaml.safe_dump(result.block, sort_keys=False),
        env_text=json.dumps(result.env, indent=2, default=str),
    )
    paths = {REPORT_MD: Path(out_dir) / REPORT_MD, INDEX_HTML: Path(out_dir) / INDEX_HTML}
    atomic_write_text(paths[REPORT_MD], "\n".join(page.lines))
    link = f'<a href="{KERNELS_JSON}">{KERNELS_JSON}</a>'
    atomic_write_text(paths[INDEX_HTML], html.replace('<a href="results.json">results.json</a>', link))
    return paths
