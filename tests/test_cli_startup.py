"""harness.cli_startup: a Ctrl-C while the CLI loads is a quiet exit 130 when the CLI is the
program (console script, ``python -m harness.cli``), and nothing changes when it is a library."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cli_testutil import ROOT, harness

from harness.cli_startup import command_line_module, exit_status

SCENARIO = "scenarios/e2e_3step.yaml"


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
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


@pytest.mark.concurrency
def test_the_package_import_of_python_m_installs_the_quiet_handler():
    # While `python -m harness.cli` imports the package, sys.argv[0] is "-m" and __main__ is not
    # yet the CLI: the interpreter's own arguments say what runs.
    assert handler_after_import([sys.executable, "-m", "harness.cli", "--help"]) == "_stop_quietly"


@pytest.mark.concurrency
def test_imported_as_a_library_nothing_changes():
    assert handler_after_import(None) == "default_int_handler"


# Faults put into a real `python -m harness.cli` process by a sitecustomize module on its path.
SIGTERM_IN_AN_EXIT_HANDLER = """
import atexit, os, signal
atexit.register(lambda: os.kill(os.getpid(), signal.SIGTERM))  # registered first: runs last
"""

# Ctrl-C raised in the first frame run from a string (a dataclass or namedtuple being made) once
# the command's handlers are in place, as a real signal does when it lands there; and CPython's
# own record of an unhandled interrupt as the exit handlers see it (where it can be read).
INTERRUPT_IN_CODE_FROM_A_STRING = """
import atexit, ctypes, signal, sys

def _trace(frame, event, arg):
    startup = sys.modules.get("harness.cli_startup")
    if event != "call" or frame.f_code.co_filename != "<string>" or startup is None:
        return None
    if signal.getsignal(signal.SIGTERM) in (startup._stop_quietly, signal.SIG_DFL):
        return None  # the CLI is still loading
    sys.settrace(None)
    raise KeyboardInterrupt

def _flag():
    try:
        value = ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value
    except (AttributeError, ValueError):
        return
    sys.stderr.write(f"unhandled-interrupt flag: {value}\\n")

atexit.register(_flag)
sys.settrace(_trace)
"""


def run_with_fault(tmp_path, fault: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "sitecustomize.py").write_text(fault)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)  # fmt: skip


@pytest.mark.concurrency
def test_a_signal_after_the_command_ended_changes_neither_its_status_nor_its_output(tmp_path):
    res = run_with_fault(tmp_path, SIGTERM_IN_AN_EXIT_HANDLER, "scenarios", "validate", SCENARIO)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr  # main: a traceback
    assert res.stdout == harness("scenarios", "validate", SCENARIO).stdout != ""


@pytest.mark.concurrency
def test_an_interrupt_that_passed_through_code_from_a_string_exits_130(tmp_path):
    res = run_with_fault(tmp_path, INTERRUPT_IN_CODE_FROM_A_STRING, "scenarios", "validate", SCENARIO)
    lines = res.stderr.splitlines()
    flag = [ln for ln in lines if ln.startswith("unhandled-interrupt flag: ")]
    assert flag in ([], ["unhandled-interrupt flag: 1"]), res.stderr  # the fault did what it is for
    assert res.returncode == 130, (res.returncode, res.stderr)  # main: -2, killed by its own SIGINT
    assert "interrupted" in lines and "Traceback" not in res.stderr, res.stderr


@pytest.mark.parametrize("code, status", [(None, 0), (0, 0), (3, 3), (130, 130), ("a message", 1)])
def test_the_exit_status_follows_sys_exit(code, status, capsys):
    assert exit_status(code) == status
    assert capsys.readouterr().err == ("a message\n" if status == 1 else "")
