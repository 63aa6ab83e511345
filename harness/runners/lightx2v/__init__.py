"""The LightX2V runner: real LightX2V inferences under torchrun, one per arm.

In the harness process: ``runner`` (the Runner, wiring the stages), ``params`` (the typed
parameters a spec records), ``command``, ``preflight``, ``finalize`` and ``layers`` (a timed
run's per-layer seconds); ``schema`` is the scenario block (kept free of heavy imports). Inside
LightX2V's processes (standard library at import time): ``launch`` in every rank, with
``counting`` (calls per backend and step, K/V reversal), ``hooks`` (call sites from LightX2V's
own step and block loops), ``serve`` (what an in-scope call goes through: schedule, first-call
check, shadows), ``direct`` (the backend against its op), ``shadows`` (in-situ shadows as ops of
``harness.attention.insitu``), ``latents`` and ``tee``; ``probe`` (the pre-flight's questions);
``rank_env``; ``checkpoint`` (the synthetic checkpoint writer); ``shims`` (``sageattention``
packages served by aiter's op or by the harness's emulator). ``overhead`` is a tool above the
campaign machinery; nothing here imports it.
"""
