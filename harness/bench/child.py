"""One benchmark side in a fresh process, so that its CPU time and peak RSS are its own.

The protocol, both ends here: the parent (``measure_side``) runs
``python -m harness.bench.child KIND A B DEVICE LIMIT OUT``; the child calls
``harness.bench.sides.run_side`` and writes its ``SideResult`` to OUT (JSON); the parent reads it
back. A child that fails leaves no OUT, and its last line of stderr becomes the error.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from harness.bench.result import SideResult
from harness.errors import HarnessError


def measure_side(kind: str, a: Path, b: Path, *, device: str = "cpu", limit: int = 0) -> SideResult:
    """Run one side (``harness.bench.sides.KINDS``) in a child process and return what it measured."""
    from harness.store import read_record

    with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
        out = Path(tmp) / "side.json"
        cmd = ["-m", "harness.bench.child", kind, str(a), str(b), device, str(limit), str(out)]
        proc = subprocess.run([sys.executable, *cmd], capture_output=True, text=True)
        if proc.returncode == 0 and out.exists():
            return read_record(out, SideResult)
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    raise HarnessError(f"benchmark side {kind!r} failed (exit {proc.returncode}): {tail[0]}")


def main(argv: list[str]) -> int:
    """The child's end: measure the side its arguments name, write the record."""
    from harness.bench.sides import KINDS, run_side
    from harness.store import write_record

    kind, a, b, device, limit, out = argv
    if kind not in KINDS:
        raise SystemExit(f"harness.bench.child: unknown side {kind!r} (one of: {', '.join(KINDS)})")
    write_record(Path(out), run_side(kind, a, b, device, int(limit)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
