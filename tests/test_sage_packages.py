"""make sageattention's installer (harness.sage_packages): the pinned SageAttention2 source with
its sha256 checked, never on a machine without a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import sage_packages as sp

REPO = Path(__file__).resolve().parents[1]
TARBALL = REPO.parent / "shared" / "vendor" / "sageattention-d1a57a5.tar.gz"
SHA256 = "ed5e6c676ae75086c4ddf539dec83d2671a0c84ad33e013d1fba67753321dd51"
needs_tarball = pytest.mark.skipif(not TARBALL.is_file(), reason=f"{TARBALL} absent (the pinned source)")


def test_make_target_checks_the_digest_the_vendor_readme_gives():
    makefile = (REPO / "Makefile").read_text()
    assert f"SAGEATTENTION_SHA256 ?= {SHA256}" in makefile and "harness.sage_packages" in makefile
    readme = REPO.parent / "shared" / "vendor" / "README.md"
    if readme.is_file():
        assert SHA256 in readme.read_text()


@pytest.mark.skipif(sp.gpu_here() is None, reason="a GPU is visible: the refusal is for machines without one")
def test_refused_without_a_gpu_in_one_line_and_exit_2(tmp_path, capsys):
    rc = sp.main(["--tarball", str(TARBALL), "--sha256", SHA256, "--dest", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "sees no GPU" in err and "Traceback" not in err
    assert not (tmp_path / "d").exists()


@needs_tarball
def test_sageattention2_extracts_its_triton_path_with_the_fused_stub_and_marker(tmp_path, monkeypatch):
    folder = sp.install_sageattention2(TARBALL, SHA256, tmp_path)
    package = folder / "sageattention"
    assert (package / "core.py").is_file() and (package / "triton" / "attn_qk_int8_per_block.py").is_file()
    assert "from . import _fused" in (package / "quant.py").read_text()  # why the stub is there
    assert (package / "_fused.py").read_text() == sp.FUSED_STUB
    marker = json.loads((folder / sp.MARKER).read_text())
    assert marker["commit"].startswith("d1a57a5") and marker["source_sha256"] == SHA256
    assert marker["version"] == "2.2.0"
    monkeypatch.setenv(sp.DIR_ENV, str(tmp_path))
    assert sp.installed("sageattention2") and not sp.installed("sageattention1")
    assert [p.name for p in tmp_path.iterdir()] == [sp.PACKAGES["sageattention2"].folder]  # no temporaries


@needs_tarball
def test_a_wrong_digest_installs_nothing(tmp_path):
    with pytest.raises(sp.InstallError, match="sha256"):
        sp.install_sageattention2(TARBALL, "0" * 64, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_incomplete_folder_is_not_an_install(tmp_path, monkeypatch):
    monkeypatch.setenv(sp.DIR_ENV, str(tmp_path))
    pkg = sp.PACKAGES["sageattention1"]
    pkg.path().mkdir(parents=True)
    sp.write_marker(pkg.path(), pkg)
    assert not sp.installed("sageattention1")  # a marker without the package beside it
    (pkg.path() / "sageattention").mkdir()
    (pkg.path() / "sageattention" / "__init__.py").write_text("")
    assert sp.installed("sageattention1")
    (pkg.path() / sp.MARKER).write_text("{not json")
    assert not sp.installed("sageattention1")
