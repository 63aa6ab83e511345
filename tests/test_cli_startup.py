"""harness.cli_startup: a Ctrl-C while the CLI loads is a quiet exit 130 when the CLI is the
program (console script, ``python -m harness.cli``), and nothing changes when it is a library."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_testutil import ROOT

from harness.cli_startup import command_line_module


@pytest.mark.parametrize(
    "argv, module",
    [
        (["python", "-m", "harness.cli", "run", "x.yaml"], "harness.cli"),
        (["python", "-X", "importtime", "-W", "error", "-m", "harness.cli"], "harness.cli"),
        (["python", "-Ximporttime", "-mharness.cli", "--help"], "harness.cli"),
        (["python", "-u", "-m", "harness.kernels"], "harness.kernels"),
        (["python", "-c", "import harness.cli", "-m", "harness.cli"], None),
        (["python", "script.py", "-m", "harness.cli"], None),
        (["python", "-m"], None),
        (["python"], None),
    ],
)
def test_the_module_of_a_command_line(argv, module):
    assert command_line_module(argv) == module


def handler_after_import(orig_argv: list[str] | None) -> str:
    """The SIGINT handler's name in a fresh interpreter after ``import harness.cli``."""
    fake = f"sys.orig_argv = {orig_argv!r}\n" if orig_argv is not None else ""
    code = f"import signal, sys\n{fake}import harness.cli\nprint(signal.getsignal(signal.SIGINT).__name__)\n"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_the_package_import_of_python_m_installs_the_quiet_handler():
    # While `python -m harness.cli` imports the package, sys.argv[0] is "-m" and __main__ is not
    # yet the CLI: the interpreter's own arguments say what runs.
    assert handler_after_import([sys.executable, "-m", "harness.cli", "--help"]) == "_stop_quietly"


def test_imported_as_a_library_nothing_changes():
    assert handler_after_import(None) == "default_int_handler"
