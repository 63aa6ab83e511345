"""The metric registry: one ``Metric`` per figure, registered by key in ``METRICS``, that every table,
gate, floor band, history and verdict reads; metric.py defines it and registers every family."""
