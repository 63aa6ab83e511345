"""Helpers for tests that run the real `harness` command in a child process (imported by the tests)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def harness(*args, cwd: Path = ROOT, umask: int | None = None, **kw) -> subprocess.CompletedProcess:
    """`python -m harness.cli ARGS` to completion, output captured as text."""
    preexec = (lambda: os.umask(umask)) if umask is not None else None
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        capture_output=True, text=True, cwd=cwd, preexec_fn=preexec, **kw,
    )  # fmt: skip


def harness_popen(*args, cwd: Path = ROOT) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def the_error_line(res: subprocess.CompletedProcess, prefix: str = "error: ") -> str:
    """The one line a bad input prints on stderr (asserts there is exactly one and no traceback)."""
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{res.stderr}"
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


TINY = """\
name: {name}
runner: builtin
seed: 3
builtin: {{preset: tiny, save_latents: false}}
profiles: {{3step: {{infer_steps: 4}}}}
arms:
  - {{name: torch_sdpa, attn_type: torch_sdpa, role: reference}}
  - {{name: floor, attn_type: torch_sdpa, kv_reversed: true, role: noise_floor}}
{extra}"""


def tiny_scenario(folder: Path, extra_arms: str = "", name: str = "tiny") -> Path:
    """The smallest real campaign: the builtin pipeline's tiny preset, 3 DiT steps, two exact arms."""
    path = Path(folder) / f"{name}.yaml"
    path.write_text(TINY.format(name=name, extra=extra_arms))
    return path


def statuses(camp: Path) -> dict[str, str]:
    runs = Path(camp) / "runs"
    return {
        p.name: json.loads((p / "run.json").read_text())["status"]
        for p in sorted(runs.iterdir())
        if (p / "run.json").exists()
    }


def tree_digest(root: Path, skip: Path | None = None) -> dict[str, str]:
    """Relative path -> sha256 (or 'dir') of everything under ``root`` except ``skip``."""
    out = {}
    root = Path(root)
    for p in sorted(root.rglob("*")):
        if skip is not None and (p == skip or skip in p.parents):
            continue
        rel = str(p.relative_to(root))
        out[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose command line contains ``text``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z":
            found.append((int(proc.name), cmd.strip()))
    return found


def wait_for(
    cond: Callable[[], object],
    what: str,
    timeout: float = 120.0,
    proc: subprocess.Popen | None = None,
    poll_s: float = 0.05,
):
    """Poll ``cond`` until it returns something true, and return that. Fails naming ``what``
    after ``timeout`` seconds, or as soon as ``proc`` (the process expected to bring it about)
    has ended, with its output: a bounded wait with a clear failure, never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the process ended (exit {proc.returncode}) before {what}:\n{out}\n{err}")
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll_s)


def blocked_on_flock(pid: int, path: Path) -> bool:
    """Whether process ``pid`` waits in flock() on the file ``path`` (the kernel's /proc/locks
    lists a blocked request as ``N: -> FLOCK ADVISORY READ PID MAJ:MIN:INODE ...``; the inode
    is matched, not the device, which an overlay file system names differently)."""
    inode = f":{Path(path).stat().st_ino}"
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if fields[1:3] == ["->", "FLOCK"] and str(pid) in fields and any(f.endswith(inode) for f in fields):
            return True
    return False
