"""Plugins a scenario names (harness.scenario.plugins): imported before the scenario is checked,
recorded with their digest and what they registered, refused in one line when they fail."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from cli_testutil import harness
from plugin_testutil import fp16_kernel

from harness.attention.registry import BACKENDS
from harness.errors import ScenarioError
from harness.records import RunSpec
from harness.scenario.load import load_scenario
from harness.scenario.plugins import is_module_name

SCENARIO = """
name: byok
runner: builtin
plugins: [{plugin}]
builtin: {{preset: tiny}}
arms:
  - {{name: torch_sdpa, attn_type: torch_sdpa, role: reference}}
  - {{name: mine, attn_type: {name}{extra}}}
"""


def write_kernel(folder: Path, name: str = "fp16_sdpa_test", tag: str = "", file: str = "kernel.py") -> Path:
    path = folder / file
    path.write_text(fp16_kernel(name, tag))
    return path


def write_scenario(folder: Path, plugin: str, name: str = "fp16_sdpa_test", extra: str = "") -> Path:
    path = folder / "byok.yaml"
    path.write_text(SCENARIO.format(plugin=plugin, name=name, extra=extra))
    return path


def harness_cli(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return harness(*args, cwd=cwd, env={**os.environ, **(env or {})}, timeout=120)


def test_a_file_beside_the_scenario_registers_before_the_check(tmp_path):
    sub = tmp_path / "kernels"
    sub.mkdir()
    kernel = write_kernel(sub)
    scenario = load_scenario(write_scenario(tmp_path, "kernels/kernel.py"))
    assert scenario.arm("mine").attn_type in BACKENDS
    (ref,) = [p for p in scenario.plugin_refs if p.ref == "kernels/kernel.py"]
    import hashlib

    assert ref.path == str(kernel.resolve()) and ref.module is None
    assert ref.sha256 == hashlib.sha256(kernel.read_bytes()).hexdigest()
    assert ref.registers == ["attention backend fp16_sdpa_test"]  # not the harness's own backends
    # The same file named again (another spelling of its path) is one plugin, imported once.
    twice = write_scenario(tmp_path, "[kernels/kernel.py, ./kernels/../kernels/kernel.py]")
    twice.write_text(twice.read_text().replace("plugins: [[", "plugins: [").replace("]]", "]"))
    assert [p.ref for p in load_scenario(twice).plugin_refs if p.path == str(kernel.resolve())] == [
        "kernels/kernel.py"
    ]


def test_a_module_name_is_imported_from_the_path(tmp_path, monkeypatch):
    package = tmp_path / "site" / "mykernels"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    write_kernel(package, file="fp16.py")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    scenario = load_scenario(write_scenario(tmp_path, "mykernels.fp16"))
    (ref,) = [p for p in scenario.plugin_refs if p.ref == "mykernels.fp16"]
    assert ref.module == "mykernels.fp16" and ref.path == str((package / "fp16.py").resolve())
    assert ref.registers == ["attention backend fp16_sdpa_test"]
    assert is_module_name("a.b_c") and not is_module_name("a/b") and not is_module_name("k.py")


def test_an_edited_file_replaces_what_it_registered_and_an_unchanged_one_is_not_run_again(tmp_path):
    write_kernel(tmp_path, tag=" v1")
    path = write_scenario(tmp_path, "kernel.py")
    first = load_scenario(path).plugin_refs[0]
    cls = BACKENDS.get("fp16_sdpa_test")
    assert load_scenario(path).plugin_refs[0] == first and BACKENDS.get("fp16_sdpa_test") is cls
    write_kernel(tmp_path, tag=" v2")
    second = load_scenario(path).plugin_refs[0]
    assert second.sha256 != first.sha256
    assert BACKENDS.get("fp16_sdpa_test").description == "SDPA computed in fp16 v2"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("import no_such_module_here\n", "ModuleNotFoundError: No module named 'no_such_module_here'"),
        ("def broken(:\n", "SyntaxError: "),
        ("raise SystemExit(3)\n", "SystemExit: 3"),
        (fp16_kernel("torch_sdpa"), "attention backend 'torch_sdpa' is already registered"),
    ],
)
def test_a_plugin_that_fails_is_one_line_naming_file_line_and_error(tmp_path, body, expected):
    (tmp_path / "kernel.py").write_text(body)
    path = write_scenario(tmp_path, "kernel.py", name="torch_sdpa")
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    text = str(err.value)
    assert text.startswith(f"{path}:4: plugins[0]: plugin kernel.py: ") and expected in text
    assert "\n" not in text
    assert "torch_sdpa" in BACKENDS  # the harness's own entry is untouched


def test_validate_exits_2_in_one_line_for_a_failing_plugin_and_a_name_that_exists(tmp_path):
    (tmp_path / "kernel.py").write_text("import no_such_module_here\n")
    res = harness_cli("scenarios", "validate", write_scenario(tmp_path, "kernel.py"), cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        f"{tmp_path / 'byok.yaml'}:4: plugins[0]: plugin kernel.py: "
        "ModuleNotFoundError: No module named 'no_such_module_here'"
    ]
    write_kernel(tmp_path, name="sage_emul_thuml")
    res = harness_cli("scenarios", "validate", write_scenario(tmp_path, "kernel.py", name="x"), cwd=tmp_path)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "attention backend 'sage_emul_thuml' is already registered" in res.stderr
    res = harness_cli("scenarios", "validate", write_scenario(tmp_path, "missing.py"), cwd=tmp_path)
    assert res.returncode == 2 and f"no such file {tmp_path / 'missing.py'}" in res.stderr


def test_unknown_options_are_refused_when_the_scenario_is_checked(tmp_path):
    write_kernel(tmp_path)
    path = write_scenario(tmp_path, "kernel.py", extra=", attn_options: {block: 32, blokc: 16}")
    with pytest.raises(
        ScenarioError, match=r"byok.yaml:8: arms\[1\].attn_options: unknown option\(s\) blokc "
    ):
        load_scenario(path)
    good = write_scenario(tmp_path, "kernel.py", extra=", attn_options: {block: 32}")
    assert load_scenario(good).arm("mine").attn_options == {"block": 32}
    bad_builtin = tmp_path / "builtin.yaml"
    bad_builtin.write_text(
        "name: b\nrunner: builtin\narms:\n"
        "  - {name: r, attn_type: torch_sdpa, role: reference, attn_options: {sdpa_backnd: math}}\n"
    )
    with pytest.raises(ScenarioError, match=r"unknown option\(s\) sdpa_backnd for backend 'torch_sdpa'"):
        load_scenario(bad_builtin)


def test_backends_lists_a_scenarios_plugin_backends_and_an_installed_entry_point(tmp_path):
    write_kernel(tmp_path)
    res = harness_cli("backends", write_scenario(tmp_path, "kernel.py"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "fp16_sdpa_test" in res.stdout and "(plugin kernel.py)" in " ".join(res.stdout.split())
    # An installed distribution declaring the entry point: found by importlib.metadata, as pip leaves it.
    site = tmp_path / "site"
    (site / "epkernel").mkdir(parents=True)
    (site / "epkernel" / "__init__.py").write_text(fp16_kernel("ep_fp16", " (entry point)"))
    info = site / "epkernel-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: epkernel\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[harness.plugins]\nfp16 = epkernel\n")
    res = harness_cli("backends", cwd=tmp_path, env={"PYTHONPATH": str(site), "COLUMNS": "200"})
    assert res.returncode == 0, res.stderr
    (row,) = [line for line in res.stdout.splitlines() if "ep_fp16" in line]
    assert "(plugin entry point fp16)" in row
    res = harness_cli("scenarios", "validate", write_scenario(tmp_path, "kernel.py", name="ep_fp16"),
                      cwd=tmp_path, env={"PYTHONPATH": str(site)})  # fmt: skip
    assert res.returncode == 0, res.stderr


def test_the_spec_hash_follows_the_code_a_run_calls_and_the_plugins_its_process_imports(tmp_path):
    spec = RunSpec(scenario="s", runner="builtin", arm="a", seed=1, attn_type="x")
    coded = spec.model_copy(update={"code": {"x": "1" * 64}})
    assert coded.spec_hash() != spec.spec_hash()
    assert coded.model_copy(update={"code": {"x": "2" * 64}}).spec_hash() != coded.spec_hash()
    kernel = write_kernel(tmp_path)
    refs = load_scenario(write_scenario(tmp_path, kernel.name)).plugin_refs
    with_plugin = coded.model_copy(update={"plugins": refs})
    assert with_plugin.plugins and with_plugin.spec_hash() != coded.spec_hash()
    # by its digest, not where it lies: the same file elsewhere is the same spec, an edited one is not
    moved = [r.model_copy(update={"path": "/elsewhere/kernel.py"}) for r in refs]
    edited = [r.model_copy(update={"sha256": "3" * 64}) for r in refs]
    assert coded.model_copy(update={"plugins": moved}).spec_hash() == with_plugin.spec_hash()
    assert coded.model_copy(update={"plugins": edited}).spec_hash() != with_plugin.spec_hash()


pytestmark = pytest.mark.usefixtures("no_plugin_left")
