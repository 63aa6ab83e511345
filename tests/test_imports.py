"""The package's import graph and its house rules: no module imports itself back through others,
every module imports alone (so no import order hides a cycle or a missing dependency), no module
imports from a higher layer, no module is over 500 lines, and no ``_private`` name is used
outside the module that defines it.

The graph counts every ``import`` statement of a harness module, function-level ones too: an
import deferred into a function still ties the two modules together.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "harness"
# Loaded under another name (they stand in for a third-party package inside LightX2V's process).
NOT_MODULES = (PACKAGE / "runners" / "shims",)
MAX_LINES = 500

# The agreed layer order, low -> high: a module imports only from its own layer or lower ones.
# A name covers the module and everything under it; the longest name that matches decides, and
# "harness" alone is the package's __init__. A name ending in "*" covers every module whose
# dotted name starts with it. Entries for packages that do not exist yet are fine.
LAYERS: dict[str, int] = {
    # L0 foundation
    "harness": 0,
    "harness.errors": 0,
    "harness.number_format": 0,
    "harness.text_table": 0,
    "harness.registry": 0,
    "harness.strict_yaml": 0,
    "harness.records": 0,
    "harness.run_keys": 0,
    "harness.insitu_records": 0,
    "harness.cli_startup": 0,
    "harness.input_files": 0,
    "harness.safe_write": 0,
    "harness.safe_math": 0,
    "harness.rule": 0,
    "harness.emulator_provenance": 0,
    # L1
    "harness.store": 1,
    "harness.writer_lock": 1,
    "harness.envinfo": 1,
    "harness.media": 1,
    "harness.media_audio": 0,
    "harness.pixel_formats": 1,
    "harness.sage_packages": 1,
    "harness.scenario": 1,
    "harness.metrics": 1,  # the metric registry: the scenario's verdict rules name its judged energies
    # L2
    "harness.attention": 2,
    "harness.tiny_ref2av": 2,
    "harness.collect": 2,
    "harness.kernels.schema": 2,
    # L3
    "harness.runners": 3,
    "harness.executors": 3,
    # L4
    "harness.plan": 4,
    # L5: two runs or two files
    "harness.compare": 5,
    # L6: campaign-level aggregation, floor, verdicts, results.json
    "harness.analysis": 6,
    # L7: renders results.json only
    "harness.report": 7,
    # L8
    "harness.campaign": 8,
    "harness.ingest": 8,
    "harness.history": 8,
    "harness.kernels": 8,
    "harness.bench": 8,
    # L9: one module per command, and the `python -m` entry points that run one
    "harness.cli": 9,
    "harness.kernels.__main__": 9,
}


def harness_modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(path.is_relative_to(skip) for skip in NOT_MODULES):
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Harness modules that ``name`` imports (``from pkg import sub`` counts as pkg.sub)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in modules:
                    out.add(full)
                elif base in modules:
                    out.add(base)
    out.discard(name)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path [a, b, ..., a], or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycle_in_the_package() -> None:
    modules = harness_modules()
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    assert len(graph) > 50 and "harness.compare.pairwise" in graph["harness.analysis.verdict"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_module_imports_alone() -> None:
    """Each module imported into an interpreter that holds no other harness module."""
    names = sorted(harness_modules())
    code = (
        "import importlib, sys\n"
        "failed = []\n"
        f"for name in {names!r}:\n"
        "    for loaded in [m for m in sys.modules if m == 'harness' or m.startswith('harness.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as err:\n"
        "        failed.append(f'{name}: {type(err).__name__}: {err}')\n"
        "print('\\n'.join(failed))\n"
        "sys.exit(1 if failed else 0)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]


def test_every_module_says_what_it_is_for() -> None:
    missing = [
        name for name, path in harness_modules().items() if not ast.get_docstring(ast.parse(path.read_text()))
    ]
    assert not missing, f"modules without a docstring: {missing}"


def layer_of(name: str) -> int | None:
    """The layer of module ``name`` (None: not in the table)."""
    best, best_len = None, -1
    for key, layer in LAYERS.items():
        if key.endswith("*"):
            hit = name.startswith(key[:-1])
        elif key == "harness":
            hit = name == "harness"
        else:
            hit = name == key or name.startswith(key + ".")
        if hit and len(key) > best_len:
            best, best_len = layer, len(key)
    return best


def test_the_layer_table_reads_as_agreed():
    assert layer_of("harness") == 0 and layer_of("harness.cli_startup") == 0 and layer_of("harness.cli") == 9
    assert layer_of("harness.cli.run") == 9 and layer_of("harness.bench.overhead") == 8
    assert layer_of("harness.kernels.schema") == 2 and layer_of("harness.kernels.run") == 8
    assert layer_of("harness.runners.lightx2v.runner") == 3 and layer_of("harness.scenario.model") == 1
    assert layer_of("harness.nowhere") is None


def layer_violations(modules: dict[str, Path]) -> list[str]:
    out = []
    for name, path in sorted(modules.items()):
        mine = layer_of(name)
        if mine is None:
            out.append(f"{name}: not in the layer table")
            continue
        for dep in sorted(imported_modules(name, path, modules)):
            theirs = layer_of(dep)
            if theirs is not None and theirs > mine:
                out.append(f"{name} (L{mine}) imports {dep} (L{theirs})")
    return out


def test_layer_violations_are_found():
    with_a_cli_import = {"harness.store": PACKAGE / "campaign.py"}  # campaign.py's text, named as store
    found = layer_violations({**harness_modules(), **with_a_cli_import})
    assert any(v.startswith("harness.store (L1) imports harness.plan (L4)") for v in found), found


def test_no_module_imports_from_a_higher_layer():
    found = layer_violations(harness_modules())
    assert not found, "imports up the layers:\n" + "\n".join(found)


def test_no_module_is_over_500_lines():
    long = {
        name: n
        for name, path in harness_modules().items()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def private_uses(name: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """``_name``s of other harness modules that ``name`` imports or reads as ``module._name``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    aliases: dict[str, str] = {}  # local name -> harness module
    found = []
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in modules and a.asname:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            if base not in modules:
                continue
            for a in node.names:
                full = f"{base}.{a.name}"
                if full in modules:
                    aliases[a.asname or a.name] = full
                elif _private(a.name) and base != name:
                    found.append(f"{name}:{node.lineno} imports {a.name} from {base}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
            owner = aliases.get(node.value.id)
            if owner is not None and owner != name:
                found.append(f"{name}:{node.lineno} reads {node.attr} of {owner}")
    return found


def _private(attr: str) -> bool:
    return attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__"))


def test_private_uses_are_found(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text(
        "from harness.scenario.load import _describe\nimport harness.store as st\nst._create_temp_beside\n"
    )
    modules = {**harness_modules(), "harness.m": mod}
    assert private_uses("harness.m", mod, modules) == [
        "harness.m:1 imports _describe from harness.scenario.load",
        "harness.m:3 reads _create_temp_beside of harness.store",
    ]


def test_no_private_name_is_used_outside_its_module():
    modules = harness_modules()
    found = [use for name, path in sorted(modules.items()) for use in private_uses(name, path, modules)]
    assert not found, "private names used across modules:\n" + "\n".join(found)
