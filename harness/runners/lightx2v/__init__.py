"""The LightX2V runner: real LightX2V inferences under torchrun, one per arm. ``runner`` wires the
harness side; ``launch`` (every rank), ``probe`` and ``checkpoint`` run in LightX2V's processes.
"""
