"""The report always completes (hypothesis): the committed production-shape example's results with its
candidates' verdicts replaced by verdicts judged on generated numbers (zeros, identical seeds, NaN,
inf, one seed, one run, huge and tiny energies, in-situ readings of every word) renders report.md,
pr.md and the page, and every candidate's word reaches the summary."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verdict_testutil import campaigns

from harness.analysis.model import read_results
from harness.analysis.sentences import voice
from harness.analysis.verdict import judge_numbers
from harness.report.render import render
from harness.store import write_record

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "reports/examples/h200/minimax_h3_tiny/gpu_prod_sageattention2"
)
# One drawn campaign per candidate of the example (its verdicts are replaced by the drawn ones).
CANDIDATES = sum(v.role == "candidate" for v in read_results(EXAMPLE / "results.json").verdicts)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(st.lists(campaigns(), min_size=CANDIDATES, max_size=CANDIDATES))
def test_any_verdict_renders(tmp_path_factory, drawn):
    folder = tmp_path_factory.mktemp("report")
    shutil.copytree(EXAMPLE, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.html", "*.md"))
    res = read_results(folder / "results.json")
    cands = [v for v in res.verdicts if v.role == "candidate"]
    for v, (c, f, insitu) in zip(cands, drawn, strict=True):
        new = judge_numbers(v.arm, c, f, insitu=insitu)
        new.role = v.role
        res.verdicts[res.verdicts.index(v)] = new
    voice(res)  # worded again, as the analysis words the verdicts it writes
    write_record(folder / "results.json", res)
    paths = render(res, folder / "results.json", folder)
    pr = paths.pr_md.read_text()
    for v in res.verdicts:
        if v.role == "candidate":
            assert re.search(rf"\*\*{re.escape(v.arm)}( \(emulator\))?\*\*: {v.word}\b", pr), (v.arm, v.word)
    assert paths.report_md.is_file() and paths.index_html.is_file()
