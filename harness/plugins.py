"""The registries a scenario and a campaign look names up in, with the harness's own entries as lazy
``"module:attr"`` strings, so this low module names runner modules without importing them (the
scenario core names no runner). Adding a runner is one module plus one line here, or
``RUNNERS.register`` from a plug-in; attention backends register in ``harness.attention.registry``."""

from __future__ import annotations

from typing import Any

from harness.registry import Registry

PART = "harness.scenario.parts:ScenarioPart"

# Runner classes by the name a scenario's `runner:` gives.
RUNNERS: Registry[Any] = Registry("runner", base="harness.runners.base:Runner")
RUNNERS.register("builtin", lazy="harness.runners.builtin:BuiltinRunner")
RUNNERS.register("lightx2v", lazy="harness.runners.lightx2v.runner:LightX2VRunner")
RUNNERS.register("diffusers", lazy="harness.runners.diffusers.runner:DiffusersRunner")

# What a runner adds to the scenario (its block, arm fields, checks); a runner without an entry
# adds nothing.
RUNNER_SCENARIO: Registry[Any] = Registry("runner scenario part", base=PART)
RUNNER_SCENARIO.register("builtin", lazy="harness.runners.builtin:SCENARIO_PART")
RUNNER_SCENARIO.register("lightx2v", lazy="harness.runners.lightx2v.schema:SCENARIO_PART")
RUNNER_SCENARIO.register("diffusers", lazy="harness.runners.diffusers.schema:SCENARIO_PART")

# Scenario kinds other than "e2e" (which the core is), by the name `kind:` gives.
SCENARIO_KINDS: Registry[Any] = Registry("scenario kind", base=PART)
SCENARIO_KINDS.register("kernels", lazy="harness.kernels.schema:SCENARIO_PART")

# Executors by the name `executor.kind` and `--executor` give; the class is built with options.
EXECUTORS: Registry[Any] = Registry("executor", base="harness.executors.base:Executor")
EXECUTORS.register("local", lazy="harness.executors.process:LocalExecutor")
EXECUTORS.register("slurm", lazy="harness.executors.slurm:SlurmExecutor")
