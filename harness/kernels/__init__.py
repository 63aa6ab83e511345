"""Kernel benchmark (scenario kind ``kernels``, command ``harness kernels``): attention backends
measured one call at a time on the model's shapes.

- ``schema``: the ``kernels:`` block of a scenario (shapes, backends, timing options);
- ``results``: what kernels.json holds, with its conventions;
- ``measure``: accuracy against an exact reference, timers, bitwise comparison;
- ``agreement``: an emulator beside the kernel it models, per shape (rel L1 ratio, fitted scales);
- ``run``: every shape x backend measured, and the command's entry point;
- ``report``: report.md (the pull-request tables) and index.html.
"""
