"""Runners: turn one RunSpec into a process that writes output.mp4, timing.json and attn_calls.json;
found by name in ``harness.plugins.RUNNERS`` (``get_runner``), each imported when first asked for."""

from harness.runners.base import Launch, Runner, get_runner, register_runner

__all__ = ["Launch", "Runner", "get_runner", "register_runner"]
