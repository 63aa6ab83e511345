"""Kernel benchmark (scenario kind ``kernels``, ``harness kernels``): attention backends, one call at a time."""
