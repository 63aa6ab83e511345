"""Executors by name (``local``, ``slurm``): each one's module is imported only when it is asked for.

The executor modules import ``base``; nothing here is imported back by them, so adding an
executor is one module plus one line in ``EXECUTORS``.
"""

from __future__ import annotations

import importlib
from typing import Any

from harness.executors.base import Executor

# name -> (module, class); imported on demand (the Slurm executor needs submitit).
EXECUTORS: dict[str, tuple[str, str]] = {
    "local": ("harness.executors.local", "LocalExecutor"),
    "slurm": ("harness.executors.slurm", "SlurmExecutor"),
}


def executor_names() -> list[str]:
    return list(EXECUTORS)


def get_executor(kind: str, **options: Any) -> Executor:
    """A new executor of ``kind``, built with ``options`` (the Slurm block and resubmission count)."""
    if kind not in EXECUTORS:
        raise ValueError(f"unknown executor {kind!r} ({' or '.join(executor_names())})")
    module, name = EXECUTORS[kind]
    return getattr(importlib.import_module(module), name)(**options)
