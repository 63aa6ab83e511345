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
    """The primary with its shadows, recording to ``folder`` (a run's ``insitu/``) as ``rank`` with the
    run's call sites (the ones its counts and schedule read); close ``result.recorder`` when the run
    ends. Each shadow is its own counted chain, without fallback (a refusal is measured as one); a
    shadow that cannot run on this machine is named in the meta notes and left out (the run goes on)."""
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
