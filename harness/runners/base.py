"""The runner interface and the registry of runners by name.

A runner never runs anything itself: it says what to launch (``prepare``), and makes sense of
what the process left behind (``finalize``). The executor (local or Slurm) owns processes,
time-outs, logs and run.json, so every runner gets resume, crash isolation and Ctrl-C for free.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from harness.records import RunSpec
    from harness.scenario import Arm, Scenario


@dataclass
class Launch:
    """One process to start for a run: the exact command, the variables it adds, where it runs."""

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    gpus: int = 0  # GPUs the process needs (Slurm asks for them; local checks visibility)


class Runner(ABC):
    name: ClassVar[str]

    @abstractmethod
    def resolve_params(self, scenario: Scenario, arm: Arm, profile: str | None) -> dict[str, Any]:
        """Runner parameters for one arm after profile and arm overrides (recorded in RunSpec.params)."""

    def preflight(self, spec: RunSpec) -> str | None:
        """A one-line reason why this run cannot start here (it is then recorded as skipped), or None.

        Must be cheap and must not spend GPU time.
        """
        return None

    @abstractmethod
    def prepare(self, spec: RunSpec, run_dir: Path, *, dry_run: bool = False) -> Launch:
        """Write whatever the process needs into run_dir (not when dry_run) and say what to launch."""

    def finalize(self, spec: RunSpec, run_dir: Path) -> None:  # noqa: B027 - optional hook
        """After the process exits: write timing.json / attn_calls.json from what it left (logs, per-rank files)."""


_RUNNERS: dict[str, type[Runner]] = {}
# Runners live in their own modules; importing on demand keeps `harness --help` fast.
_RUNNER_MODULES = {
    "builtin": "harness.runners.builtin",
    "lightx2v": "harness.runners.lightx2v.runner",
    "diffusers": "harness.runners.diffusers.runner",
}


def register_runner(name: str):
    def deco(cls: type[Runner]) -> type[Runner]:
        cls.name = name
        _RUNNERS[name] = cls
        return cls

    return deco


def runner_names() -> list[str]:
    return sorted(set(_RUNNERS) | set(_RUNNER_MODULES))


def get_runner(name: str) -> Runner:
    if name not in _RUNNERS and name in _RUNNER_MODULES:
        importlib.import_module(_RUNNER_MODULES[name])
    try:
        return _RUNNERS[name]()
    except KeyError:
        raise KeyError(f"unknown runner {name!r}; known: {', '.join(runner_names())}") from None
