"""thu-ml SageAttention versions side by side: the pinned installs ``make sageattention`` writes.
PyPI has only 1.0.6; SageAttention2 is a pinned tarball (sha256 checked), Triton path only (an empty
``_fused`` for quant.py). Each has a folder under ``SAGEATTENTION_DIR``, loaded under a private name
so both run in one process (LightX2V's processes get the folder on their path instead)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.store import sha256_file

REPO_ROOT = Path(__file__).resolve().parents[1]
DIR_ENV = "SAGEATTENTION_DIR"
MARKER = "harness_install.json"
MARKER_SCHEMA = "harness.sageattention_install/1"
# How `import sageattention` of the Triton-only install passes quant.py's `from . import _fused`.
FUSED_STUB = (
    '"""Written by the harness: the compiled CUDA quantisers are not built (Triton path only).\n\n'
    "SageAttention2's quant.py imports this module unconditionally; the Triton functions never call it.\n"
    '"""\n'
)


@dataclass(frozen=True)
class SagePackage:
    """One pinned SageAttention the harness can install and load by name."""

    label: str  # "SageAttention2 2.2.0 (d1a57a5)"
    version: str
    function: str  # what sage_attn2 runs with it
    folder: str  # under SAGEATTENTION_DIR
    commit: str = ""  # the source commit where there is no release of it

    def path(self) -> Path:
        return install_dir() / self.folder


# By the sage_attn2 backend's ``package`` option, and the LightX2V arm's flavour.
PACKAGES: dict[str, SagePackage] = {
    "sageattention2": SagePackage(
        label="SageAttention2 2.2.0 (d1a57a5)",
        version="2.2.0",
        function="sageattn_qk_int8_pv_fp16_triton",
        folder="sageattention2-d1a57a5",
        commit="d1a57a546c3d395b1ffcbeecc66d81db76f3b4b5",
    ),
    "sageattention1": SagePackage(
        label="SageAttention 1.0.6",
        version="1.0.6",
        function="sageattn",
        folder="sageattention1-1.0.6",
    ),
}


def install_dir() -> Path:
    return Path(os.environ.get(DIR_ENV) or REPO_ROOT / ".sageattention")


def read_marker(pkg: SagePackage) -> dict[str, Any] | None:
    """The install's marker, or None where ``make sageattention`` has not installed it here."""
    try:
        data = json.loads((pkg.path() / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != MARKER_SCHEMA:
        return None
    if not (pkg.path() / "sageattention" / "__init__.py").is_file():
        return None
    return data


def installed(choice: str) -> bool:
    return read_marker(PACKAGES[choice]) is not None


def load(choice: str) -> ModuleType:
    """The pinned package ``choice`` under a private name: it never shadows another ``sageattention``."""
    pkg = PACKAGES[choice]
    alias = f"harness_sageattention_{choice}"
    if alias in sys.modules:
        return sys.modules[alias]
    from harness.scenario.plugins import exec_file_module

    root = pkg.path() / "sageattention"
    return exec_file_module(alias, root / "__init__.py", submodule_search_locations=[str(root)])


def install_sageattention2(tarball: Path, sha256: str, dest: Path) -> Path:
    """SageAttention2's ``sageattention/`` from the pinned tarball (digest checked) into ``dest``."""
    pkg = PACKAGES["sageattention2"]
    digest = sha256_file(tarball)
    if digest != sha256:
        raise InstallError(f"{tarball}: sha256 {digest}, expected {sha256}; not installed")
    target = dest / pkg.folder
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        with tarfile.open(tarball) as tar:
            parts = {m: Path(m.name).parts for m in tar.getmembers()}
            members = [m for m, p in parts.items() if "sageattention" in p[:2] and ".." not in p]
            if not members:
                raise InstallError(f"{tarball}: no sageattention/ package inside; not installed")
            tar.extractall(tmp, members=members, filter="data")
        source = next(Path(tmp).glob("*/sageattention"), None) or Path(tmp) / "sageattention"
        (source / "_fused.py").write_text(FUSED_STUB)
        staged = Path(tmp) / "staged"
        staged.mkdir()
        shutil.move(str(source), staged / "sageattention")
        write_marker(staged, pkg, source_sha256=digest, source=tarball.name)
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(str(staged), target)
    return target


def install_sageattention1(spec: str, dest: Path) -> Path:
    """SageAttention 1.0.6 (a pip requirement or a wheel's path) into ``dest/<folder>``."""
    pkg = PACKAGES["sageattention1"]
    target = dest / pkg.folder
    shutil.rmtree(target, ignore_errors=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile"]
    if subprocess.run([*pip, "--target", str(target), spec]).returncode != 0:
        raise InstallError(f"pip could not install {spec} into {target}")
    write_marker(target, pkg, source=Path(spec).name)
    return target


def write_marker(folder: Path, pkg: SagePackage, **extra: str) -> None:
    data = {"schema": MARKER_SCHEMA, "package": "sageattention", "version": pkg.version, **extra}
    data.update({"commit": pkg.commit} if pkg.commit else {})
    (folder / MARKER).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


class InstallError(Exception):
    """A refused or failed install: one line for the user."""


def gpu_here() -> str | None:
    """Why SageAttention cannot run here (None: torch sees a CUDA or ROCm GPU)."""
    import torch

    if torch.cuda.is_available():
        return None
    kind = "ROCm" if torch.version.hip else "CUDA" if torch.version.cuda else "CPU-only"
    return f"torch {torch.__version__} ({kind}) sees no GPU: SageAttention's Triton kernels need a CUDA or ROCm one"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.sage_packages", description=__doc__.split("\n")[0])
    ap.add_argument("--tarball", type=Path, required=True, help="SageAttention2's pinned source tarball")
    ap.add_argument("--sha256", required=True, help="its expected sha256")
    ap.add_argument("--sa1", default="sageattention==1.0.6", help="SageAttention 1: a requirement or a wheel")
    ap.add_argument(
        "--dest", type=Path, default=None, help=f"install folder (default ${DIR_ENV} or .sageattention)"
    )
    args = ap.parse_args(argv)
    why = gpu_here()
    if why or not args.tarball.is_file():
        why = f"not installed: {why}" if why else f"--tarball {args.tarball}: no such file"
        print(f"make sageattention: {why}", file=sys.stderr)
        return 2
    dest = args.dest or install_dir()
    dest.mkdir(parents=True, exist_ok=True)
    try:
        paths = (
            install_sageattention2(args.tarball, args.sha256, dest),
            install_sageattention1(args.sa1, dest),
        )
    except InstallError as err:
        print(f"make sageattention: {err}", file=sys.stderr)
        return 2
    for path in paths:
        print(f"installed {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
