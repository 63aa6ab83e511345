"""How `harness history` reads its inputs: a damaged or non-UTF-8 results.json is named and left
out (exit 3), never a traceback that stops the whole history; an --out that cannot be written is
exit 2 before anything is read."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "report"))
from campaign_factory import ArmSpec, make_campaign  # noqa: E402

from harness.analysis.analyze import analyze_campaign  # noqa: E402
from harness.history import build_history  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ARMS = [
    ArmSpec("torch_sdpa", role="reference"),
    ArmSpec("nf", role="noise_floor", attn_type="torch_sdpa", kv_reversed=True, noise=2.0),
    ArmSpec("cand", noise=1.0),
]


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)  # fmt: skip


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory) -> Path:
    """Two campaigns' results.json: what the history reads (the analysis writes it; the report's
    pages and figures are not read, so none are drawn)."""
    root = tmp_path_factory.mktemp("hist")
    for name in ("b1", "b2"):
        analyze_campaign(make_campaign(root / name, ARMS))
    return root


@pytest.mark.parametrize(
    "damage, named",
    [
        (
            b'{"campaign_id": "c1", "runs": [], "env": {"\xff": 1}}',
            "results.json is not UTF-8 text (byte 0xff",
        ),
        (b'{"campaign_id": "c1", "runs": [{"key": "x"}]}', "not a harness results.json (campaign_path: "),
        (b'{"campaign_id": "c1", "runs": [1, 2]', "not a readable results.json"),
        (b"", "results.json is empty (0 bytes)"),
    ],
)
def test_one_damaged_results_json_is_named_and_the_rest_written(two_builds, tmp_path, damage, named):
    root = tmp_path / "builds"
    shutil.copytree(two_builds, root)
    bad = next(root.glob("b2/**/results.json"))
    bad.write_bytes(damage)
    res = harness("history", root, "--out", tmp_path / "out")
    assert res.returncode == 3, res.stderr  # main: exit 2 or 4 and nothing written
    assert "Traceback" not in res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: skipped: {bad}") and named in errors[0], errors
    assert "1 campaign(s), 3 run(s)" in res.stdout
    assert (tmp_path / "out" / "history.csv").read_text().count("\n") == 4  # header + the other campaign


def test_a_results_json_of_an_older_schema_is_named_with_how_to_re_analyse_it(two_builds, tmp_path):
    """History reads through the one reader (``read_results``): no older schema is read another way."""
    root = tmp_path / "builds"
    shutil.copytree(two_builds, root)
    old = next(root.glob("b2/**/results.json"))
    text = old.read_text()
    assert text.count('"schema": "harness.report/7"') == 1
    old.write_text(text.replace('"schema": "harness.report/7"', '"schema": "harness.report/4"'))
    res = harness("history", root, "--out", tmp_path / "out")
    assert res.returncode == 3 and "Traceback" not in res.stderr, res.stderr
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")] == [
        f"error: skipped: {old}: schema harness.report/4 is older than this harness reads (harness.report/7); "
        f"re-analyse its campaign with this harness: harness report {shlex.quote(str(old.parent))}"
    ]
    assert "1 campaign(s), 3 run(s)" in res.stdout


def test_every_results_json_damaged_is_exit_3_naming_one(two_builds, tmp_path):
    root = tmp_path / "builds"
    shutil.copytree(two_builds, root)
    for p in root.rglob("results.json"):
        p.write_bytes(b"\x00\xff")
    with pytest.raises(Exception) as err:
        build_history([root], tmp_path / "out")
    assert getattr(err.value, "exit_code", None) == 3 and "no readable results.json" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_an_out_that_cannot_be_written_is_exit_2_before_reading(two_builds, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should go\n")
    res = harness("history", two_builds, "--out", blocker / "history")
    assert res.returncode == 2 and res.stderr.startswith(f"error: --out: {blocker}: not a folder"), res.stderr
