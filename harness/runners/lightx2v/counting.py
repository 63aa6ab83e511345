"""Inside a rank: count LightX2V's attention calls (``CallBook``) and reverse K/V for the noise-floor
arms (exact attention is invariant to that order). Standard library only at import time.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.runners.common import one_line, write_json
from harness.runners.lightx2v.rank_env import (
    bound_sage_function,
    sageattention_flavour,
    sageattention_identity,
)

RANK_SCHEMA = "harness.attn_calls.rank/1"
_SELF_FILE = __file__  # the instrumentation's frames, skipped when asking which module built a backend
# CallBook's counters, written as they are named
COUNTERS = ("calls", "fallbacks", "outside_scope", "sites", "instances", "op_calls", "scheduled")


class CallBook:
    """What one rank saw: calls per backend, split by scope, and why anything went wrong."""

    def __init__(self, rank: str, requested: str, kv_reversed: bool, scopes: list[str], wrappers: list[str]):
        self.rank = rank
        self.requested = requested
        self.kv_reversed = kv_reversed
        self.scopes = list(scopes)
        self.wrappers = set(wrappers)
        for name in COUNTERS:
            setattr(self, name, Counter())
        self.kv_reversed_calls = 0
        self.errors: list[str] = []
        self.relaxed: dict[str, Any] = {}  # LightX2V checks relaxed for a synthetic checkpoint
        self.finished = False
        # In-scope calls per DiT step ("-": outside any step, see serve.RunHooks) and backend.
        self.per_step: dict[str, Counter[str]] = {}
        self.step_key: Callable[[], str] = lambda: "-"
        self.direct_check: dict[str, Any] | None = None
        self.extra: dict[str, Any] = {}  # attribution, latents, in-situ: what the launcher adds
        self._lock = threading.Lock()

    def in_scope(self, site: str | None) -> bool:
        if not self.scopes or site is None:
            return True
        return any(site == p or site.startswith(p + ".") for p in self.scopes)

    def instance(self, name: str, site: str | None) -> None:
        with self._lock:
            self.instances[f"{name} <- {site or '?'}"] += 1

    def call(self, name: str, site: str | None, scheduled: bool = False) -> None:
        """One call served by ``name``; ``scheduled``: a step schedule sent it there (no fallback)."""
        with self._lock:
            self.sites[f"{name} <- {site or '?'}"] += 1
            if not self.in_scope(site):
                self.outside_scope[name] += 1
                return
            self.calls[name] += 1
            self.per_step.setdefault(self.step_key(), Counter())[name] += 1
            if scheduled:
                self.scheduled[name] += 1
            elif name != self.requested and name not in self.wrappers:
                self.fallbacks[name] += 1

    def error(self, text: str) -> None:
        line = one_line(text)
        with self._lock:
            if line not in self.errors:
                self.errors.append(line)

    def to_json(self) -> dict[str, Any]:
        modules = {}
        mod = sys.modules.get("sageattention")
        if mod is not None:  # which `sageattention` served sage_attn2: the package or the shim
            modules["sageattention"] = str(getattr(mod, "__file__", None))
            modules["sageattention_is_aiter_shim"] = bool(getattr(mod, "IS_AITER_SHIM", False))
            modules["sageattention_flavour"] = sageattention_flavour(mod)
            modules["sageattention_function"] = bound_sage_function()
            modules.update(sageattention_identity(modules["sageattention_flavour"]))
            if callable(getattr(mod, "provenance", None)):  # the emulator shim: what it models
                try:
                    modules["sageattention_provenance"] = mod.provenance()
                except Exception as err:  # recorded beside, never fatal to the rank's record
                    modules["sageattention_provenance_error"] = f"{type(err).__name__}: {err}"
        return {
            "schema": RANK_SCHEMA,
            "rank": self.rank,
            "requested": self.requested,
            "kv_reversed": self.kv_reversed,
            "scope": self.scopes,
            **{name: dict(getattr(self, name)) for name in COUNTERS},
            "kv_reversed_calls": self.kv_reversed_calls,
            "modules": modules,
            "errors": list(self.errors),
            "relaxed": dict(self.relaxed),
            "per_step": {step: dict(counts) for step, counts in self.per_step.items()},
            "direct_check": self.direct_check,
            **self.extra,
            "finished": self.finished,
            "pid": os.getpid(),
        }

    def write(self, path: Path) -> None:  # temp file + rename: a reader never sees half a file
        write_json(Path(path), self.to_json())


def reverse_kv(arguments: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
    """Reverse k and v (``[N, H, D]`` or ``[B, N, H, D]``) along the sequence, in place in ``arguments``
    (or ``extra``, the **kwargs); one sequence per call, no causal or mask (reversal changes them)."""
    extra = {} if extra is None else extra

    def get(*names: str) -> Any:
        for name in names:
            for where in (arguments, extra):
                if where.get(name) is not None:
                    return where[name]
        return None

    k, v = get("k"), get("v")
    if k is None or v is None:
        raise ValueError("kv_reversed: the call passed no 'k'/'v' arguments")
    if get("causal") or get("is_causal"):
        raise ValueError("kv_reversed: refusing a causal attention call (reversal would change it)")
    if get("attn_mask") is not None:
        raise ValueError("kv_reversed: refusing an attention call with attn_mask (reversal would change it)")
    if k.ndim == 3:
        seq_dim, batch = 0, 1
    elif k.ndim == 4:
        seq_dim, batch = 1, k.shape[0]
    else:
        raise ValueError(f"kv_reversed: expected k of shape [N,H,D] or [B,N,H,D], got {tuple(k.shape)}")
    n = k.shape[seq_dim]
    if v.shape[seq_dim] != n:
        raise ValueError(f"kv_reversed: k and v disagree on the sequence length ({n} vs {v.shape[seq_dim]})")
    cu = get("cu_seqlens_kv", "cu_seqlens_k")
    if cu is not None:
        count = cu.numel() if hasattr(cu, "numel") else len(cu)
        if count != 2:
            raise ValueError(
                f"kv_reversed: cu_seqlens_kv holds {count - 1} packed sequences; only a single sequence "
                "per call is supported (reversing across sequence boundaries would mix them)"
            )
        if batch != 1:
            raise ValueError(f"kv_reversed: cu_seqlens_kv with batch {batch} is ambiguous; expected batch 1")
        max_kv = get("max_seqlen_kv", "max_seqlen_k")
        # A matching max_seqlen proves [0, N] without reading the device tensor (no sync).
        if not (isinstance(max_kv, int) and max_kv == n):
            bounds = [int(b) for b in (cu.tolist() if hasattr(cu, "tolist") else cu)]
            if bounds != [0, n]:
                raise ValueError(
                    f"kv_reversed: cu_seqlens_kv {bounds} does not cover the whole sequence of {n}"
                )
    for name, tensor in (("k", k), ("v", v)):
        where = arguments if arguments.get(name) is not None else extra
        where[name] = tensor.flip(seq_dim)


def _caller_module() -> str | None:
    """The module that built the backend: the first frame outside this file (both may be ``__main__``)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == _SELF_FILE:
        frame = frame.f_back
    return frame.f_globals.get("__name__") if frame is not None else None


class Instrument:
    """Turns registered backends into counting (and K/V-reversing) subclasses; ``serve``, when set, serves
    the requested backend's in-scope calls; ``raw(name)``: the registry's own entry (None: not there)."""

    def __init__(self, book: CallBook):
        self.book = book
        self.serve: Callable[[str, Any, Any, inspect.BoundArguments], Any] | None = None
        self.raw: Callable[[str], Any] = lambda name: None
        self._made: dict[tuple[str, int], Any] = {}

    def wrap(self, name: str, target: Any) -> Any:
        if getattr(target, "_harness_counting", False) or not callable(target):
            return target
        key = (name, id(target))
        if key not in self._made:
            self._made[key] = (
                self._subclass(name, target) if isinstance(target, type) else self._factory(name, target)
            )
        return self._made[key]

    def _apply(self, name: str, original: Any) -> Any:
        book = self.book
        try:
            signature = inspect.signature(original)
        except (TypeError, ValueError):
            signature = None
        varkw = next(
            (p.name for p in (signature.parameters.values() if signature else ()) if p.kind == p.VAR_KEYWORD),
            None,
        )

        def apply(obj, *args, **kwargs):
            site = getattr(obj, "_harness_site", None)
            ours = name == book.requested and book.in_scope(site)
            if not ours or not (book.kv_reversed or self.serve is not None):
                book.call(name, site)
                return original(obj, *args, **kwargs)
            if signature is None:
                raise ValueError(f"{name}.apply: cannot read its signature")
            try:
                bound = signature.bind(obj, *args, **kwargs)
            except TypeError as err:
                raise ValueError(f"{name}.apply arguments do not bind ({err})") from None
            if book.kv_reversed:
                try:
                    reverse_kv(bound.arguments, bound.arguments.get(varkw) if varkw else None)
                except ValueError as err:
                    book.error(f"{name}: {err}")
                    raise
                book.kv_reversed_calls += 1
            if self.serve is not None:
                return self.serve(name, obj, original, bound)
            book.call(name, site)
            return original(*bound.args, **bound.kwargs)

        return apply

    def _subclass(self, name: str, cls: type) -> Any:
        original_apply = getattr(cls, "apply", None)
        original_init = cls.__init__
        book = self.book

        def __init__(obj, *args, **kwargs):
            site = _caller_module()
            obj._harness_site = site
            book.instance(name, site)
            original_init(obj, *args, **kwargs)

        namespace: dict[str, Any] = {
            "__init__": __init__,
            "_harness_counting": True,
            "__module__": cls.__module__,
        }
        if original_apply is not None:
            namespace["apply"] = self._apply(name, original_apply)
        else:
            book.error(f"{name}: backend class {cls.__qualname__} has no apply(); its calls are not counted")
        try:
            return type(cls.__name__, (cls,), namespace)
        except TypeError as err:  # a class that cannot be subclassed: count through a factory
            book.error(f"{name}: cannot subclass {cls.__qualname__} ({err}); counting per instance")
            return self._factory(name, cls)

    def _factory(self, name: str, target: Any) -> Any:
        book = self.book

        def factory(*args, **kwargs):
            site = _caller_module()
            obj = target(*args, **kwargs)
            book.instance(name, site)
            unbound = getattr(type(obj), "apply", None)
            if callable(unbound):
                obj._harness_site = site
                obj.apply = self._apply(name, unbound).__get__(obj)
            else:
                book.error(
                    f"{name}: {type(obj).__qualname__} has no apply() method; its calls are not counted"
                )
            return obj

        factory._harness_counting = True  # type: ignore[attr-defined]
        return factory


def instrument_registry(registry: Any, book: CallBook) -> Instrument:
    """Every lookup of ``registry`` hands out instrumented backends (its class swapped: later ones too)."""
    inst = Instrument(book)
    base = type(registry)

    class CountingRegistry(base):  # type: ignore[misc, valid-type]
        def __getitem__(self, key):
            return inst.wrap(key, base.__getitem__(self, key))

        def get(self, key, default=None):
            return self[key] if key in self else default

    CountingRegistry.__name__ = CountingRegistry.__qualname__ = base.__name__

    def raw(key: str) -> Any:
        try:
            return base.__getitem__(registry, key)
        except KeyError:
            return None

    inst.raw = raw
    try:
        registry.__class__ = CountingRegistry
    except TypeError as err:  # fall back to wrapping what is registered now
        book.error(f"registry class swap failed ({err}); backends registered later are not counted")
        for key in list(registry.keys()):
            registry[key] = inst.wrap(key, registry[key])
    return inst


def count_op(ref: str, label: str, book: CallBook) -> None:
    """Replace ``module:function`` with a counting wrapper before anything imports it."""
    mod_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(mod_name)
        original = getattr(module, attr)
    except Exception as err:  # an op that is not installed is a fact to record, not a crash
        book.error(f"count-op {label}: {ref} unavailable ({type(err).__name__}: {err})")
        return
    if getattr(original, "_harness_counting", False):
        return

    def counted(*args, **kwargs):
        book.op_calls[label] += 1
        return original(*args, **kwargs)

    counted._harness_counting = True  # type: ignore[attr-defined]
    counted.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(module, attr, counted)
    # Packages above it that re-export the same function (``from .x import f``) get it too.
    parts = mod_name.split(".")
    for i in range(1, len(parts)):
        parent = sys.modules.get(".".join(parts[:i]))
        if parent is not None and getattr(parent, attr, None) is original:
            setattr(parent, attr, counted)
