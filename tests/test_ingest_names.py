"""harness ingest: an attention type is an identifier wherever it comes from (--attn-type, a
config.json's attn_type, a manifest's attn_type); anything else is one line naming the flag or the
file and field, exit 2, and nothing written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent / "report"))
from campaign_factory import FPS, RATE, base_content  # noqa: E402
from cli_testutil import harness, the_error_line  # noqa: E402

from harness.media import write_av  # noqa: E402

BAD = ["![x](https://track.example/a.png)", "sdpa\n# heading", "<img src=x>", "a b", "", "-x", "x" * 101]


@pytest.fixture(scope="module")
def mp4(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mp4") / "out.mp4"
    frames, audio = base_content(42)
    write_av(path, frames, audio, fps=FPS, sample_rate=RATE, preset="ultrafast")
    return path


@pytest.mark.parametrize("attn", BAD[:4])
def test_attn_type_flag_is_an_identifier(tmp_path, mp4, attn):
    camp = tmp_path / "s" / "c"
    res = harness("ingest", camp, "--arm", "a", "--mp4", mp4, "--attn-type", attn, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    line = the_error_line(res)
    assert line.startswith("error: --attn-type: ") and "not a valid attention type" in line, line
    assert not camp.exists()


@pytest.mark.parametrize("attn", [*BAD[:4], ["sdpa"], 3])
def test_config_attn_type_is_an_identifier(tmp_path, mp4, attn):
    camp, config = tmp_path / "s" / "c", tmp_path / "config.json"
    config.write_text(json.dumps({"attn_type": attn, "seed": 42}))
    res = harness("ingest", camp, "--arm", "a", "--mp4", mp4, "--config", config, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    line = the_error_line(res)
    assert line.startswith(f"error: {config}: attn_type: ") and "not a valid attention type" in line, line
    assert not camp.exists()


def test_manifest_attn_type_is_an_identifier(tmp_path, mp4):
    man = tmp_path / "m.yaml"
    arms = [
        {"name": "a", "mp4": str(mp4), "attn_type": "ok_name"},
        {"name": "b", "mp4": str(mp4), "attn_type": BAD[0]},
    ]
    man.write_text(yaml.safe_dump({"campaign": "s/c", "arms": arms}, sort_keys=False))
    res = harness("ingest", man, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    line = the_error_line(res)
    assert line.startswith(f"error: {man}:") and "arms[1].attn_type" in line, line
    assert not (tmp_path / "s").exists()


def test_a_good_attn_type_is_ingested(tmp_path, mp4):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"attn_type": "_diffusers.native-1", "seed": 42}))
    res = harness(
        "ingest", tmp_path / "s" / "c", "--arm", "a", "--mp4", mp4, "--config", config, cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    run = json.loads((tmp_path / "s" / "c" / "runs" / "a" / "run.json").read_text())
    assert run["spec"]["attn_type"] == "_diffusers.native-1"
