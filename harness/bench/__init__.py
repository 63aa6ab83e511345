"""Benchmarks of the harness itself: ``harness bench metrics`` (``run``: the metric suite against a naive
per-frame loop), ``harness bench verdicts`` (``verdicts``: the rules' calibration) and the LightX2V
launcher's overhead (``overhead``)."""
