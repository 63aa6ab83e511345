"""A shadowed run's attention from its spec, as every runner builds it: ``shadowed_attention``."""

from __future__ import annotations

from pathlib import Path

from harness.attention.insitu.recorder import InSituRecorder
from harness.attention.insitu.shadow import ShadowedAttention
from harness.attention.insitu.sites import CallSites
from harness.attention.registry import AttentionOp
from harness.attention.wrappers import make_attention
from harness.errors import BackendUnavailable
from harness.records import InSituSettings, ShadowSpec


def shadowed_attention(
    primary: AttentionOp,
    shadows: list[ShadowSpec],
    settings: InSituSettings | None,
    folder: Path,
    *,
    primary_name: str,
    rank: str | int = "0",
    sites: CallSites | None = None,
) -> ShadowedAttention:
    """The primary with its shadows (each its own counted chain, no fallback), recording to ``folder``
    as ``rank``; a shadow that cannot run here is noted and left out. Close ``result.recorder`` at the end."""
    settings = settings or InSituSettings()
    recorder = InSituRecorder(folder, settings, rank=rank, sites=sites)
    ops: dict[str, AttentionOp] = {}
    for s in shadows:
        try:
            ops[s.name] = make_attention(s)
        except BackendUnavailable as err:
            recorder.note(f"shadow {s.name} not measured: {err}")
    return ShadowedAttention(
        primary,
        ops,
        sample_rows=settings.sample_rows,
        seed=settings.seed,
        recorder=recorder,
        primary_name=primary_name,
    )
