"""Records the diffusers runner writes beside the shared ones: its attention counts and its environment."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from harness.records import AttnCallsRecord, RankCalls, Record

DIFFUSERS_ENV_JSON = "diffusers_env.json"


class DiffusersRankCalls(RankCalls):
    """The run's counts. ``calls`` and ``fallbacks`` cover the DiT (the pipeline's transformers): a
    call there served by another backend than the requested one is a fallback. ``errors`` hold the
    other reasons the run is invalid (a bypass, a kernel never reached, a floor never perturbed)."""

    outside_scope: dict[str, int] = Field(default_factory=dict)  # text encoder, connectors, VAE
    bypassed: int = 0  # attention in the DiT that called torch SDPA without the dispatcher
    ops: dict[str, int] = Field(default_factory=dict)  # "backend -> kernel op" -> calls under it
    masks_dropped: dict[str, int] = Field(default_factory=dict)  # backend -> calls given without a no-op mask
    kv_reversed_calls: int = 0
    scope: list[str] = Field(default_factory=list)  # the pipeline components counted as the DiT
    finished: bool = False


class DiffusersAttnCalls(AttnCallsRecord):
    source: str = "diffusers-dispatcher"
    backend_kind: str = ""  # "dispatcher" (diffusers' own) | "harness" (registered by the harness)
    ranks: dict[str, DiffusersRankCalls] = Field(default_factory=dict)  # type: ignore[assignment]


class DiffusersEnv(Record):
    """diffusers_env.json: what the run's interpreter had (the fingerprint names the harness's)."""

    schema_version: str = Field("harness.diffusers_env/1", alias="schema")
    python: str
    packages: dict[str, str] = Field(default_factory=dict)  # diffusers, transformers, torch, ...
    pipeline_class: str
    model_path: str
    device: str
    dtype: str
    gpu: str | None = None
    dispatcher_backends: list[str] = Field(default_factory=list)  # the run's, harness ones included
    components: dict[str, str] = Field(default_factory=dict)  # component -> class
    notes: list[str] = Field(default_factory=list)


class ProbeResult(Record):
    """One backend's pre-flight in the run's interpreter: can it run, and does it agree with exact attention?"""

    attn_type: str
    ok: bool
    reason: str | None = None
    kind: str = ""  # dispatcher | harness
    cosine: dict[str, float] = Field(default_factory=dict)  # head dim -> cosine against exact attention
    facts: dict[str, Any] = Field(default_factory=dict)
