"""Wrappers around a backend: K/V order reversal (the noise floor) and call counting with fallback."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from harness.attention.registry import AttentionOp, UnsupportedCall, get_backend
from harness.records import AttnCallsRecord, RankCalls


class KVReversed(AttentionOp):
    """Reverse K and V along the sequence before the call.

    Exact attention is invariant to the key order (softmax and the weighted sum are sums over
    keys), so only the floating-point summation order changes: the run-to-run noise floor.
    Calls are reported under the inner backend's name.
    """

    def __init__(self, backend: AttentionOp):
        self.inner = backend
        self.name = backend.name
        self.exact = backend.exact

    @property
    def params(self) -> dict[str, Any]:  # type: ignore[override]
        return {**self.inner.params, "kv_reversed": True}

    def __call__(self, q, k, v, scale=None):
        return self.inner(q, k.flip(-2), v.flip(-2), scale)

    def __repr__(self) -> str:
        return f"KVReversed({self.inner!r})"


class CountingBackend(AttentionOp):
    """Count calls per serving backend; on a refusal (UnsupportedCall) hand the call to ``fallback``.

    ``requested`` is the backend name the run asked for (``attn_type``). A refused call served
    by the fallback counts in ``calls[fallback.name]`` and in ``fallbacks[fallback.name]``;
    without a fallback the refusal is recorded in ``errors`` and re-raised.
    """

    max_errors = 20

    def __init__(self, backend: AttentionOp, requested: str, fallback: AttentionOp | str | None = None):
        self.inner = backend
        self.requested = requested
        self.fallback = get_backend(fallback) if isinstance(fallback, str) else fallback
        self.name = backend.name
        self.exact = backend.exact
        self.calls: Counter[str] = Counter()
        self.fallbacks: Counter[str] = Counter()
        self.errors: list[str] = []

    @property
    def params(self) -> dict[str, Any]:  # type: ignore[override]
        extra = {"fallback": self.fallback.name if self.fallback is not None else None}
        return {**self.inner.params, **extra}

    def _note_error(self, message: str) -> None:
        if message not in self.errors and len(self.errors) < self.max_errors:
            self.errors.append(message)

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
    ) -> torch.Tensor:
        try:
            out = self.inner(q, k, v, scale)
        except UnsupportedCall as err:
            self._note_error(str(err))
            if self.fallback is None:
                raise
            out = self.fallback(q, k, v, scale)
            self.calls[self.fallback.name] += 1
            self.fallbacks[self.fallback.name] += 1
            return out
        self.calls[self.inner.name] += 1
        return out

    def rank_calls(self) -> RankCalls:
        return RankCalls(calls=dict(self.calls), fallbacks=dict(self.fallbacks), errors=list(self.errors))

    def record(self, rank: str = "0", kv_reversed: bool | None = None) -> AttnCallsRecord:
        """attn_calls.json content for a single-rank run (multi-rank runs merge rank_calls())."""
        if kv_reversed is None:
            kv_reversed = bool(self.inner.params.get("kv_reversed", False))
        return AttnCallsRecord(
            requested=self.requested, kv_reversed=kv_reversed, ranks={rank: self.rank_calls()}
        )

    def reset(self) -> None:
        self.calls.clear()
        self.fallbacks.clear()
        self.errors.clear()

    def __repr__(self) -> str:
        return f"CountingBackend({self.inner!r}, requested={self.requested!r}, fallback={self.fallback!r})"


def make_attention(
    name: str, *, kv_reversed: bool = False, fallback: str | None = None, **options: Any
) -> CountingBackend:
    """The usual chain for a run: get_backend(name) [-> KVReversed] -> CountingBackend.

    The fallback (if any) gets the same K/V reversal, so a noise-floor run stays a noise-floor
    run when it falls back.
    """
    op: AttentionOp = get_backend(name, **options)
    fb: AttentionOp | None = get_backend(fallback) if fallback else None
    if kv_reversed:
        op = KVReversed(op)
        fb = KVReversed(fb) if fb is not None else None
    return CountingBackend(op, requested=name, fallback=fb)
