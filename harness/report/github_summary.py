"""The job summary of a CI run (``$GITHUB_STEP_SUMMARY``): the verdicts as the page's badges give them and
the rest by name, under GitHub's 1 MiB a step (what does not fit is named as left out). Nothing is inlined."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.analysis.model import ReportResults, read_results
from harness.report.cells import MARKS, MEANINGS
from harness.report.render import ReportPaths
from harness.text_table import md_code, md_escape, md_text

SUMMARY_LIMIT = 1024 * 1024  # GitHub's limit on one step's job summary, in bytes


def size(text: str) -> int:
    return len(text.encode("utf-8"))


def verdict_rows(res: ReportResults) -> list[str]:
    attention = {v.arm: v.attention_ok for v in res.verdicts}
    rows = []
    for r in res.review:
        ok = {True: "valid", False: "**INVALID**", None: "not recorded"}[attention.get(r.arm)]
        word = f"{MARKS.get(r.word, '')} **{md_escape(r.word)}**".strip()
        base = f" ({md_escape(r.badge)})" if r.badge else ""
        base += " (accepted baseline)" if r.baseline else ""
        error = md_escape("; ".join(r.bare_lines)) + "".join(
            f"; **WARNING**: {md_escape(w)}" for w in r.warnings
        )
        step, total = ("an emulator's timing",) * 2 if r.emulator else (r.step_cell, r.total_cell)
        cells = [f"{md_escape(r.arm)}{base}", word, error, md_escape(step), md_escape(total), ok]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def legend(res: ReportResults) -> str:
    """What the marks of the verdict table mean, for the words it shows."""
    shown = {r.word for r in res.review}
    return "; ".join(f"{MARKS[w]} {w}: {MEANINGS[w]}" for w in MARKS if w in shown)


HEAD = "| candidate | verdict | error vs the noise floor | DiT s/step speed-up | pipeline total speed-up | attention |"


def github_summary(
    res: ReportResults,
    *,
    pr_text: str = "",
    files: Sequence[str] = (),
    run_url: str | None = None,
    budget: int = SUMMARY_LIMIT,
) -> str:
    """The summary of ``res`` in at most ``budget`` bytes; ``files``: names in the campaign folder."""
    title = f"## {md_escape(res.scenario_name)} / {md_escape(res.campaign_id)}: attention A/B\n\n"
    lead = (
        f"Reference {md_escape(res.reference_arm or 'none')}, noise floor "
        f"{md_escape(', '.join(res.noise_floor_arms) or 'none')}, seeds {', '.join(map(str, res.seeds)) or 'n/a'}; "
        f"speed-up = reference time / arm time (above 1x = faster).\n\n"
    )
    names = ("summary lines", "file list", "pr.md tables")
    reserve = size(left_out_note(names, budget))  # room kept for the line naming what was left out
    rows = verdict_rows(res)
    table = HEAD + "\n" + "|---" * 6 + "|\n"
    out = title + lead
    closing = "\n"
    used = size(out + table) + size(closing) + reserve  # counted as it grows: bytes add up
    for i, row in enumerate(rows):
        cut = f"\n_{len(rows) - i} more candidate(s) left out: the summary's {budget} bytes are spent; see report.md._\n"
        if used + size(row + "\n") + size(cut) > budget:
            table += cut
            break
        table += row + "\n"
        used += size(row + "\n")
    if not rows:
        table = "_No candidate arm in this campaign._\n"
    elif size(out + table + legend(res) + closing) + reserve <= budget:
        closing = f"\n_{legend(res)}._\n\n"
    out += table + closing
    where = f"[the run's page]({run_url})" if run_url else "the workflow run's artifacts"
    listed = f"The page, figures and tables are files in the artifact (see {where}): "
    listed += ", ".join(md_code(f) for f in files) + ".\n\n"
    folded = f"<details><summary>pr.md: the pull request's tables</summary>\n\n{pr_text}\n</details>\n"
    lines = "\n".join(f"- {md_text(line)}" for line in res.summary.lines[1:]) + "\n\n"
    parts = [lines, listed if files else "", folded if pr_text else ""]
    left_out: list[str] = []
    for name, part in zip(names, parts, strict=True):
        if part and size(out + part) + reserve <= budget:
            out += part
        elif part:
            left_out.append(name)
    return out + (left_out_note(left_out, budget) if left_out else "")


def left_out_note(names: Sequence[str], budget: int) -> str:
    return f"\n_Left out to stay under {budget} bytes: {', '.join(names)} (see report.md in the artifact)._\n"


def publish_summary(paths: ReportPaths, target: Path, *, append: bool, run_url: str | None = None) -> Path:
    """The report's summary written to ``target`` (appended: a step's), within what is left of the limit."""
    res = read_results(paths.results_json)
    root = paths.index_html.parent.resolve()
    named = [paths.index_html, paths.report_md, paths.pr_md, paths.results_json, paths.benchmark_json,
             *paths.figures.values()]  # fmt: skip
    shown = [(Path(p), Path(p).resolve()) for p in named if Path(p).is_file()]
    files = [real.relative_to(root).as_posix() if real.is_relative_to(root) else p.name for p, real in shown]
    pr_text = paths.pr_md.read_text() if paths.pr_md.is_file() else ""
    target = Path(target)
    try:  # the step's summary so far counts when appending
        used = target.stat().st_size if append else 0
    except OSError:
        used = 0
    budget = max(0, SUMMARY_LIMIT - used - 1)
    text = github_summary(res, pr_text=pr_text, files=files, run_url=run_url, budget=budget)
    with open(target, "a" if append else "w", encoding="utf-8") as fh:
        fh.write("\n" + text if used else text)
    return target


FALLBACK = "github-summary.md"


def summary_target(flag: bool | None, env: dict[str, str], out_dir: Path) -> tuple[Path | None, bool]:
    """(where the summary goes, append?): appended to $GITHUB_STEP_SUMMARY when set (unless ``flag`` is False),
    else ``out_dir``/github-summary.md when ``flag`` is True, else nowhere."""
    step = env.get("GITHUB_STEP_SUMMARY") or ""
    if flag is False or (flag is None and not step):
        return None, False
    return (Path(step), True) if step else (Path(out_dir) / FALLBACK, False)


def run_url(env: dict[str, str]) -> str | None:
    """The CI run's page from GitHub's variables, where the artifacts are listed."""
    parts = [env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    return f"{parts[0]}/{parts[1]}/actions/runs/{parts[2]}" if all(parts) else None
