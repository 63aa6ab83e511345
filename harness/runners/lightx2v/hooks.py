"""Inside a rank: hooks on LightX2V's own step and block loops (``HOOKS``, per ``--model_cls``) set
the call site (DiT step, block, kind) of every attention call from what the run does, never from
the order of calls, and tell the launcher when a step ends; a method not found is noted and its
calls are "other". With ``time_blocks`` each DiT block of a measured step is timed, the device
synchronised around it. Standard library at import time.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

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
    """Sets ``sites`` (``harness.attention.insitu.sites.CallSites``) from LightX2V's loops;
    ``on_step_end(step, scheduler)`` callbacks run after each measured step's ``step_post``."""

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
        self._index_refiner(weights)
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

    def _index_refiner(self, weights: Any) -> None:
        blocks = getattr(weights, "refiner_blocks", None)
        if blocks is None:
            return
        for index, block in enumerate(blocks):
            attn = getattr(getattr(block, "attn", None), "calculate", None)
            if attn is not None:
                self._refiner_blocks[id(attn)] = index
