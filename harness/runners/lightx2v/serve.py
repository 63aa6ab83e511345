"""Inside a rank: what an in-scope call of the requested backend goes through (``CallPath``).

For each such call, in order:

1. its call site (DiT step, block, kind) from the run's own loops (``hooks.RunHooks``);
2. the arm's step schedule, if any (routed by ``harness.attention.wrappers.exact_on``): on an
   exact step the call is served by the schedule's exact backend (LightX2V's own class of that
   name, uninstrumented) and counted under that name as a scheduled call, never as a fallback.
   On such a step the arm's backend is also called once on copies of the first call of each
   shape (output discarded), so its warm-up (a Triton kernel compiles again for another
   sequence length) falls in step 1 as for any other arm;
3. on the first DiT self-attention call, the bitwise check of the arm's backend against its op
   called directly (``direct``), kept out of the measured steps as the warm-up is;
4. the in-situ shadows, if any: the call is the primary of a ``ShadowedAttention``; the model
   receives the served output unchanged.

Standard library at import time (this runs in the ranks' interpreter).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from typing import Any

from harness.runners.lightx2v.counting import CallBook
from harness.runners.lightx2v.direct import check_call
from harness.runners.lightx2v.hooks import RunHooks

QKV = ("q", "k", "v")


def call_tensors(bound: inspect.BoundArguments) -> dict[str, Any]:
    """q, k, v of a bound ``apply`` call (named parameters or **kwargs)."""
    args = bound.arguments
    return {name: bound.kwargs.get(name) if args.get(name) is None else args[name] for name in QKV}


def other_arguments(bound: inspect.BoundArguments) -> dict[str, Any]:
    """The call's arguments besides ``self``, q, k and v, as keywords (what a shadow is given)."""
    out: dict[str, Any] = {}
    params = bound.signature.parameters
    for i, (name, value) in enumerate(bound.arguments.items()):
        if i == 0 or name in QKV:
            continue
        if params[name].kind == inspect.Parameter.VAR_KEYWORD:
            out.update({k: v for k, v in value.items() if k not in QKV})
        elif params[name].kind != inspect.Parameter.VAR_POSITIONAL:
            out[name] = value
    return out


def with_tensors(bound: inspect.BoundArguments, tensors: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """The call's (args, kwargs) without ``self``, with q, k, v replaced by ``tensors``."""
    names = list(bound.signature.parameters)
    args = list(bound.args[1:])
    kwargs = dict(bound.kwargs)
    for name, value in tensors.items():
        position = names.index(name) - 1 if name in names else -1
        if 0 <= position < len(args):
            args[position] = value
        else:
            kwargs[name] = value
    return tuple(args), kwargs


class CallPath:
    """Serves and counts the in-scope calls of the requested backend (``Instrument.serve``).

    ``raw(name)``: LightX2V's uninstrumented class of an attention type; ``shadowed``: the
    ``(ShadowedAttention, primary, context)`` of ``shadows.build_shadowed``, or None.
    """

    def __init__(
        self,
        book: CallBook,
        hooks: RunHooks,
        raw: Callable[[str], Any],
        *,
        schedule: Any = None,
        direct_check: bool = True,
        shadowed: tuple[Any, Any, dict[str, Any]] | None = None,
    ):
        self.book = book
        self.hooks = hooks
        self.raw = raw
        self.schedule = schedule
        if schedule is not None:
            from harness.attention.wrappers import exact_on

            self._exact_on = exact_on
        self.direct_pending = direct_check
        self.shadowed = shadowed
        self.warmed: set[tuple] = set()  # call shapes the arm's backend has run
        self._exact: Any = None

    def __call__(self, name: str, backend: Any, original: Callable, bound: inspect.BoundArguments) -> Any:
        site = self.hooks.site_for(backend)
        module = getattr(backend, "_harness_site", None)

        def own(q, k, v):  # the arm's backend, called as the model called it
            args, kwargs = with_tensors(bound, {"q": q, "k": k, "v": v})
            return original(backend, *args, **kwargs)

        tensors = call_tensors(bound)
        shape = tuple((tuple(t.shape), t.dtype) for t in (tensors[n] for n in QKV))
        if self.schedule is not None and self._exact_on(self.schedule, site.step, site.steps):
            exact_name = self.schedule.exact
            exact = self.exact_backend(exact_name)
            served = exact_name

            def run(q, k, v):  # another class: by keyword (its positional parameters differ)
                return exact.apply(q=q, k=k, v=v, **other_arguments(bound))

            if shape not in self.warmed:  # the arm's backend warms up in this step, not in a measured one
                self.warmed.add(shape)
                copies = [tensors[n].clone() for n in QKV]
                if self._check_due(site):
                    self._check(name, own, copies, bound, site)
                else:
                    own(*copies)
        else:
            self.warmed.add(shape)
            served, run = name, own
        self.book.call(served, module, scheduled=served != name)
        checking = served == name and self._check_due(site)

        def serve() -> Any:
            if checking:
                return self._check(name, run, [tensors[n] for n in QKV], bound, site)
            return run(*(tensors[n] for n in QKV))

        with self._at(site):
            if self.shadowed is None:
                return serve()
            return self._shadowed(serve, bound, tensors)

    def _check_due(self, site: Any) -> bool:
        return self.direct_pending and (site.kind == "dit_self" or not self.hooks.attributed)

    def _check(self, name: str, run: Callable, qkv: list, bound: inspect.BoundArguments, site: Any) -> Any:
        """``run`` on ``qkv`` checked against the direct op (once per run); its output."""
        self.direct_pending = False
        out, check = check_call(name, run, *qkv, causal=_causal(bound))
        if check is not None:
            check["step"] = site.step
        self.book.direct_check = check
        return out

    def exact_backend(self, exact_name: str) -> Any:
        if self._exact is None:
            cls = self.raw(exact_name)
            if cls is None:
                raise ValueError(f"schedule: exact backend {exact_name!r} is not registered in LightX2V")
            self._exact = cls()
        return self._exact

    def _at(self, site: Any) -> Any:
        """The call's site made current while it runs (the refiner's block is known per instance)."""
        if site == self.hooks.sites.current:
            return contextlib.nullcontext()
        return self.hooks.sites.site(block=site.block, kind=site.kind)

    def _shadowed(self, serve: Callable[[], Any], bound: inspect.BoundArguments, tensors: dict) -> Any:
        from harness.runners.lightx2v.shadows import to_heads_first

        shadowed, primary, context = self.shadowed
        context["kwargs"] = other_arguments(bound)
        primary.pending = serve
        try:
            shadowed(*(to_heads_first(tensors[n]) for n in QKV), context["kwargs"].get("softmax_scale"))
            return primary.out
        finally:
            primary.pending = primary.out = None
            context["kwargs"] = {}


def _causal(bound: inspect.BoundArguments) -> bool:
    return bool(bound.arguments.get("causal") or bound.kwargs.get("causal"))
