"""The LightX2V runner: real LightX2V inferences under torchrun, one per arm.

In the harness process: ``runner`` (the Runner, wiring ``params``, ``command``, ``preflight`` and
``finalize``); ``schema`` is the scenario block (kept free of heavy imports). Inside LightX2V's
processes (standard library at import time): ``launch`` in every rank, ``probe`` for the
pre-flight, ``checkpoint`` writing a synthetic checkpoint, with ``rank_env`` for what they set
up; ``shims`` holds the ``sageattention`` packages served by aiter's op or the harness's
emulator. ``overhead`` is a tool above the campaign machinery; nothing here imports it.
"""
