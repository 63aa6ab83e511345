"""harness.envinfo: package versions and the one device rule every stage uses."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch

from harness.envinfo import (
    fingerprint,
    git_info,
    harness_git,
    package_version,
    package_versions,
    resolve_device,
)
from harness.errors import HarnessError


def test_package_version_of_installed_and_missing_distributions() -> None:
    assert package_version("torch") == package_versions(("torch",))["torch"]
    assert package_version("no-such-distribution-here") is None
    assert "no-such-distribution-here" not in package_versions(("no-such-distribution-here",))


def test_resolve_device_choices_and_errors_name_the_caller() -> None:
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("torch:cpu") == "torch:cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(HarnessError, match=r"^kernels: unknown device 'tpu'"):
        resolve_device("tpu", context="kernels")
    if not torch.cuda.is_available():
        with pytest.raises(
            HarnessError, match=r"^pipeline config: device 'cuda' asked for, but torch sees no"
        ):
            resolve_device("cuda", context="pipeline config")


# --- provenance: the commit of the right repository, never of a folder above it ----------------------


def git_repo(root: Path, files: dict[str, str]) -> str:
    """A real git checkout at ``root`` holding ``files``, one commit; its SHA."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "one"]):
        subprocess.run(["git", *cmd], cwd=root, env=env, check=True, capture_output=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


HARNESS_FILES = {"pyproject.toml": '[project]\nname = "harness"\n', "harness/__init__.py": ""}


def test_git_info_is_the_checkout_whose_top_is_the_folder(tmp_path: Path) -> None:
    sha = git_repo(tmp_path / "outer", {"README": "x\n", "sub/LightX2V/lightx2v/__init__.py": ""})
    assert git_info(tmp_path / "outer") == {"sha": sha, "dirty": False}
    # a copy without .git inside another checkout: unknown, not the outer commit
    assert git_info(tmp_path / "outer" / "sub" / "LightX2V") is None
    assert git_info(tmp_path / "nowhere") is None
    (tmp_path / "outer" / "README").write_text("changed\n")
    assert git_info(tmp_path / "outer") == {"sha": sha, "dirty": True}


def test_harness_commit_only_from_a_checkout_of_the_harness(tmp_path: Path) -> None:
    own = git_repo(tmp_path / "h", HARNESS_FILES)
    assert harness_git(tmp_path / "h" / "harness") == {"sha": own, "dirty": False}
    # the harness folder copied (no .git) into another project's checkout: that project is not the harness
    git_repo(tmp_path / "proj", {"README": "x\n", "tools/h/pyproject.toml": HARNESS_FILES["pyproject.toml"],
                                 "tools/h/harness/__init__.py": ""})  # fmt: skip
    assert harness_git(tmp_path / "proj" / "tools" / "h" / "harness") is None
    # a checkout whose top holds a harness/ folder but is another project
    git_repo(tmp_path / "other", {"pyproject.toml": '[project]\nname = "other"\n', "harness/__init__.py": ""})
    assert harness_git(tmp_path / "other" / "harness") is None


def test_this_harness_records_its_own_commit_and_lightx2v_copy_is_unknown() -> None:
    here = Path(__file__).resolve().parents[1]
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=here, capture_output=True, text=True)
    if top.returncode != 0 or Path(top.stdout.strip()) != here:
        pytest.skip("this harness is not a git checkout of its own")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True).stdout
    assert (harness_git() or {}).get("sha") == head.strip()
    copy = here / ".lightx2v" / "LightX2V"
    if copy.is_dir() and not (copy / ".git").exists():
        assert git_info(copy) is None  # the copy inside the harness checkout is not the harness's commit
        assert fingerprint(extra_repos={"lightx2v": str(copy)})["lightx2v_git"] is None


def test_git_variables_of_the_caller_do_not_redirect_the_lookup(tmp_path: Path, monkeypatch) -> None:
    git_repo(tmp_path / "a", {"README": "a\n"})
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "a" / ".git"))
    (tmp_path / "b").mkdir()
    assert git_info(tmp_path / "b") is None
