"""What this machine offers: the environment fingerprint recorded with every campaign's numbers,
installed package versions, and the one rule that picks the device a stage computes on."""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

# The distributions whose versions the fingerprint records.
PACKAGES = tuple(
    "torch triton amd-aiter aiter sageattention lightx2v diffusers transformers av "
    "opencv-python-headless opencv-python numpy scikit-image submitit".split()
)


def _run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=5.0, check=False, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git(args: list[str], cwd: Path) -> str | None:
    # GIT_DIR, GIT_WORK_TREE, ... of the caller (a hook, a CI step) would point git at another repository
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return _run(["git", *args], cwd=cwd, env=env)


def git_info(root: Path, *, package: str | None = None) -> dict[str, Any] | None:
    """SHA and dirty flag of the checkout whose top is ``root`` itself (not an enclosing repository),
    else None; with ``package``, it must also track ``root/package/__init__.py``."""
    try:
        root = Path(root).resolve()
    except (OSError, RuntimeError):
        return None
    if not root.is_dir():
        return None
    top = _git(["rev-parse", "--show-toplevel"], root)
    if top is None or Path(top).resolve() != root:
        return None
    if package is not None and not _git(["ls-files", "--", f"{package}/__init__.py"], root):
        return None
    sha = _git(["rev-parse", "HEAD"], root)
    if sha is None:
        return None
    status = _git(["status", "--porcelain", "--untracked-files=no"], root)
    return {"sha": sha, "dirty": bool(status)}


def package_version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    return {name: version for name in names if (version := package_version(name)) is not None}


# The device files a GPU that torch can use shows on Linux: NVIDIA (CUDA), AMD (ROCm), WSL.
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")


def gpu_device_nodes() -> list[str]:
    """The GPU device files present here (none: torch sees no GPU either); not Linux: all, ask torch."""
    linux = sys.platform.startswith("linux")
    return [p for p in GPU_DEVICE_NODES if not linux or os.path.exists(p)]


def resolve_device(device: str = "auto", *, context: str | None = None) -> str:
    """Where a stage computes: "cpu", "cuda[:N]" or "torch:cpu"; "auto" is a GPU when torch sees one
    (torch not imported where no GPU device file exists). ``context`` starts an error."""
    where = f"{context}: " if context else ""
    if device == "cpu":
        return "cpu"
    if device == "auto" and not gpu_device_nodes():
        return "cpu"  # what torch would answer, without importing it (about 0.9 GB of RSS)
    try:
        import torch
    except ImportError:
        if device == "auto":
            return "cpu"
        raise HarnessError(f"{where}device {device!r} needs torch, which is not installed") from None
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("torch:"):
        return device
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise HarnessError(f"{where}device {device!r} asked for, but torch sees no CUDA/ROCm GPU")
        return device
    raise HarnessError(f"{where}unknown device {device!r}: use auto, cpu, cuda[:N] or torch:cpu")


def cpu_model() -> str | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def torch_info() -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {"available": False}
    info: dict[str, Any] = {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "threads": torch.get_num_threads(),
        "gpus": [],
    }
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            gpu = {"index": i, "name": p.name, "memory_gib": round(p.total_memory / 2**30, 1)}
            if info["hip"]:
                gpu["arch"] = getattr(p, "gcnArchName", None)
            else:
                gpu["arch"] = f"sm_{p.major}{p.minor}"
                gpu["compute_capability"] = f"{p.major}.{p.minor}"
            info["gpus"].append(gpu)
    return info


def driver_version(hip: bool) -> str | None:
    if hip:
        try:
            return Path("/sys/module/amdgpu/version").read_text().strip() or None
        except OSError:
            return _run(["rocm-smi", "--showdriverversion"])
    out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return out.splitlines()[0] if out else None


def rocm_version() -> str | None:
    for p in (Path("/opt/rocm/.info/version"), Path("/opt/rocm/.info/version-dev")):
        with contextlib.suppress(OSError):
            return p.read_text().strip()
    return None


def harness_git(package_dir: Path = Path(__file__).resolve().parent) -> dict[str, Any] | None:
    """The harness's own commit, only from a checkout whose pyproject.toml names the project "harness"."""
    root = Path(package_dir).resolve().parent
    if _project_name(root / "pyproject.toml") != "harness":
        return None
    return git_info(root, package=Path(package_dir).resolve().name)


def with_analysis_commit(fp: dict[str, Any]) -> dict[str, Any]:
    """A campaign's fingerprint with, where its run recorded no harness commit (an ingest records no
    fingerprint), the analysing harness's as ``analysis_harness_git`` (None: not a checkout either)."""
    return fp if fp.get("harness_git") else {**fp, "analysis_harness_git": harness_git()}


def _project_name(pyproject: Path) -> str | None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the [project] table's name line
        import re

        try:
            text = pyproject.read_text(errors="replace")
        except OSError:
            return None
        found = re.search(r'^\[project\][^\[]*?^name\s*=\s*["\']([^"\']*)["\']', text, re.M | re.S)
        return found.group(1) if found else None
    try:
        with open(pyproject, "rb") as fh:
            name = tomllib.load(fh).get("project", {}).get("name")
    except (OSError, ValueError):
        return None
    return name if isinstance(name, str) else None


def fingerprint(
    env_vars: dict[str, str] | None = None, extra_repos: dict[str, str] | None = None
) -> dict[str, Any]:
    """Everything a reader needs to trust or reproduce the figures; cheap (a few subprocesses)."""
    t = torch_info()
    fp: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch": t,
        "driver": driver_version(bool(t.get("hip"))) if t.get("gpus") else None,
        "rocm": rocm_version() if t.get("hip") else None,
        "packages": package_versions(),
        "harness_git": harness_git(),
        "env": dict(env_vars or {}),
    }
    for name, path in (extra_repos or {}).items():
        fp[f"{name}_git"] = git_info(Path(path)) if Path(path).exists() else None
    return fp


def summary_lines(fp: dict[str, Any]) -> list[tuple[str, str]]:
    """Short (label, value) pairs for tables."""
    t = fp.get("torch", {})
    gpus = t.get("gpus") or []
    gpu = ", ".join(f"{g['name']} ({g.get('arch')})" for g in gpus) or "none"
    backend = f"HIP {t['hip']}" if t.get("hip") else (f"CUDA {t['cuda']}" if t.get("cuda") else "CPU build")
    rows = [
        ("host", str(fp.get("hostname"))),
        ("cpu", f"{fp.get('cpu')} x{fp.get('cpu_count')}"),
        ("gpu", gpu),
        ("torch", f"{t.get('version')} ({backend})"),
        ("driver", str(fp.get("driver") or "-")),
    ]
    rows += [("rocm", fp["rocm"])] if fp.get("rocm") else []
    # torch is already shown with its CUDA/HIP build above
    rows += [(name, ver) for name, ver in sorted((fp.get("packages") or {}).items()) if name != "torch"]
    for key, val in sorted(fp.items()):
        if key.endswith("_git"):
            rows.append((key, f"{val['sha'][:12]}{' (dirty)' if val['dirty'] else ''}" if val else "-"))
    return rows + [(f"env {k}", v) for k, v in sorted((fp.get("env") or {}).items())]
