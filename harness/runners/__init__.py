"""Runners: turn one RunSpec into a process that writes output.mp4, timing.json and attn_calls.json."""

from harness.runners.base import Launch, Runner, get_runner, register_runner, runner_names

__all__ = ["Launch", "Runner", "get_runner", "register_runner", "runner_names"]
