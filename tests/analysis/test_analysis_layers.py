"""The stages around the analysis keep their places: compare (two runs or two files) imports nothing
of the analysis or the report, the analysis nothing of the report or above, and the report renders
results.json: no collector, no media, no analysis internals (its schema, ``analysis.model``, and the
one call ``build_report`` makes, ``analysis.analyze.analyze_campaign``, excepted)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "harness"
ABOVE_ANALYSIS = ("harness.report", "harness.campaign", "harness.cli", "harness.ingest", "harness.history",
                  "harness.bench", "harness.kernels")  # fmt: skip


def is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports(folder: str) -> dict[str, set[str]]:
    """{module file: harness modules it imports (function-level imports too)}."""
    out = {}
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                names.update(
                    f"{node.module}.{a.name}" for a in node.names if is_module(f"{node.module}.{a.name}")
                )
        out[str(path.relative_to(PACKAGE))] = {n for n in names if n.startswith("harness")}
    return out


def offending(found: dict[str, set[str]], bad) -> dict[str, list[str]]:
    return {
        m: sorted(n for n in names if bad(m, n))
        for m, names in found.items()
        if any(bad(m, n) for n in names)
    }


def test_report_renders_results_only():
    def bad(module: str, name: str) -> bool:
        if name.startswith(
            ("harness.collect", "harness.media", "harness.compare.cache", "harness.compare.hashes")
        ):
            return True
        if name.startswith("harness.analysis") and name not in ("harness.analysis", "harness.analysis.model"):
            return not (module == "report/__init__.py" and name == "harness.analysis.analyze")
        return name.startswith(ABOVE_ANALYSIS[1:])

    assert offending(imports("report"), bad) == {}


def test_analysis_and_compare_import_nothing_above_them():
    assert offending(imports("analysis"), lambda m, n: n.startswith(ABOVE_ANALYSIS)) == {}
    assert (
        offending(imports("compare"), lambda m, n: n.startswith(("harness.analysis", *ABOVE_ANALYSIS))) == {}
    )


def test_no_module_of_these_stages_is_over_500_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for folder in ("analysis", "compare", "report")
        for p in (PACKAGE / folder).rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 500
    }
    assert long == {}
