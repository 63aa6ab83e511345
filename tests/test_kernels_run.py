import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCENARIO = """\
name: kern_tiny
kind: kernels
kernels:
  shapes:
    - {name: tiny, heads: 2, seq_q: 256, head_dim: 64, dtype: bf16}
  backends: [torch_sdpa, sage_emul_thuml, sage_attn2]
  warmup: 0
  repeats: 2
  emulation_repeats: 1
  peak_size: 64
"""


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT)  # fmt: skip


def test_kernels_command_writes_json_and_tables(tmp_path):
    scen = tmp_path / "k.yaml"
    scen.write_text(SCENARIO)
    res = harness("kernels", scen, "--out", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out" / "kern_tiny" / "kernels"
    data = json.loads((out / "kernels.json").read_text())
    rows = {r["label"]: r for r in data["rows"]}
    assert rows["torch_sdpa"]["accuracy"]["cosine"] > 0.99999
    assert 0.99 < rows["sage_emul_thuml"]["accuracy"]["cosine"] < 0.99999
    assert rows["sage_attn2"]["status"] == "skipped" and rows["sage_attn2"]["reason"]
    md = (out / "report.md").read_text()
    assert "| tiny | torch_sdpa |" in md and "sage_attn2" in md
    page = (out / "index.html").read_text()
    assert "<td>torch_sdpa</td>" in page and "kernels.json" in page
    assert "http://" not in page and "https://" not in page  # static: nothing fetched


def test_markdown_sections_parse_tables_and_escape_in_html(tmp_path):
    from harness.report.html import markdown_sections

    md = "## Title\n\nintro <b>line</b>\n\n### Table\n\n| a | b |\n|---|---|\n| 1 | <script>x</script> |\n- note\n"
    (sec,) = markdown_sections(md)
    assert sec.title == "Title" and sec.paragraphs == ["intro <b>line</b>"] and sec.bullets == ["note"]
    (table,) = sec.tables
    assert (
        table.title == "Table" and table.headers == ["a", "b"] and table.rows == [["1", "<script>x</script>"]]
    )


def test_kernels_command_refuses_an_e2e_scenario():
    res = harness("kernels", ROOT / "scenarios" / "e2e_3step.yaml")
    assert res.returncode == 2
    assert "is of kind 'e2e'; use `harness run`" in res.stderr
