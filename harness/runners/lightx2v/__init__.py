"""The LightX2V runner: real LightX2V inferences under torchrun, one per arm.

In the harness process: ``runner`` (the Runner, wiring the stages), ``params`` (the typed
parameters a spec records), ``command``, ``preflight`` and ``finalize``; ``schema`` is the
scenario block (kept free of heavy imports). Inside LightX2V's processes (standard library at
import time): ``launch`` in every rank, with ``counting`` and ``tee``; ``probe`` (the
pre-flight's questions); ``rank_env``; ``checkpoint`` (the synthetic checkpoint writer).
``overhead`` is a tool above the campaign machinery; nothing here imports it.
"""
