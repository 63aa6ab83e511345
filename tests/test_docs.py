"""README.md and docs/*.md hold to the harness they describe (the rules: tests/doc_check.py).

Console blocks run in one temporary folder for the whole session, README.md first: its "Evaluate
your own kernel" writes kernel.py and my_kernel.yaml and runs that campaign (about 15 CPU s), which
the other pages read as ``$CAMPAIGN`` (``reports/my_kernel/default``, relative to the folder). In
that folder ``scenarios`` links to the repository's; PATH starts with this interpreter's bin folder
(the venv's ``harness``); ``OMP_NUM_THREADS=1`` (an exact floor's rounding, so its figures, depend
on the thread count); COLUMNS and LINES unset (text laid out for 100 columns) and no
GITHUB_STEP_SUMMARY (a report appends nothing). Each page's blocks run once, on first use.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Literal

import pytest
import typer
import typer.main
from doc_check import (
    MAX_LINE,
    Checker,
    console_commands,
    docs_of,
    harness_cli,
    library_choices,
    line_problem,
    match_lines,
    parse,
    run_doc,
)

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = docs_of(ROOT)
README_MAX_LINES = 300
CAMPAIGN = "reports/my_kernel/default"


def name_of(path: Path) -> str:
    return str(path.relative_to(ROOT))


def with_console(paths: list[Path]) -> list[Path]:
    return [p for p in paths if any(b.lang == "console" for b in parse(p).blocks)]


@pytest.fixture(scope="session")
def checker() -> Checker:
    return Checker(ROOT, harness_cli(), library_choices(), ROOT / "Makefile")


@pytest.fixture(scope="session")
def console(tmp_path_factory):
    """``problems(doc)``: its console blocks' problems, README.md's run first (the campaign)."""
    work = tmp_path_factory.mktemp("docs")
    (work / "scenarios").symlink_to(ROOT / "scenarios")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "GITHUB_STEP_SUMMARY")}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        OMP_NUM_THREADS="1",
        CAMPAIGN=CAMPAIGN,
    )
    found: dict[Path, list[str]] = {}

    def problems(path: Path) -> list[str]:
        for p in (README, path):
            if p not in found:
                found[p] = run_doc(parse(p, name_of(p)), work, env)
        return found[path]

    return problems


def test_the_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md: {len(lines)} lines, over {README_MAX_LINES}"


def test_every_page_is_linked_from_the_readme():
    text = README.read_text()
    missing = [name_of(p) for p in DOCS[1:] if f"]({name_of(p)})" not in text]
    assert not missing, f"README.md links none of: {', '.join(missing)}"


@pytest.mark.parametrize("path", DOCS, ids=name_of)
def test_commands_paths_links_and_excerpts(path, checker):
    problems = checker.static(parse(path, name_of(path)))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", with_console(DOCS), ids=name_of)
def test_console_blocks_print_what_they_show(path, console):
    problems = console(path)
    assert not problems, "\n".join(problems)


# --- the checker itself, on small synthetic pages -----------------------------------------------


@pytest.fixture
def repo(tmp_path) -> Path:
    """A repository with a Makefile, a scenario and a report to point at."""
    (tmp_path / "Makefile").write_text(".PHONY: test\ntest: install\n\tpytest\ne2e-3step:\n\trun\nX := 1\n")
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "a.yaml").write_text("name: a\n")
    report = tmp_path / "reports" / "examples" / "x"
    report.mkdir(parents=True)
    (report / "report.md").write_text("# x\n\n- arm: outside: 9.50x the floor's (4.62 to 19.5)\n| a | 1 |\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## Its part\n")
    return tmp_path


def problems_of(repo: Path, text: str, run: bool = False) -> list[str]:
    doc = parse(repo / "docs" / "page.md", "docs/page.md", text)
    found = Checker(repo, harness_cli(), library_choices(), repo / "Makefile").static(doc)
    if run:
        found += run_doc(doc, repo, dict(os.environ))
    assert all("\n" not in p for p in found), found  # one line each
    return found


def test_output_that_reads_as_shown_passes(repo):
    page = """```console
$ printf 'ok 1.005x\\nnoise\\nmore\\nlast line 7\\n'
ok 1.00x
...
last ... 7
$ false  # exit 1
```
"""
    assert problems_of(repo, page, run=True) == []


def test_stale_output_fails_naming_the_line(repo):
    page = "intro\n\n```console\n$ echo speed-up 1.20x\nspeed-up 1.50x\n$ echo a; echo b\na\n```\n"
    assert problems_of(repo, page, run=True) == [
        "docs/page.md:5: `echo speed-up 1.20x`: expected 'speed-up 1.50x', got 'speed-up 1.20x' "
        "(1.20 is not 1.50 (within 1 %))",
        "docs/page.md:7: `echo a; echo b`: the output goes on: 'b'",
    ]


def test_a_wrong_exit_status_fails(repo):
    (problem,) = problems_of(repo, "```console\n$ echo oops; exit 3\noops\n```\n", run=True)
    assert problem == "docs/page.md:2: `echo oops; exit 3` exited 3, the doc says 0: oops"


def test_a_file_block_is_written_for_the_commands_after_it(repo):
    page = "```yaml\n# gate.yaml\nmin_psnr: 45\n```\n\n```console\n$ cat gate.yaml\n# gate.yaml\nmin_psnr: 45\n```\n"
    assert problems_of(repo, page, run=True) == []


def test_unknown_commands_options_values_and_targets_fail(repo):
    page = """```sh
harness run scenarios/a.yaml --profile 3step --seeds 42,43   # fine
harness run scenarios/a.yaml --bogus
harness frobnicate
harness compare a b --format xml
harness diffusers tiny-checkpoint out --model wan
harness run scenarios/a.yaml --repeats many
make test && make e2e-3step ARGS="--repeats 2"
make nothing
```

Inline too: `harness report --bogus` and `make nothing`.
"""
    found = [re.sub(r" \(Possible options: [^)]*\)", "", p) for p in problems_of(repo, page)]
    assert found == [
        "docs/page.md:12: `harness report`: No such option: --bogus",
        "docs/page.md:12: `make nothing`: no such target in the Makefile",
        "docs/page.md:3: `harness run`: No such option: --bogus",
        "docs/page.md:4: `harness` has no command 'frobnicate'",
        "docs/page.md:5: `harness compare` --format: 'xml' is not one of table, md, json",
        "docs/page.md:6: `harness diffusers tiny-checkpoint` --model: 'wan' is not one of ltx2, wan2.1_t2v, "
        "wan2.2_t2v, wan2.1_i2v, wan2.2_i2v",
        "docs/page.md:7: `harness run`: Invalid value: expected a number of runs (1 or more) or auto (got 'many')",
        "docs/page.md:9: `make nothing`: no such target in the Makefile",
    ]


def test_a_choice_the_cli_declares_is_checked(repo):
    app = typer.Typer()

    @app.command()
    def go(mode: Literal["fast", "slow"] = typer.Option("fast")) -> None: ...

    @app.command()
    def stop() -> None: ...

    doc = parse(repo / "p.md", "p.md", "```sh\nharness go --mode slow\nharness go --mode medium\n```\n")
    (problem,) = Checker(repo, typer.main.get_command(app)).static(doc)
    assert problem.startswith("p.md:3: `harness go`: Invalid value for '--mode'") and "'medium'" in problem


def test_missing_paths_links_and_anchors_fail(repo):
    page = """# Page

See `scenarios/a.yaml`, `scenarios/*.yaml`, [the other page](other.md#its-part) and [below](#page).
See `scenarios/gone.yaml`, `reports/examples/y/report.md`, [gone](gone.md), [part](other.md#nope).

```sh
harness run scenarios/gone.yaml
```
"""
    assert problems_of(repo, page) == [
        "docs/page.md:4: scenarios/gone.yaml does not exist",
        "docs/page.md:4: reports/examples/y/report.md does not exist",
        "docs/page.md:4: link gone.md: gone.md does not exist",
        "docs/page.md:4: link other.md#nope: no heading #nope in other.md",
        "docs/page.md:7: scenarios/gone.yaml does not exist",
    ]


def test_an_excerpt_must_be_lines_of_its_report(repo):
    good = """<!-- doc-check: from reports/examples/x/report.md -->
```text
- arm: outside: 9.50x the floor's (...)
...
| a | 1 |
```
"""
    assert problems_of(repo, good) == []
    stale = good.replace("9.50x", "9.60x")
    assert problems_of(repo, stale) == [
        "docs/page.md:3: not a line of reports/examples/x/report.md (after the ones above): "
        '"- arm: outside: 9.60x the floor\'s (...)"'
    ]
    bare = "```text\nanything\n```\n"
    assert problems_of(repo, bare) == [
        "docs/page.md:1: a ```text block needs `<!-- doc-check: from FILE -->` above it"
    ]


def test_a_long_prose_line_fails_but_not_a_table_or_code(repo):
    long = "x" * (MAX_LINE + 1)
    page = f"{long}\n\n| {long} |\n\n```python\n{long}\n```\n"
    assert problems_of(repo, page) == [
        f"docs/page.md:1: {MAX_LINE + 1} characters, over {MAX_LINE} (outside tables and code)"
    ]


def test_matching_rules():
    assert line_problem("speed-up 0.54x: too few runs", "speed-up 0.543x: too few runs") is None
    assert line_problem("fp16 ...", "fp32 x") == "text differs"  # digits inside a word are text
    assert line_problem("range 4.62-19.5", "range 4.62-19.5") is None  # a dash is no minus sign
    assert line_problem("p=1.4e-25", "p=1.41e-25") is None
    assert line_problem("a 1.00", "a 1.02") == "1.02 is not 1.00 (within 1 %)"
    assert match_lines(["a", "...", "z"], ["a", "z"]) is None  # ... matches no line too
    assert match_lines(["a", "..."], ["a", "b", "c"]) is None
    miss = match_lines(["a", "...", "c 3"], ["a", "b", "c 4"])
    assert miss is not None and (miss.expected_index, miss.actual_index) == (2, 2)


def test_console_lines_before_a_command_are_a_problem(repo):
    doc = parse(repo / "p.md", "p.md", "```console\noutput\n$ true\n```\n")
    assert console_commands(doc.blocks[0])[1] == ["p.md:2: console output before any `$ ` command"]
