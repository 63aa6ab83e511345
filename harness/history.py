"""History across campaigns: every results.json under some folders (a row per run), each campaign of a series
tested against the last N before it (Holm over the whole history), history.csv, history.html, the gate."""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.compare.significance import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT, compare_samples, fmt_p
from harness.errors import HarnessError
from harness.metrics.metric import history_metrics
from harness.records import steady_steps
from harness.rule import holm, welch_p_value
from harness.safe_write import atomic_write_text
from harness.text_table import csv_cell

RESULTS_JSON = "results.json"
SERIES = ["scenario", "profile", "gpu", "arm"]


@dataclass(frozen=True)
class Metric:
    column: str
    label: str
    higher_is_better: bool
    timing: bool  # tested as a speed-up (log times, minimum effect), else Welch on the values
    digits: int


# The timings, then the accuracy columns of the metric registry (``harness.metrics``) tested over time.
METRICS: tuple[Metric, ...] = (
    Metric("s_per_step", "DiT s/step", False, True, 4),
    Metric("total_s", "pipeline total (s)", False, True, 3),
    *[Metric(h.column, h.label, m.higher_is_closer, False, h.digits)
      for m in history_metrics() if (h := m.history) is not None and h.tested],
)  # fmt: skip
METRIC = {m.column: m for m in METRICS}


def _gpu(env: dict) -> str:
    gpus = ((env or {}).get("torch") or {}).get("gpus") or []
    if gpus:
        names = sorted({g.get("name", "?") for g in gpus})
        return f"{len(gpus)} x {names[0]}" if len(names) == 1 and len(gpus) > 1 else ", ".join(names)
    return "cpu"


def _commit(env: dict) -> str:
    git = (env or {}).get("harness_git") or {}
    sha = git.get("sha")
    return "unknown" if not sha else sha[:10] + ("+dirty" if git.get("dirty") else "")


def _rows(path: Path) -> list[dict]:
    """One row per run of the results.json at ``path`` (a bad file: one HarnessError line)."""
    from harness.analysis.model import read_results

    res = read_results(path)
    by_b = {c.b.key: c for c in res.comparisons}
    words = {v.arm: v.word for v in res.verdicts}
    campaign = {
        "scenario": res.scenario_name,
        "profile": res.profile or "",
        "campaign": res.campaign_id,
        "campaign_path": str(path.parent),
        "commit": _commit(res.env),
        "date": res.created_at or res.generated_at,
        "gpu": _gpu(res.env),
    }
    return [
        campaign
        | {
            "arm": r.arm,
            "role": r.role,
            "seed": r.seed,
            "status": r.status,
            "s_per_step": r.s_per_step if r.ok else None,
            "total_s": r.pipeline_total_s if r.ok else None,
            **{m.history.column: m.get(by_b.get(r.key)) for m in history_metrics() if m.history is not None},
            "valid": r.valid,
            "verdict": words.get(r.arm, ""),
            "step_samples": steady_steps(r.step_seconds) if r.ok else [],
        }
        for r in res.runs
    ]


def load_history(dirs: Iterable[Path]) -> pd.DataFrame:
    """One row per run of every results.json under ``dirs``, campaigns in time order."""
    paths: set[Path] = set()
    for d in map(Path, dirs):
        if d.is_file() and d.name == RESULTS_JSON:
            paths.add(d)
        elif d.is_dir():
            paths.update(d.rglob(RESULTS_JSON))
        else:
            raise HarnessError(f"{d}: no such folder", exit_code=2)
    if not paths:
        raise HarnessError(f"no {RESULTS_JSON} under {', '.join(map(str, dirs))}", exit_code=2)
    rows, skipped = [], []
    for p in sorted(paths):  # one damaged file is named and left out; it never hides the others
        try:
            rows.extend(_rows(p))
        except HarnessError as err:
            skipped.append(f"skipped: {err}")
    if not rows:
        first = skipped[0] if skipped else f"no run in {len(paths)} {RESULTS_JSON}"
        raise HarnessError(
            f"no readable {RESULTS_JSON} under {', '.join(map(str, dirs))} ({first})", exit_code=3
        )
    df = pd.DataFrame(rows)
    df.attrs["skipped"] = skipped
    df["date"] = pd.to_datetime(df["date"], utc=True, errors="coerce")
    df = df.sort_values(["date", "campaign_path", "arm", "seed"], kind="stable").reset_index(drop=True)
    order = df.drop_duplicates("campaign_path")["campaign_path"].tolist()
    df["campaign_index"] = df["campaign_path"].map({p: i for i, p in enumerate(order)})
    return df


def _samples(group: pd.DataFrame, m: Metric) -> list[float]:
    return [float(x) for x in group[m.column] if x is not None and not pd.isna(x) and math.isfinite(x)]


def _test(before: list[float], now: list[float], m: Metric, alpha: float, min_effect: float) -> dict:
    """p, means and what a move reads, before Holm."""
    mean_b, mean_n = sum(before) / len(before), sum(now) / len(now)
    out = {"before": mean_b, "now": mean_n, "ratio": mean_n / mean_b if mean_b else None, "p": None,
           "n": f"n={len(before)}/{len(now)} runs", "speed": None}  # fmt: skip
    if m.timing:
        t = compare_samples(before, now, alpha=alpha, min_effect=min_effect)
        out["p"], out["speed"] = t.p, t
    elif len(before) >= 2 and len(now) >= 2:
        out["p"] = welch_p_value(before, now)
    return out


def find_moves(
    df: pd.DataFrame, *, last: int = 5, alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT
) -> pd.DataFrame:
    """A row per test of each campaign against the ``last`` before it, per series and metric (Holm over all):
    the series keys, the campaign, the means, p and p_adjusted, outcome, moved, worse and the text."""
    found = []
    for key, series in df.groupby(SERIES, sort=False, dropna=False):
        camps = series.drop_duplicates("campaign_index")["campaign_index"].tolist()
        for m in METRICS:
            for i, ci in enumerate(camps[1:], 1):
                window = camps[max(0, i - last) : i]
                now = _samples(series[series["campaign_index"] == ci], m)
                before = _samples(series[series["campaign_index"].isin(window)], m)
                if not now or not before:
                    continue
                row = series[series["campaign_index"] == ci].iloc[0]
                t = _test(before, now, m, alpha, min_effect)
                found.append((dict(zip(SERIES, key, strict=True)), m, row, ci, len(window), t))
    adjusted = holm([t["p"] for *_, t in found])
    out = []
    for (keys, m, row, ci, window, t), p_adj in zip(found, adjusted, strict=True):
        went_up = t["now"] > t["before"]
        if t["speed"] is not None:
            speed = t["speed"].finish(p_adj)
            moved, outcome = speed.significant, speed.word
        else:
            moved = p_adj is not None and p_adj < alpha
            outcome = "moved" if moved else ("too few runs" if t["p"] is None else "no change detected")
        p_txt = f"p={fmt_p(t['p'])}, Holm {fmt_p(p_adj)}"
        if moved:
            change = f"{'up' if went_up else 'down'} {t['before']:.{m.digits}f} -> {t['now']:.{m.digits}f}"
            text = f"{change} ({t['n']}, {p_txt}, alpha {alpha:g})"
        elif t["p"] is None:
            text = f"too few runs for a test ({t['n']}; 2 a side needed)"
        else:
            text = f"{outcome} ({t['n']}, {p_txt})"
        out.append(
            keys
            | {
                "metric": m.column,
                **{k: row[k] for k in ("campaign", "campaign_path", "commit")},
                "campaign_index": ci,
                "window": window,
                **{k: t[k] for k in ("before", "now", "ratio", "p")},
                "p_adjusted": p_adj,
                "outcome": outcome,
                "moved": bool(moved),
                "worse": bool(moved and (went_up != m.higher_is_better)),
                "text": text,
            }
        )
    return pd.DataFrame(out)


def gate_regressions(df: pd.DataFrame, moves: pd.DataFrame) -> list[str]:
    """Moves the bad way of each scenario's newest campaign, one line each (empty: the gate passes)."""
    if moves.empty:
        return []
    lines = []
    newest = df.groupby("scenario")["campaign_index"].max()
    for _, mv in moves.iterrows():
        if mv["worse"] and newest.get(mv["scenario"]) == mv["campaign_index"]:
            m = METRIC[mv["metric"]]
            lines.append(
                f"{mv['scenario']} {mv['arm']} ({mv['gpu']}): {m.label} {mv['text']} in {mv['campaign_path']} "
                f"against the {mv['window']} campaign(s) before it"
            )
    return lines


def _figure(df: pd.DataFrame, moves: pd.DataFrame, scenario: str, m: Metric) -> bytes | None:
    from matplotlib.figure import Figure

    from harness.report.plots import PALETTE, png_bytes

    sub = df[(df["scenario"] == scenario) & df[m.column].notna()]
    if sub.empty:
        return None
    per = sub.groupby(["arm", "gpu", "role", "campaign_index"], sort=False)[m.column].mean().reset_index()
    fig = Figure(figsize=(8, 3.6), layout="constrained")
    ax = fig.subplots()
    floor = per[per["role"] == "noise_floor"]
    if not floor.empty and m.higher_is_better:
        lo, hi = floor[m.column].min(), floor[m.column].max()
        ax.axhspan(lo, hi if hi > lo else lo + 1e-9, color="#999999", alpha=0.25, label="noise floor band")
        ax.axhline(lo, color="#777777", lw=0.8, ls=":")
    lines = per.groupby(["arm", "gpu"], sort=False)
    many_gpus = per["gpu"].nunique() > 1
    for i, ((arm, gpu), g) in enumerate(lines):
        color = PALETTE[i % len(PALETTE)]
        label = f"{arm} ({gpu})" if many_gpus else arm
        style = "--" if (g["role"] == "noise_floor").any() else "-"
        ax.plot(g["campaign_index"], g[m.column], style, marker="o", ms=4, color=color, label=label)
        if not moves.empty:
            mv = moves[
                (moves["scenario"] == scenario) & (moves["metric"] == m.column) & (moves["arm"] == arm)
                & (moves["gpu"] == gpu) & moves["moved"]
            ]  # fmt: skip
            for _, row in mv.iterrows():
                y = g[g["campaign_index"] == row["campaign_index"]][m.column]
                if not y.empty:
                    ax.plot(
                        row["campaign_index"], y.iloc[0], marker="v" if row["worse"] else "^", ms=11,
                        color="#c62828" if row["worse"] else "#2e7d32", ls="none",
                    )  # fmt: skip
    camps = sub.drop_duplicates("campaign_index").set_index("campaign_index")
    labels = {
        int(i): f"{r['campaign']}\n{r['commit'][:7]}\n{r['date']:%m-%d %H:%M}"
        if not pd.isna(r["date"])
        else r["campaign"]
        for i, r in camps.iterrows()
    }
    ax.set_xticks(sorted(labels), [labels[i] for i in sorted(labels)], fontsize=7)
    ax.set_ylabel(m.label)
    ax.set_title(f"{scenario}: {m.label}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return png_bytes(fig)


def _page(df: pd.DataFrame, moves: pd.DataFrame, figures: list[tuple[str, str, bytes]], last: int) -> str:
    from harness.report.html import template_env

    template = template_env().get_template("history.html.j2")
    moved = moves[moves["moved"]] if not moves.empty else moves
    columns = ["scenario", "campaign", "commit", "gpu", "arm", "role", "s_per_step", "total_s"]
    columns += [h.column for m in history_metrics() if (h := m.history) is not None and h.latest]
    latest = df.sort_values("campaign_index").groupby(["scenario", "arm", "gpu"], sort=False).tail(1)
    latest = latest[[*columns, "verdict"]]
    return template.render(
        campaigns=df["campaign_path"].nunique(),
        runs=len(df),
        last=last,
        figures=[(s, label, base64.b64encode(png).decode("ascii")) for s, label, png in figures],
        latest=[[_cell(v) for v in row] for row in latest.itertuples(index=False)],
        latest_headers=list(latest.columns),
        moves=[
            [*r[["scenario", "arm", "gpu"]], METRIC[r["metric"]].label, r["campaign"], r["text"], _way(r)]
            for _, r in moved.iterrows()
        ],
    )


def _way(move: pd.Series) -> str:
    return "worse" if move["worse"] else "better"


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def write_history(
    df: pd.DataFrame, moves: pd.DataFrame, out_dir: Path, *, last: int = 5
) -> tuple[Path, Path]:
    """history.csv (one row per run) and history.html (figures inlined: one file)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv = df.drop(columns=["step_samples"]).assign(
        step_samples=df["step_samples"].map(lambda xs: " ".join(f"{x:.6g}" for x in xs))
    )
    csv_path, html_path = out / "history.csv", out / "history.html"
    atomic_write_text(csv_path, csv.map(csv_cell).to_csv(index=False))  # record text: no formula cells
    figures = [
        (scenario, m.label, png)
        for scenario in df["scenario"].drop_duplicates()
        for m in METRICS
        if (png := _figure(df, moves, scenario, m)) is not None
    ]
    atomic_write_text(html_path, _page(df, moves, figures, last))
    return csv_path, html_path


@dataclass(frozen=True)
class HistoryOutcome:
    campaigns: int
    runs: int
    scenarios: list[str]  # in time order of their first campaign
    moved: list[str]  # one line per significant move of a metric, any campaign
    regressions: list[str]  # the newest campaign's moves the bad way (``gate_regressions``)
    csv_path: Path
    html_path: Path
    skipped: list[str] = field(default_factory=list)  # results.json files that could not be read


def build_history(dirs: Iterable[Path], out_dir: Path, *, last: int = 5) -> HistoryOutcome:
    df = load_history(dirs)
    moves = find_moves(df, last=last)
    csv_path, html_path = write_history(df, moves, out_dir, last=last)
    moved = moves[moves["moved"]] if not moves.empty else moves
    lines = [
        f"moved ({_way(mv)}): {mv['scenario']} {mv['arm']} {METRIC[mv['metric']].label} in {mv['campaign']}: {mv['text']}"
        for _, mv in moved.iterrows()
    ]
    return HistoryOutcome(
        campaigns=int(df["campaign_path"].nunique()),
        runs=len(df),
        scenarios=[str(s) for s in df["scenario"].drop_duplicates()],
        moved=lines,
        regressions=gate_regressions(df, moves),
        csv_path=csv_path,
        html_path=html_path,
        skipped=list(df.attrs.get("skipped", [])),
    )
