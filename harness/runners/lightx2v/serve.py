"""Inside a rank: what an in-scope call of the requested backend goes through (``CallPath``): its call
site, set by hooks on LightX2V's own loops (``RunHooks``, never from the order of calls); the step
schedule; on the first DiT self-attention call, a bitwise check against the op the class binds
(``DIRECT_OPS``); the in-situ shadows. Standard library at import time.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from harness.runners.lightx2v.counting import CallBook
from harness.runners.lightx2v.rank_env import AITER_OP, SAGE_MODULE

H3_SCHEDULER = "lightx2v.models.schedulers.minimax_h3.scheduler:MiniMaxH3Scheduler"
H3_TRANSFORMER = "lightx2v.models.networks.minimax_h3.infer.transformer_infer:MiniMaxH3TransformerInfer"
H3_PRE_INFER = "lightx2v.models.networks.minimax_h3.infer.pre_infer:MiniMaxH3PreInfer"
H3_RUNNER = "lightx2v.models.runners.minimax_h3.minimax_h3_runner:MiniMaxH3Runner"


@dataclass(frozen=True)
class Hook:
    """One method of LightX2V to wrap: ``role`` says what entering it means."""

    target: str  # "module:Class"
    method: str
    role: str  # step_pre | step_post | dit_block | refiner | warmup


# What each model class's hooks are (``--model_cls``); a model without an entry is not attributed.
HOOKS: dict[str, tuple[Hook, ...]] = {
    "minimax_h3": (
        Hook(H3_SCHEDULER, "step_pre", "step_pre"),  # step_pre(i): DiT step i + 1 of infer_steps
        Hook(H3_SCHEDULER, "step_post", "step_post"),  # the step's end (the latents are taken here)
        Hook(H3_TRANSFORMER, "run_block", "dit_block"),  # block i's self-attention (block offload too)
        Hook(H3_PRE_INFER, "infer", "refiner"),  # the block: the instance's place in refiner_blocks
        Hook(H3_RUNNER, "run_warmup", "warmup"),  # LightX2V's warm-up steps are no DiT step
    ),
}


def synchronize() -> None:
    """Wait for the GPU (CUDA or ROCm) when torch has started it; nothing to wait for on the CPU."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class RunHooks:
    """Sets ``sites`` from LightX2V's loops; ``on_step_end(step, scheduler)`` runs after a measured step."""

    def __init__(self, sites: Any, time_blocks: bool = False):
        self.sites = sites
        self.time_blocks = time_blocks
        self.block_seconds: dict[str, list[float]] = {}
        self.on_step_end: list[Callable[[int, Any], None]] = []
        self.installed: list[str] = []
        self.missing: list[str] = []
        self.warmup = False
        # id(attention instance) -> refiner block index, from the refiner's own block list
        self._refiner_blocks: dict[int, int] = {}

    @property
    def attributed(self) -> bool:
        """Whether steps and blocks come from the run (every hook of the model found)."""
        return bool(self.installed) and not self.missing

    def site_for(self, backend: Any) -> Any:
        """The call site of a call made by the attention instance ``backend`` now."""
        site = self.sites.current
        if site.kind == "refiner" and site.block is None:
            index = self._refiner_blocks.get(id(backend))
            if index is not None:
                site = replace(site, block=index)
        return site

    def install(self, model_cls: str | None) -> None:
        for hook in HOOKS.get(model_cls or "", ()):
            label = f"{hook.target}.{hook.method}"
            mod_name, _, cls_name = hook.target.partition(":")
            try:
                cls = getattr(importlib.import_module(mod_name), cls_name)
                original = cls.__dict__.get(hook.method) or getattr(cls, hook.method)
            except Exception as err:  # LightX2V moved it: note, attribute those calls to "other"
                self.missing.append(f"{label} ({type(err).__name__}: {err})")
                continue
            if getattr(original, "_harness_hook", False):
                continue
            wrapped = self._wrap(getattr(self, f"_{hook.role}"), original)
            wrapped._harness_hook = True
            setattr(cls, hook.method, wrapped)
            self.installed.append(label)

    @staticmethod
    def _wrap(around: Callable, original: Callable) -> Callable:
        """``original`` called inside ``around``, a context manager given the same arguments."""

        @functools.wraps(original)
        def wrapped(*args, **kwargs):
            with around(*args, **kwargs):
                return original(*args, **kwargs)

        return wrapped

    @contextlib.contextmanager
    def _step_pre(self, scheduler, step_index, *args, **kwargs) -> Iterator[None]:
        yield
        if not self.warmup:
            total = getattr(scheduler, "infer_steps", None)
            self.sites.set(step=int(step_index) + 1, steps=int(total) if total is not None else None)

    @contextlib.contextmanager
    def _step_post(self, scheduler, *args, **kwargs) -> Iterator[None]:
        yield
        step = self.sites.current.step
        if not self.warmup and step is not None:
            for callback in self.on_step_end:
                callback(step, scheduler)
            self.sites.set(step=None)

    @contextlib.contextmanager
    def _dit_block(self, infer, block_idx, *args, **kwargs) -> Iterator[None]:
        with self.sites.site(block=int(block_idx), kind="dit_self") as site:
            timed = self.time_blocks and site.step is not None
            if timed:
                synchronize()
                t0 = time.perf_counter()
            yield
            if timed:
                synchronize()
                self.block_seconds.setdefault(str(site.step), []).append(time.perf_counter() - t0)

    @contextlib.contextmanager
    def _refiner(self, pre_infer, weights, *args, **kwargs) -> Iterator[None]:
        for index, block in enumerate(getattr(weights, "refiner_blocks", None) or []):
            attn = getattr(getattr(block, "attn", None), "calculate", None)
            if attn is not None:
                self._refiner_blocks[id(attn)] = index
        with self.sites.site(block=None, kind="refiner"):
            yield

    @contextlib.contextmanager
    def _warmup(self, *args, **kwargs) -> Iterator[None]:
        self.warmup = True
        self.sites.set(step=None)
        try:
            yield
        finally:
            self.warmup = False


QKV = ("q", "k", "v")
FLASH_MODULE = "lightx2v.common.ops.attn.flash_attn"


def _batched(q, k, v):
    """LightX2V's packed ``[N, H, D]`` (or ``[B, N, H, D]``) as ``[B, N, H, D]``."""
    return tuple(t.unsqueeze(0) for t in (q, k, v)) if q.ndim == 3 else (q, k, v)


def sdpa_direct(q, k, v, causal: bool = False):
    import torch.nn.functional as F

    q4, k4, v4 = (t.transpose(1, 2) for t in _batched(q, k, v))
    x = F.scaled_dot_product_attention(q4, k4, v4, is_causal=causal).transpose(1, 2)
    return x.reshape(x.shape[0], x.shape[1], -1).squeeze(0)


def _bound(module: str, name: str) -> Callable:
    fn = getattr(sys.modules.get(module), name, None)
    if fn is None:
        raise LookupError(f"{module} bound no {name}")
    return fn


def sage_direct(q, k, v, causal: bool = False):
    q4, k4, v4 = (t.contiguous() for t in _batched(q, k, v))
    out = _bound(SAGE_MODULE, "sageattn")(q4, k4, v4, tensor_layout="NHD")
    return out.view(q4.shape[0] * q4.shape[1], -1)


def flash3_direct(q, k, v, causal: bool = False):
    q4, k4, v4 = _batched(q, k, v)
    out = _bound(FLASH_MODULE, "flash_attn_func_v3")(q4, k4, v4, softmax_scale=None, causal=causal)
    return out.reshape(q4.shape[0] * q4.shape[1], -1)


def aiter_direct(q, k, v, causal: bool = False):
    module, _, name = AITER_OP.partition(":")
    q4, k4, v4 = (t.contiguous() for t in _batched(q, k, v))
    out = getattr(importlib.import_module(module), name)(q4, k4, v4)
    return out.reshape(q4.shape[0] * q4.shape[1], -1)


DIRECT_OPS: dict[str, Callable] = {
    "torch_sdpa": sdpa_direct,  # F.scaled_dot_product_attention on [B, H, N, D]
    "sage_attn2": sage_direct,  # the sageattn LightX2V bound at import (thu-ml's or a shim's), NHD
    "flash_attn3": flash3_direct,  # the flash_attn_func_v3 LightX2V bound
    # the pull request's backend (or the name AITER_SAGE_ATTN_TYPE gives): aiter's op, [B, N, H, D]
    os.environ.get("AITER_SAGE_ATTN_TYPE") or "aiter_sage_attn": aiter_direct,
}


def q_shape(q) -> list[int]:
    """``[B, H, N, D]`` of a LightX2V call's q (the builtin's DirectCheck convention)."""
    shape = [1, *q.shape] if len(q.shape) == 3 else list(q.shape)
    return [shape[0], shape[2], shape[1], shape[3]] if len(shape) == 4 else shape


def check_call(
    name: str, run: Callable[[Any, Any, Any], Any], q, k, v, causal: bool = False
) -> tuple[Any, dict[str, Any] | None]:
    """``run(q, k, v)`` compared with the direct op: (output, check or None)."""
    direct = DIRECT_OPS.get(name)
    if direct is None:
        return run(q, k, v), None
    from harness.attention.wrappers import check_against_direct

    return check_against_direct(
        run, functools.partial(direct, causal=causal), (q, k, v), q_shape(q), tolerant=True
    )


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
    """Serves and counts the requested backend's in-scope calls (``Instrument.serve``)."""

    def __init__(
        self,
        book: CallBook,
        hooks: RunHooks,
        raw: Callable[[str], Any],
        *,
        schedule: Any = None,
        shadowed: tuple[Any, Any, dict[str, Any]] | None = None,
    ):
        self.book = book
        self.hooks = hooks
        self.raw = raw
        self.schedule = schedule
        if schedule is not None:
            from harness.attention.wrappers import exact_on

            self._exact_on = exact_on
        self.direct_pending = True
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
            served = self.schedule.exact
            if self._exact is None:
                cls = self.raw(served)
                if cls is None:
                    raise ValueError(f"schedule: exact backend {served!r} is not registered in LightX2V")
                self._exact = cls()

            def run(q, k, v):  # another class: by keyword (its positional parameters differ)
                return self._exact.apply(q=q, k=k, v=v, **other_arguments(bound))

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
        causal = bool(bound.arguments.get("causal") or bound.kwargs.get("causal"))
        out, check = check_call(name, run, *qkv, causal=causal)
        if check is not None:
            check["step"] = site.step
        self.book.direct_check = check
        return out

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
