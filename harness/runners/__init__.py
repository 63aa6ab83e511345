"""Runners: turn one RunSpec into a process that writes output.mp4, timing.json and attn_calls.json;
found by name in ``harness.registry.RUNNERS`` (``runners.base.get_runner``), imported when first asked for."""
