"""diffusers' attention dispatcher, instrumented inside one run or probe (``Instrument``; ``close``
undoes every patch): calls per backend, the DiT's (a ``scope``) or not, fallbacks, torch SDPA called
around the dispatcher, the kernel a backend reached (its proof of having run); harness backends as
dispatcher backends of their own name; a floor's K/V reversal; no-op masks a backend refuses dropped."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
import torch.nn.functional as F

from harness.runners.common import one_line

SDPA_OP = "torch sdpa"
SDPA_DIRECT = "torch sdpa (direct)"
# Kernel functions attention_dispatch imports at module level (None there when not installed).
KERNEL_OPS = (
    "flash_attn_func", "flash_attn_varlen_func", "flash_attn_3_func", "flash_attn_3_varlen_func",
    "sageattn", "sageattn_varlen", "sageattn_qk_int8_pv_fp8_cuda", "sageattn_qk_int8_pv_fp8_cuda_sm90",
    "sageattn_qk_int8_pv_fp16_cuda", "sageattn_qk_int8_pv_fp16_triton",
)  # fmt: skip
# The kernel a dispatcher backend must reach when it serves a call (its proof of having run).
EXPECTED_OP = {
    **{n: SDPA_OP for n in ("native", "_native_cudnn", "_native_efficient", "_native_flash", "_native_math")},
    "flash": "flash_attn_func",
    "flash_varlen": "flash_attn_varlen_func",
    "_flash_3": "flash_attn_3_func",
    "_flash_varlen_3": "flash_attn_3_varlen_func",
    "sage": "sageattn",
    "sage_varlen": "sageattn_varlen",
    **{n: n.removeprefix("_").replace("sage_", "sageattn_", 1) for n in (
        "_sage_qk_int8_pv_fp8_cuda", "_sage_qk_int8_pv_fp8_cuda_sm90",
        "_sage_qk_int8_pv_fp16_cuda", "_sage_qk_int8_pv_fp16_triton",
    )},
}  # fmt: skip
FALLBACK = "native"  # what serves a call a harness backend refuses


def masks_nothing(mask: torch.Tensor) -> bool:
    """A boolean mask that keeps every key, or an additive one of zeros (one host sync)."""
    return bool(mask.all()) if mask.dtype == torch.bool else not bool(mask.any())


class CallBook:
    """What one run saw: calls per backend, split DiT / elsewhere, and the reasons it is invalid."""

    def __init__(self, requested: str, kind: str, kv_reversed: bool):
        self.requested = requested
        self.kind = kind  # "dispatcher" | "harness"
        self.kv_reversed = kv_reversed
        self.calls: Counter[str] = Counter()
        self.fallbacks: Counter[str] = Counter()
        self.outside: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()
        self.masks_dropped: Counter[str] = Counter()
        self.bypassed = 0
        self.kv_reversed_calls = 0
        self.errors: list[str] = []
        self.scope: list[str] = []
        self.scope_depth = 0
        self.stack: list[str] = []  # dispatcher backends being called (innermost last)

    def call(self, name: str) -> bool:
        """Count one call of ``name``; returns whether it is the DiT's."""
        if self.scope_depth <= 0:
            self.outside[name] += 1
            return False
        self.calls[name] += 1
        if name != self.requested:
            self.fallbacks[name] += 1
        return True

    def error(self, text: str) -> None:
        line = one_line(text)
        if line not in self.errors:
            self.errors.append(line)

    def problems(self) -> list[str]:
        """Reasons the run is invalid beyond calls and fallbacks (the record's ``errors``)."""
        out = list(self.errors)
        if self.bypassed:
            out.append(
                f"{self.bypassed} attention call(s) in the DiT called torch scaled_dot_product_attention "
                f"directly, bypassing the dispatcher (and the requested backend {self.requested!r})"
            )
        served = self.calls.get(self.requested, 0)
        op = EXPECTED_OP.get(self.requested) if self.kind == "dispatcher" else None
        if served and op and not self.ops.get(f"{self.requested} -> {op}"):
            out.append(
                f"backend {self.requested!r} served {served} call(s) but never reached its kernel {op}"
            )
        if self.kv_reversed and served and not self.kv_reversed_calls:
            out.append("kv_reversed: no DiT call had K/V reversed")
        return out


def reversed_kv(kwargs: dict[str, Any]) -> dict[str, Any]:
    """K and V reversed along the sequence ([B, S, H, D]: dim 1), and a mask along its key axis."""
    if kwargs.get("is_causal"):
        raise ValueError("kv_reversed: refusing a causal attention call (reversal would change it)")
    out = dict(kwargs)
    out["key"], out["value"] = kwargs["key"].flip(1), kwargs["value"].flip(1)
    mask = kwargs.get("attn_mask")
    if mask is not None:
        out["attn_mask"] = mask.flip(-1)
    return out


def enum_member(enum_cls: Any, name: str) -> Any:
    """``enum_cls(name)`` (the dispatcher's AttentionBackendName), adding a member for a harness backend."""
    if name in enum_cls._value2member_map_:
        return enum_cls(name)
    member = str.__new__(enum_cls, name)
    member._name_, member._value_ = f"HARNESS_{name.upper()}", name
    member.__objclass__ = enum_cls
    enum_cls._member_map_[member._name_] = member
    enum_cls._value2member_map_[name] = member
    return member


class Instrument:
    """The patches of one run; ``close`` restores diffusers and torch as they were."""

    def __init__(self, book: CallBook, *, drop_trivial_masks: bool = True):
        self.book = book
        self.drop_trivial_masks = drop_trivial_masks
        from diffusers.models import attention_dispatch

        self.ad = attention_dispatch
        self.registry = self.ad._AttentionBackendRegistry
        self.originals: dict[Any, Any] = dict(self.registry._backends)
        self.refuses_masks: set[str] = set()
        self.harness_names: list[str] = []
        self._ops: dict[str, Any] = {}
        self._hooks: list[Any] = []
        self._sdpa = F.scaled_dot_product_attention
        for member, fn in self.originals.items():
            self.registry._backends[member] = self._entry(member.value, fn)
        for op in KERNEL_OPS:
            fn = getattr(self.ad, op, None)
            if fn is not None:
                self._ops[op] = fn
                setattr(self.ad, op, self._counted_op(op, fn))
        F.scaled_dot_product_attention = self._counted_sdpa

    # --- wrappers ---------------------------------------------------------------------------------

    def _entry(self, name: str, fn: Any) -> Any:
        book = self.book

        def entry(**kwargs: Any) -> Any:
            in_dit = book.call(name)
            if in_dit and book.kv_reversed and book.kind == "dispatcher" and name == book.requested:
                try:
                    kwargs = reversed_kv(kwargs)
                except ValueError as err:
                    book.error(str(err))
                    raise
                book.kv_reversed_calls += 1
            book.stack.append(name)
            try:
                return self._mask_aware(name, fn, kwargs)
            finally:
                book.stack.pop()

        entry.__wrapped__ = fn  # type: ignore[attr-defined]
        return entry

    def _mask_aware(self, name: str, fn: Any, kwargs: dict[str, Any]) -> Any:
        mask = kwargs.get("attn_mask")
        if mask is None or name not in self.refuses_masks or not masks_nothing(mask):
            try:
                return fn(**kwargs)
            except ValueError as err:  # a refused mask that masks nothing: dropped from now on
                if mask is None or "attn_mask" not in str(err) or not self.drop_trivial_masks:
                    raise
                if not masks_nothing(mask):
                    raise
                self.refuses_masks.add(name)
        self.book.masks_dropped[name] += 1
        return fn(**{**kwargs, "attn_mask": None})

    def _counted_op(self, op: str, fn: Any) -> Any:
        book = self.book

        def counted(*args: Any, **kwargs: Any) -> Any:
            book.ops[f"{book.stack[-1] if book.stack else '?'} -> {op}"] += 1
            return fn(*args, **kwargs)

        counted.__wrapped__ = fn  # type: ignore[attr-defined]
        return counted

    def _counted_sdpa(self, *args: Any, **kwargs: Any) -> Any:
        book = self.book
        if book.stack:
            book.ops[f"{book.stack[-1]} -> {SDPA_OP}"] += 1
        elif book.scope_depth > 0:
            book.bypassed += 1
        else:
            book.outside[SDPA_DIRECT] += 1
        return self._sdpa(*args, **kwargs)

    # --- harness backends ---------------------------------------------------------------------------

    def register_harness(self, name: str, op: Any) -> None:
        """Serve dispatcher backend ``name`` with the harness op chain ``op`` ([B, H, S, D] convention)."""
        from harness.attention.registry import UnsupportedCall

        book, native = self.book, self.originals[self.ad.AttentionBackendName(FALLBACK)]

        def refused(why: str, **kwargs: Any) -> Any:
            if book.scope_depth > 0:  # a DiT call counted for ``name``, served by the fallback
                book.calls -= Counter({name: 1})  # (a count that reaches 0 goes)
                book.calls[FALLBACK] += 1
                book.fallbacks[FALLBACK] += 1
            book.error(f"{name}: a call went to {FALLBACK}: {why}")
            book.stack.append(FALLBACK)
            try:
                return native(**kwargs)
            finally:
                book.stack.pop()

        def harness_backend(**call: Any) -> Any:  # the dispatcher passes every argument by name
            query, key, value, mask = call["query"], call["key"], call["value"], call.get("attn_mask")
            if mask is not None:
                if not (self.drop_trivial_masks and masks_nothing(mask)):
                    return refused("it carries an attention mask that masks keys", **call)
                book.masks_dropped[name] += 1
            if call.get("dropout_p") or call.get("is_causal") or key.shape[2] != query.shape[2]:
                return refused("dropout, causal or grouped heads (harness backends take none)", **call)
            if book.kv_reversed and book.scope_depth > 0:
                book.kv_reversed_calls += 1
            try:
                out = op(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), call.get("scale"))
            except UnsupportedCall as err:
                return refused(str(err), **call)
            return out.transpose(1, 2)

        member = enum_member(self.ad.AttentionBackendName, name)
        self.harness_names.append(name)
        self.registry._backends[member] = self._entry(name, harness_backend)
        self.registry._constraints[member] = []
        self.registry._supported_arg_names[member] = {
            "query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"
        }  # fmt: skip

    # --- the pipeline ------------------------------------------------------------------------------

    def scope(self, label: str, module: torch.nn.Module) -> None:
        """Count calls made inside ``module``'s forward as the DiT's."""
        book = self.book

        def enter(*_: Any) -> None:
            book.scope_depth += 1

        def leave(*_: Any) -> None:
            book.scope_depth -= 1

        self._hooks.append(module.register_forward_pre_hook(enter))
        self._hooks.append(module.register_forward_hook(leave, always_call=True))
        book.scope.append(label)

    def select(self, name: str, modules: list[torch.nn.Module]) -> int:
        """Set backend ``name`` on the processors of ``modules`` (``set_attention_backend``), leaving
        the dispatcher's active backend, which every other component uses, as it was; how many took it."""
        previous = self.registry._active_backend
        try:
            for module in modules:
                module.set_attention_backend(name)
        finally:
            self.registry.set_active_backend(previous)
        member = self.ad.AttentionBackendName(name)
        return sum(
            1
            for module in modules
            for sub in module.modules()
            if getattr(getattr(sub, "processor", None), "_attention_backend", None) == member
        )

    def backend_names(self) -> list[str]:
        return sorted(m.value for m in self.registry._backends)

    def close(self) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
        self.registry._backends.update(self.originals)
        enum_cls, reg = self.ad.AttentionBackendName, self.registry
        for name in self.harness_names:
            member = enum_cls._value2member_map_.get(name)
            for table in (reg._backends, reg._constraints, reg._supported_arg_names):
                table.pop(member, None)
            if member is not None and member._name_.startswith("HARNESS_"):  # the member enum_member added
                enum_cls._member_map_.pop(member._name_, None)
                enum_cls._value2member_map_.pop(name, None)
        self.harness_names = []
        for op, fn in self._ops.items():
            setattr(self.ad, op, fn)
        F.scaled_dot_product_attention = self._sdpa

    def __enter__(self) -> Instrument:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
