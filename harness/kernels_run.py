"""`harness kernels SCENARIO`: the kernel benchmark of a scenario of kind `kernels`, into the store.

reports/<scenario>/kernels/ gets kernels.json (every figure), report.md (the tables) and
index.html (the same tables as a self-contained page, for CI artifacts).
"""

from __future__ import annotations

from pathlib import Path

from harness.envinfo import fingerprint
from harness.errors import ScenarioError
from harness.scenario import load_scenario
from harness.store import atomic_write_json, atomic_write_text

REPORT_MD = "report.md"
ENV_JSON = "env.json"


def run_kernels_scenario(
    ref: str | Path, *, out_root: Path = Path("reports"), console=None
) -> dict[str, Path]:
    from harness.kernels import KERNELS_JSON, kernels_markdown, run_kernels

    scenario = load_scenario(ref)
    if scenario.kind != "kernels" or scenario.kernels is None:
        raise ScenarioError(
            f"{ref}: scenario {scenario.name} is of kind {scenario.kind!r}; use `harness run`"
        )
    out_dir = Path(out_root) / scenario.name / "kernels"

    def progress(msg: str) -> None:
        if console is not None:
            console.print(f"[kernels] {msg}", markup=False, highlight=False)

    result = run_kernels(scenario.kernels, out_dir, progress, name=scenario.name)
    atomic_write_json(out_dir / ENV_JSON, fingerprint())
    text = kernels_markdown(result)
    atomic_write_text(out_dir / REPORT_MD, text)
    paths = {"kernels.json": out_dir / KERNELS_JSON, "report.md": out_dir / REPORT_MD}
    try:
        from harness.report.html import kernels_html
    except ImportError:  # the page is optional; the markdown and JSON carry every figure
        return paths
    paths["index.html"] = kernels_html(result, text, out_dir)
    return paths
