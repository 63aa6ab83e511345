"""Benchmarks of the harness itself: ``run`` (``harness bench metrics``), ``verdicts``, ``overhead``."""
