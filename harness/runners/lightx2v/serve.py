"""Inside a rank: what an in-scope call of the requested backend goes through (``CallPath``).

For each such call, in order:

1. its call site (DiT step, block, kind) from the run's own loops (``hooks.RunHooks``), current
   while the call runs;
2. the arm's step schedule, if any (``harness.records.StepSchedule`` as a dict): on an exact step
   the call is served by the schedule's exact backend (LightX2V's own class of that name,
   uninstrumented, K/V reversed as the arm's) and counted under that name as a scheduled call,
   never as a fallback; the calls per step and backend prove the routing. When the run starts
   on an exact step, the arm's backend is also called once on copies of that first call (its
   output discarded), so its warm-up falls in step 1 as for any other arm;
3. on the first DiT self-attention call the arm's backend serves (the first call, where the run's
   blocks are not attributed), the bitwise check against its op called directly (``direct``);
4. the in-situ shadows, if any (``shadows.build_shadowed``): the call is the primary of a
   ``ShadowedAttention``; the model receives the served output unchanged.

Standard library at import time: this runs in the ranks' interpreter.
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


def routes_exact(schedule: dict[str, Any], step: int | None, steps: int | None) -> bool:
    """Whether ``step`` (from 1) of ``steps`` runs the exact backend (``harness.attention.schedule``'s
    rule: the first ``exact_first``, the last ``exact_last``, and ``exact_steps``); a call outside
    any step runs the arm's own backend."""
    if step is None:
        return False
    if step in (schedule.get("exact_steps") or []) or step <= int(schedule.get("exact_first") or 0):
        return True
    last = int(schedule.get("exact_last") or 0)
    return bool(last and steps is not None and step > steps - last)


def call_tensors(bound: inspect.BoundArguments) -> dict[str, Any]:
    """q, k, v of a bound ``apply`` call (named parameters or **kwargs)."""
    found = {}
    for name in QKV:
        value = bound.arguments.get(name)
        found[name] = bound.kwargs.get(name) if value is None else value
    return found


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
        schedule: dict[str, Any] | None = None,
        direct_check: bool = True,
        shadowed: tuple[Any, Any, dict[str, Any]] | None = None,
    ):
        self.book = book
        self.hooks = hooks
        self.raw = raw
        self.schedule = schedule
        self.direct_pending = direct_check
        self.shadowed = shadowed
        self.own_called = False
        self._exact: Any = None

    def __call__(self, name: str, backend: Any, original: Callable, bound: inspect.BoundArguments) -> Any:
        site = self.hooks.site_for(backend)
        module = getattr(backend, "_harness_site", None)
        own = lambda *a, **kw: original(backend, *a, **kw)  # noqa: E731
        if self.schedule and routes_exact(self.schedule, site.step, site.steps):
            exact_name = self.schedule.get("exact", "torch_sdpa")
            exact = self.exact_backend(exact_name)
            served, run = exact_name, exact.apply
            if not self.own_called:  # the arm's backend warms up in this step, not in a measured one
                self.own_called = True
                args, kwargs = with_tensors(bound, {n: t.clone() for n, t in call_tensors(bound).items()})
                own(*args, **kwargs)
        else:
            self.own_called = True
            served, run = name, own
        self.book.call(served, module, scheduled=served != name)
        checking = self.direct_pending and served == name
        checking = checking and (site.kind == "dit_self" or not self.hooks.attributed)
        if checking:
            self.direct_pending = False

        def serve() -> Any:
            if checking:
                return self._checked(name, run, bound)
            return run(*bound.args[1:], **bound.kwargs)

        with self._at(site):
            if self.shadowed is None:
                return serve()
            return self._shadowed(serve, bound)

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

    def _shadowed(self, serve: Callable[[], Any], bound: inspect.BoundArguments) -> Any:
        from harness.runners.lightx2v.shadows import to_heads_first

        shadowed, primary, context = self.shadowed
        context["kwargs"] = other_arguments(bound)
        primary.pending = serve
        tensors = call_tensors(bound)
        try:
            shadowed(*(to_heads_first(tensors[n]) for n in QKV), context["kwargs"].get("softmax_scale"))
            return primary.out
        finally:
            primary.pending = primary.out = None
            context["kwargs"] = {}

    def _checked(self, name: str, run: Callable, bound: inspect.BoundArguments) -> Any:
        tensors = call_tensors(bound)
        causal = bool(bound.arguments.get("causal") or bound.kwargs.get("causal"))

        def call(q, k, v):
            args, kwargs = with_tensors(bound, {"q": q, "k": k, "v": v})
            return run(*args, **kwargs)

        out, result = check_call(name, call, tensors["q"], tensors["k"], tensors["v"], causal=causal)
        self.book.direct_check = result
        return out
