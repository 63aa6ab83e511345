"""Kernel benchmark (scenario kind ``kernels``, ``harness kernels``): attention backends call by call."""
