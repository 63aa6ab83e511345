"""Bad input in a campaign: one clear line naming the file, a non-zero exit, nothing else lost."""

import subprocess
import sys
from pathlib import Path

from harness.store import sha256_file

ROOT = Path(__file__).resolve().parents[2]


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT)  # fmt: skip


def test_corrupt_output_fails_compare_and_report_but_keeps_the_rest(campaign_factory):
    camp = campaign_factory()
    runs = sorted(p.name for p in camp.runs_dir.iterdir() if (p / "output.mp4").exists())
    ref = next(r.key for r in camp.runs() if r.record().spec.role.value == "reference")
    victim = next(r for r in runs if r != ref)
    bad = camp.runs_dir / victim / "output.mp4"
    bad.write_bytes(bad.read_bytes()[:3000])  # truncated mid-file, by the run itself (recorded so)
    rec = camp.run(victim).record()
    rec.outputs["output.mp4"] = sha256_file(bad)
    camp.run(victim).write(rec)
    others = {p: p.read_bytes() for p in camp.runs_dir.rglob("*") if p.is_file() and p != bad}

    res = harness("compare", f"{camp.path}:{ref}", f"{camp.path}:{victim}")
    assert res.returncode == 2  # unreadable media is bad input
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert errors and str(bad) in errors[0]
    assert "Traceback" not in res.stderr

    res = harness("report", camp.path)
    assert res.returncode == 3  # a run of the campaign could not be measured; the rest is reported
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    # the corrupt output, in one line; the campaign's failed arm is named as not measured too
    assert [ln for ln in errors if "ended failed" not in ln] == [errors[0]] and str(bad) in errors[0]
    assert errors[1:] == ["error: broken: ended failed, not ok: not measured"]
    assert (camp.path / "report.md").exists() and (camp.path / "index.html").exists()
    assert {p: p.read_bytes() for p in others} == others, "no other run file was touched"
