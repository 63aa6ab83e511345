"""A shadowed run's attention from its spec: the shadows named in ``RunSpec.shadows`` built as
the usual chains (their own perturbations, counted apart), wrapped with the primary in a
:class:`ShadowedAttention` writing to one rank's recorder. Runners (builtin, LightX2V's
launcher, diffusers) call ``shadowed_attention``; none builds the pieces itself."""

from __future__ import annotations

from pathlib import Path

from harness.attention.insitu.recorder import InSituRecorder
from harness.attention.insitu.shadow import ShadowedAttention
from harness.attention.insitu.sites import CallSites
from harness.attention.registry import AttentionOp
from harness.attention.wrappers import make_attention
from harness.errors import BackendUnavailable
from harness.records import InSituSettings, ShadowSpec


def shadow_ops(shadows: list[ShadowSpec]) -> tuple[dict[str, AttentionOp], list[str]]:
    """Each shadow as its own counted chain (no fallback: a refusal is measured as one), and one
    note per shadow that cannot run on this machine (left out: the run itself goes on)."""
    ops: dict[str, AttentionOp] = {}
    notes: list[str] = []
    for s in shadows:
        try:
            ops[s.name] = make_attention(s)
        except BackendUnavailable as err:
            notes.append(f"shadow {s.name} not measured: {err}")
    return ops, notes


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
    """The primary with its shadows, recording to ``folder`` (a run's ``insitu/``) as ``rank``; a
    shadow unavailable here is named in the meta notes and left out.

    ``sites``: the run's call-site tracker (the one its counts and schedule read); the recorder
    is ``result.recorder`` (close it when the run ends)."""
    settings = settings or InSituSettings()
    recorder = InSituRecorder(folder, settings, rank=rank, sites=sites)
    ops, notes = shadow_ops(shadows)
    shadowed = ShadowedAttention(
        primary,
        ops,
        sample_rows=settings.sample_rows,
        seed=settings.seed,
        recorder=recorder,
        primary_name=primary_name,
    )
    for note in notes:
        recorder.note(note)
    return shadowed
