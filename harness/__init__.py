"""harness: A/B benchmarking and accuracy evaluation of attention backends."""

__version__ = "0.1.0"
