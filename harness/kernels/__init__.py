"""Kernel benchmark (scenario kind ``kernels``, command ``harness kernels``): attention backends
measured one call at a time on the model's shapes."""
