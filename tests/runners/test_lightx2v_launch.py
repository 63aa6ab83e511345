"""The launcher's registry wrapping, run in a subprocess against the stand-in LightX2V package.

The stub (tests/fixtures/lightx2v_stub) registers backends by decorator when its model code is
imported, builds a 2-block "DiT" plus a refiner under lightx2v.models.networks and a "VAE"
under lightx2v.models.video_encoders, and traces what each backend received. Its K tensor
carries the token index in channel 0, so a reversal is visible.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.runners.lightx2v.counting import CallBook, count_op, instrument_registry, reverse_kv

STUB = Path(__file__).resolve().parents[1] / "fixtures" / "lightx2v_stub"
REPO = Path(__file__).resolve().parents[2]
SCOPE = "lightx2v.models.networks"
DIT_STEPS = 3  # infer_steps 4
CALLS_PER_STEP = 3  # two blocks and the refiner


def run_launcher(
    tmp_path: Path, attn_type: str, *extra: str, config: dict | None = None, env: dict | None = None
):
    run_dir = tmp_path / "run"
    trace = tmp_path / "trace"
    trace.mkdir(parents=True, exist_ok=True)
    cfg = {
        "infer_steps": DIT_STEPS + 1,
        "attn_type": attn_type,
        "vae_attn_type": "stub_other",
        **(config or {}),
    }
    cfg_path = tmp_path / "config.json"
    cfg_path.write_text(json.dumps(cfg))
    cmd = [
        sys.executable, "-m", "harness.runners.lightx2v.launch",
        "--run-dir", str(run_dir), "--attn-type", attn_type, "--scope", SCOPE, *extra,
        "--", "--model_cls", "minimax_h3", "--task", "ref2av", "--model_path", str(tmp_path),
        "--config_json", str(cfg_path), "--prompt", "a test", "--save_result_path", str(run_dir / "output.mp4"),
        "--seed", "42",
    ]  # fmt: skip
    full_env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    full_env.update(PYTHONPATH=os.pathsep.join([str(STUB), str(REPO)]), STUB_TRACE=str(trace), **(env or {}))
    proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=120, check=False)
    calls_file = run_dir / "attn_calls.rank0.json"
    calls = json.loads(calls_file.read_text()) if calls_file.exists() else None
    lines = (
        (trace / "trace.rank0.jsonl").read_text().splitlines()
        if (trace / "trace.rank0.jsonl").exists()
        else []
    )
    return proc, calls, [json.loads(x) for x in lines], run_dir


# Counting split by scope, the op behind a backend, and K/V reversal through the real registry and
# the real torch_sdpa run against the real LightX2V (test_lightx2v_real.py). The stand-in stays for
# what the real framework cannot show on a CPU: a backend that quietly falls back, a rank that
# crashes at a chosen step, and several packed sequences in one call.


@pytest.mark.slow
def test_fallbacks_and_backends_registered_before_the_launcher(tmp_path):
    """stub_platform is registered at registry import (before wrapping); the refiner uses another one."""
    proc, calls, _, _ = run_launcher(tmp_path, "stub_platform", config={"refiner_attn_type": "stub_other"})
    assert proc.returncode == 0, proc.stderr
    assert calls["calls"] == {"stub_platform": DIT_STEPS * 2, "stub_other": DIT_STEPS}
    assert calls["fallbacks"] == {"stub_other": DIT_STEPS}
    assert calls["outside_scope"] == {"stub_other": 1}


@pytest.mark.slow
@pytest.mark.concurrency
def test_a_crash_still_writes_the_counts_and_the_error(tmp_path):
    proc, calls, _, run_dir = run_launcher(tmp_path, "stub_exact", env={"STUB_CRASH_AT_STEP": "2"})
    assert proc.returncode != 0
    assert calls["finished"] is False
    assert calls["calls"] == {"stub_exact": CALLS_PER_STEP}  # step 1 only
    assert calls["errors"] == ["RuntimeError: stub crash at step 2"]
    assert "stub crash at step 2" in (run_dir / "rank0.log").read_text()  # the traceback is in the rank log


@pytest.mark.slow
@pytest.mark.concurrency  # its error line once lost at the process's end
def test_kv_reversed_refuses_several_packed_sequences_loudly(tmp_path):
    proc, calls, trace, _ = run_launcher(tmp_path, "stub_exact", "--kv-reversed", env={"STUB_MULTISEQ": "1"})
    assert proc.returncode != 0
    assert "2 packed sequences" in proc.stderr
    assert any("only a single sequence per call is supported" in e for e in calls["errors"])
    assert trace == []  # the backend was never called with mixed-up sequences


def test_an_op_that_is_not_installed_is_an_error_not_a_crash():
    book = CallBook("0", "torch_sdpa", False, [], [])
    count_op("no_mod:fn", "gone", book)
    assert book.errors == [
        "count-op gone: no_mod:fn unavailable (ModuleNotFoundError: No module named 'no_mod')"
    ]
    assert book.op_calls == {}


def test_missing_lightx2v_is_recorded(tmp_path):
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable,
        "-m",
        "harness.runners.lightx2v.launch",
        "--run-dir",
        str(run_dir),
        "--attn-type",
        "x",
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
    calls = json.loads((run_dir / "attn_calls.rank0.json").read_text())
    assert calls["errors"][0].startswith("cannot import lightx2v.utils.registry_factory.ATTN_WEIGHT_REGISTER")


# --- in-process unit tests of the pieces ------------------------------------------------------


def _bound(k, v, **kw):
    return {"q": k, "k": k, "v": v, **kw}


def test_reverse_kv_layouts_and_cu_seqlens():
    k = torch.arange(12.0).reshape(6, 1, 2)
    args = _bound(k, k.clone(), cu_seqlens_kv=torch.tensor([0, 6]), max_seqlen_kv=6)
    reverse_kv(args)
    assert torch.equal(args["k"], k.flip(0)) and torch.equal(args["v"], k.flip(0))
    k4 = torch.arange(24.0).reshape(1, 6, 2, 2)
    args = _bound(k4, k4.clone())
    reverse_kv(args)
    assert torch.equal(args["k"], k4.flip(1))
    # [0, N] without a matching max_seqlen is checked against the tensor's values.
    args = _bound(k, k.clone(), cu_seqlens_kv=torch.tensor([0, 6]))
    reverse_kv(args)
    with pytest.raises(ValueError, match="does not cover the whole sequence"):
        reverse_kv(_bound(k, k.clone(), cu_seqlens_kv=torch.tensor([0, 4])))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"causal": True}, "causal"),
        ({"attn_mask": torch.ones(6, 6)}, "attn_mask"),
        ({"cu_seqlens_kv": torch.tensor([0, 3, 6])}, "2 packed sequences"),
    ],
)
def test_reverse_kv_refusals(extra, message):
    k = torch.zeros(6, 1, 2)
    with pytest.raises(ValueError, match=message):
        reverse_kv(_bound(k, k, **extra))


def test_reverse_kv_finds_arguments_in_var_keywords():
    k = torch.arange(4.0).reshape(4, 1, 1)
    args = {"q": k}
    extra = {"k": k, "v": k, "causal": False}
    reverse_kv(args, extra)
    assert torch.equal(extra["k"], k.flip(0))
    with pytest.raises(ValueError, match="causal"):
        reverse_kv({"q": k, "k": k, "v": k}, {"causal": True})


def test_registry_lookups_hand_out_counting_subclasses():
    class Registry(dict):
        pass

    class Backend:
        def __init__(self, scale=1):
            self.scale = scale

        def apply(self, q, k, v, **kw):
            return q * self.scale

    reg = Registry(a=Backend)
    book = CallBook("0", "a", False, [], [])
    instrument_registry(reg, book)
    cls = reg["a"]
    assert cls is reg["a"] and cls is reg.get("a") and issubclass(cls, Backend)
    obj = cls(scale=3)
    assert obj.apply(2, None, None) == 6 and obj.scale == 3
    assert book.calls == {"a": 1} and book.instances == {f"a <- {__name__}": 1}
    assert reg.get("missing") is None
    assert dict.__getitem__(reg, "a") is Backend  # the registry's own dict is untouched


def test_registered_functions_and_unsubclassable_classes_are_counted_per_instance():
    class Backend:
        def apply(self, q, k, v):
            return q + 1

    class Final(type):
        def __new__(mcs, name, bases, ns):
            if any(isinstance(b, Final) for b in bases):
                raise TypeError("final class")
            return super().__new__(mcs, name, bases, ns)

    class Sealed(metaclass=Final):
        def apply(self, q, k, v):
            return q * 2

    class Registry(dict):
        pass

    reg = Registry(f=lambda: Backend(), g=Sealed)
    book = CallBook("0", "f", False, [], [])
    instrument_registry(reg, book)
    assert reg["f"]().apply(1, 2, 3) == 2
    assert reg["g"]().apply(2, 0, 0) == 4
    assert book.calls == {"f": 1, "g": 1} and book.fallbacks == {"g": 1}
    assert len(book.errors) == 1
    assert book.errors[0].startswith("g: cannot subclass ")
    assert book.errors[0].endswith("Sealed (final class); counting per instance")
