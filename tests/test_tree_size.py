"""The tracked tree stays small: the files git tracks (those that exist in the working tree) take at
most 16 MiB on disk, counted as ``git ls-files | xargs du -ch`` counts (allocated blocks).
Over the limit the failure names the ten largest files. The committed examples are the usual
cause: they keep report.md, pr.md, results.json, the top screenshot, the figures and JPEG
thumbnails, never the campaign's media (reports/examples/, docs/reports.md). 12 MiB until the
CPU dose-response example (1.3 MB: 42 runs' records) came, 14 MiB until it planted by step too
(3.5 MB: 115 runs; 2.5 MB once results.json named a comparison's runs by key, schema 7)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 16 * 1024 * 1024  # bytes on disk: the 16M of `git ls-files | xargs du -ch`


def tracked_sizes() -> list[tuple[int, str]]:
    """(bytes on disk, path) of every tracked file that exists, largest first."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (no .git)")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=60
        ).stdout
    except subprocess.CalledProcessError as err:
        pytest.skip(f"git ls-files failed: {err.stderr.decode(errors='replace').strip()}")
    sizes = []
    for name in out.decode().split("\0"):
        if not name:
            continue
        try:
            st = os.lstat(ROOT / name)
        except FileNotFoundError:  # deleted in the working tree, not yet committed
            continue
        sizes.append((st.st_blocks * 512, name))  # du's measure
    return sorted(sizes, reverse=True)


def mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def test_the_tracked_tree_is_under_12_mib():
    sizes = tracked_sizes()
    total = sum(n for n, _ in sizes)
    largest = "\n".join(f"  {mib(n):>10}  {name}" for n, name in sizes[:10])
    assert total <= LIMIT, (
        f"the tracked tree is {mib(total)} in {len(sizes)} files, over {mib(LIMIT)}; the largest:\n{largest}"
    )
