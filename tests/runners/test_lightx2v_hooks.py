"""Call sites from a model's own loops: the hooks on a toy model laid out as MiniMax-H3's classes."""

from __future__ import annotations

import sys
import types

import pytest

from harness.attention.insitu.recorder import CallSites
from harness.runners.lightx2v import serve
from harness.runners.lightx2v.serve import Hook, RunHooks


class Attention:
    """Stands for an attention instance: records where each call is, as the launcher sees it."""

    def __init__(self, seen, hooks_ref):
        self.seen, self.hooks_ref = seen, hooks_ref

    def apply(self):
        site = self.hooks_ref[0].site_for(self)
        self.seen.append((site.step, site.kind, site.block))


def toy_model(seen, hooks_ref):
    class Scheduler:
        infer_steps = 3

        def step_pre(self, step_index):
            self.step_index = step_index

        def step_post(self):
            pass

    class TransformerInfer:
        def __init__(self):
            self.attn = Attention(seen, hooks_ref)

        def run_block(self, block_idx, block):
            self.attn.apply()

    class PreInfer:
        def infer(self, weights):
            for block in reversed(weights.refiner_blocks):  # the order of calls does not decide
                block.attn.calculate.apply()

    class Runner:
        def run_warmup(self, scheduler, transformer):
            scheduler.step_pre(0)
            transformer.run_block(0, None)
            scheduler.step_post()

    mod = types.ModuleType("toy_h3")
    mod.Scheduler, mod.TransformerInfer, mod.PreInfer, mod.Runner = (
        Scheduler,
        TransformerInfer,
        PreInfer,
        Runner,
    )
    return mod


@pytest.fixture
def toy(monkeypatch):
    seen, hooks_ref = [], []
    mod = toy_model(seen, hooks_ref)
    monkeypatch.setitem(sys.modules, "toy_h3", mod)
    table = (
        Hook("toy_h3:Scheduler", "step_pre", "step_pre"),
        Hook("toy_h3:Scheduler", "step_post", "step_post"),
        Hook("toy_h3:TransformerInfer", "run_block", "dit_block"),
        Hook("toy_h3:PreInfer", "infer", "refiner"),
        Hook("toy_h3:Runner", "run_warmup", "warmup"),
        Hook("toy_h3:Gone", "run", "warmup"),
    )
    monkeypatch.setitem(serve.HOOKS, "toy", table)
    hooks = RunHooks(CallSites(), time_blocks=True)
    hooks_ref.append(hooks)
    hooks.install("toy")
    return mod, hooks, seen


def test_steps_blocks_and_refiner_blocks_come_from_the_run(toy):
    mod, hooks, seen = toy
    ended = []
    hooks.on_step_end.append(lambda step, scheduler: ended.append((step, scheduler.step_index)))
    scheduler, transformer, pre = mod.Scheduler(), mod.TransformerInfer(), mod.PreInfer()
    refiner = [
        types.SimpleNamespace(attn=types.SimpleNamespace(calculate=Attention(seen, [hooks])))
        for _ in range(2)
    ]
    weights = types.SimpleNamespace(refiner_blocks=refiner)
    mod.Runner().run_warmup(scheduler, transformer)  # LightX2V's warm-up: no step of the run
    for i in range(2):
        scheduler.step_pre(i)
        pre.infer(weights)
        for b in range(2):
            transformer.run_block(b, None)
        scheduler.step_post()
    transformer.run_block(0, None)  # after the loop: no step
    assert seen == [
        (None, "dit_self", 0),
        (1, "refiner", 1), (1, "refiner", 0), (1, "dit_self", 0), (1, "dit_self", 1),
        (2, "refiner", 1), (2, "refiner", 0), (2, "dit_self", 0), (2, "dit_self", 1),
        (None, "dit_self", 0),
    ]  # fmt: skip
    assert ended == [(1, 0), (2, 1)]  # the measured steps' ends, not the warm-up's
    assert sorted(hooks.block_seconds) == ["1", "2"] and all(
        len(v) == 2 for v in hooks.block_seconds.values()
    )
    assert hooks.sites.current.step is None


def test_a_method_not_where_the_table_says_is_noted(toy):
    _, hooks, _ = toy
    assert len(hooks.installed) == 5 and not hooks.attributed
    assert hooks.missing == ["toy_h3:Gone.run (AttributeError: module 'toy_h3' has no attribute 'Gone')"]
    again = RunHooks(CallSites())
    again.install("toy")  # wrapped once: a second install finds the hooks in place
    assert again.installed == [] and RunHooks(CallSites()).attributed is False
