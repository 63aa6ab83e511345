"""benchmark.json: per arm and timing, the mean and sd over its runs in github-action-benchmark's custom
format (a CI charts them over builds); ``extra``: how many runs, and where the timing is no baseline."""

from __future__ import annotations

from pathlib import Path

from pydantic import TypeAdapter

from harness.analysis.model import ReportResults
from harness.records import Record
from harness.safe_write import atomic_write_text

TIMINGS = (("s_per_step", "DiT s/step", "s"), ("pipeline_total_s", "pipeline total", "s"))  # pr.md's too


class BenchmarkEntry(Record):
    name: str
    unit: str
    value: float
    range: str | None = None
    extra: str | None = None


def benchmark_entries(res: ReportResults) -> list[BenchmarkEntry]:
    out = []
    for a in res.arms:
        for key, what, unit in TIMINGS:
            s = a.metrics.get(key)
            if s is None or s.n == 0 or s.mean is None:
                continue
            extra = f"mean over {s.n} run(s) (repeats x seeds) of {res.scenario_name}/{res.campaign_id}"
            extra += f"; {a.role}" if a.role != "candidate" else ""
            extra += "" if a.timing_baseline else f"; {a.timing_label}"
            out.append(
                BenchmarkEntry(
                    name=f"{a.arm}: {what}",
                    unit=unit,
                    value=round(s.mean, 6),
                    range=f"± {s.std:.6g}" if s.n >= 2 and s.std is not None else None,
                    extra=extra,
                )
            )
    return out


def write_benchmark(res: ReportResults, path: Path) -> Path:
    entries = TypeAdapter(list[BenchmarkEntry]).dump_json(benchmark_entries(res), indent=2, exclude_none=True)
    atomic_write_text(Path(path), entries.decode() + "\n")
    return Path(path)
