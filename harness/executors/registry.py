"""Executors by name (``local``, ``slurm``), from ``harness.plugins.EXECUTORS``: each one's module
is imported only when it is asked for (the Slurm executor needs submitit)."""

from __future__ import annotations

from typing import Any

from harness.executors.base import Executor
from harness.plugins import EXECUTORS


def get_executor(kind: str, **options: Any) -> Executor:
    """A new executor of ``kind``, built with ``options`` (the Slurm block and resubmission count);
    an unknown kind raises UnknownName (one line, did-you-mean)."""
    return EXECUTORS.get(kind)(**options)
