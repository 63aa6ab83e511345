"""Without PyAV (not installed, or installed but broken), `harness report` and `harness compare` say
so in one line naming the install, and exit 3: the machine lacks a dependency, the harness has no bug."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_testutil import ROOT, the_error_line

sys.path.insert(0, str(Path(__file__).resolve().parent / "report"))
from campaign_factory import ArmSpec, make_campaign  # noqa: E402

# `harness ARGS` in a child whose interpreter cannot import av: None in sys.modules is what Python
# answers for a module that is not there ("import of av halted").
NOT_INSTALLED = "import sys; sys.modules['av'] = None; from harness.cli import main; main(sys.argv[1:])"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    arms = [ArmSpec("torch_sdpa", role="reference"), ArmSpec("cand", noise=1.0)]
    return make_campaign(tmp_path_factory.mktemp("pyav"), arms).path


def without_av(*args: str, broken: Path | None = None) -> subprocess.CompletedProcess:
    env = None
    if broken is not None:  # an av package whose import fails (a PyAV built against another FFmpeg)
        import os

        env = {**os.environ, "PYTHONPATH": str(broken)}
        code = "import sys; from harness.cli import main; main(sys.argv[1:])"
    else:
        code = NOT_INSTALLED
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                          env=env)  # fmt: skip


def test_report_without_pyav_is_one_line_naming_the_install(campaign: Path) -> None:
    res = without_av("report", str(campaign))
    line = the_error_line(res)
    assert "PyAV is not installed" in line and "pip install av" in line, line
    assert res.returncode == 3, res.stderr


def test_compare_without_pyav_is_one_line_naming_the_install(campaign: Path) -> None:
    runs = campaign / "runs"
    for a, b in (
        (runs / "torch_sdpa", runs / "cand"),
        (runs / "torch_sdpa" / "output.mp4", runs / "cand" / "output.mp4"),
    ):
        res = without_av("compare", str(a), str(b))
        line = the_error_line(res)
        assert "PyAV is not installed" in line and "pip install av" in line, line
        assert res.returncode == 3, res.stderr


def test_a_broken_pyav_is_named_with_its_error(campaign: Path, tmp_path: Path) -> None:
    (tmp_path / "av").mkdir()
    (tmp_path / "av" / "__init__.py").write_text(
        "raise ImportError('libavformat.so.61: cannot open shared object file: No such file or directory')\n"
    )
    res = without_av("compare", str(campaign / "runs" / "torch_sdpa"), str(campaign / "runs" / "cand"),
                     broken=tmp_path)  # fmt: skip
    line = the_error_line(res)
    assert "PyAV" in line and "libavformat.so.61" in line and "pip install" in line, line
    assert res.returncode == 3, res.stderr
