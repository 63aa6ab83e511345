"""The progress bars of ``harness run``: a campaign Reporter drawn with rich (arms, and the steps of
the arm that runs), each finished run as one line above the bars."""

from __future__ import annotations

from rich.markup import escape
from rich.progress import Progress

from harness.visible import visible


class RichReporter:
    """Progress over arms and over the steps of the arm that runs."""

    def __init__(self, progress: Progress, total: int):
        self.progress = progress
        self.arms = progress.add_task("arms", total=total)
        self.steps = None

    def run_started(self, spec, index, total):
        self.progress.update(self.arms, total=total, description=f"arm {spec.key}")
        if self.steps is not None:
            self.progress.remove_task(self.steps)
        self.steps = self.progress.add_task("  steps", total=None)

    def run_progress(self, step, steps):
        if self.steps is not None:
            self.progress.update(self.steps, completed=step, total=steps)

    def run_finished(self, record):
        self.progress.advance(self.arms)
        if self.steps is not None:  # the step bar belongs to the arm that just ended
            self.progress.remove_task(self.steps)
            self.steps = None
        mark = {"ok": "[green]ok[/]", "skipped": "[yellow]skipped[/]"}.get(record.status.value)
        mark = mark or f"[red]{record.status.value}[/]"
        extra = f" - {escape(visible(record.reason))}" if record.reason else ""
        self.progress.console.print(f"  {record.spec.key}: {mark}{extra}", markup=True, highlight=False)

    def message(self, text):
        self.progress.console.print(visible(text), soft_wrap=True, markup=False, highlight=False)  # one line
