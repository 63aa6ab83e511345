"""The runner interface, and runners by name (``harness.registry.RUNNERS``). A runner says what to
launch (``prepare``) and reads what it left (``finalize``); the executor owns the processes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.registry import RUNNERS

if TYPE_CHECKING:
    from harness.records import RunSpec
    from harness.scenario.model import Arm, Scenario


@dataclass
class Launch:
    """One process to start for a run: the exact command, the variables it adds, where it runs."""

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    gpus: int = 0  # GPUs the process needs (Slurm asks for them; local checks visibility)


class Runner(ABC):
    @abstractmethod
    def resolve_params(self, scenario: Scenario, arm: Arm, profile: str | None) -> dict[str, Any]:
        """Runner parameters for one arm after profile and arm overrides (recorded in RunSpec.params)."""

    def harness_backends(self, spec: RunSpec) -> list[str]:
        """The harness backends this run calls (its code identity): the arm's, its shadows', its schedule's."""
        from harness.attention.registry import BACKENDS

        names = [spec.attn_type, *(s.attn_type for s in spec.shadows)]
        if spec.schedule is not None:
            names.append(spec.schedule.exact)
        return [n for n in dict.fromkeys(names) if n in BACKENDS]

    def expect_preflights(self, specs: list[RunSpec]) -> None:  # noqa: B027 - optional hook
        """The plan's runs, before their pre-flights: one process may answer several runs' checks."""

    def preflight(self, spec: RunSpec) -> str | None:
        """A one-line reason why this run cannot start here (recorded as skipped), or None; cheap."""
        return None

    @abstractmethod
    def prepare(self, spec: RunSpec, run_dir: Path, *, dry_run: bool = False) -> Launch:
        """Write whatever the process needs into run_dir (not when dry_run) and say what to launch."""

    def finalize(self, spec: RunSpec, run_dir: Path) -> None:  # noqa: B027 - optional hook
        """After the process exits: write timing.json / attn_calls.json from what it left (logs, per-rank files)."""


def get_runner(name: str) -> Runner:
    """A new runner of ``name``; an unknown name raises UnknownName (one line, did-you-mean)."""
    return RUNNERS.get(name)()
