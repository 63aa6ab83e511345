"""Contract checks against the real LightX2V, run in a subprocess by test_lightx2v_real.py.

    PLATFORM=cpu python tests/runners/lightx2v_contract.py CHECK [INPUT.json]
    PLATFORM=cpu python tests/runners/lightx2v_contract.py many ITEMS.json

Importing LightX2V initialises a platform and fills global registries, and costs about 15 s of
CPU: ``many`` runs several checks (``[{name, check, data}]``) in one process, each one's stderr
and failure kept apart. Checks that touch global state (the registry's class, ``sys.argv``) put it
back, so none sees another's. The last stdout line is the result as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def check_registry(_: Any) -> dict[str, Any]:
    """The launcher's counting and K/V reversal around the real registry and the real torch_sdpa."""
    import torch

    from harness.runners.lightx2v.counting import CallBook, instrument_registry
    from harness.runners.lightx2v.rank_env import prepare_platform

    prepare_platform()
    from lightx2v.utils.registry_factory import ATTN_WEIGHT_REGISTER as REG

    plain_cls = REG["torch_sdpa"]
    registry_cls = type(REG)
    gen = torch.Generator().manual_seed(0)
    n, h, d = 512, 2, 64
    q, k, v = (torch.randn(n, h, d, generator=gen, dtype=torch.float32) for _ in range(3))
    cu = torch.tensor([0, n], dtype=torch.int32)
    args = {"cu_seqlens_q": cu, "cu_seqlens_kv": cu, "max_seqlen_q": n, "max_seqlen_kv": n}
    plain = plain_cls().apply(q=q, k=k, v=v, **args)

    out: dict[str, Any] = {"registered": sorted(REG.keys())}
    try:
        for reversed_kv in (False, True):
            REG.__class__ = registry_cls  # each book instruments the real registry afresh
            book = CallBook("0", "torch_sdpa", reversed_kv, ["lightx2v.models.networks"], [])
            instrument_registry(REG, book)
            # Built from a module under the scope, as the DiT builds its backends.
            scope = {"__name__": "lightx2v.models.networks.contract", "REG": REG}
            exec("backend = REG['torch_sdpa']()", scope)
            got = scope["backend"].apply(q=q, k=k, v=v, **args)
            got_again = scope["backend"].apply(
                q, k, v, **args
            )  # q, k, v by position, as some callers pass them
            # And one built elsewhere (a VAE): counted apart, never reversed.
            outside = {"__name__": "lightx2v.models.video_encoders.contract", "REG": REG}
            exec("backend = REG['torch_sdpa']()", outside)
            outside_out = outside["backend"].apply(q=q, k=k, v=v, **args)
            key = "reversed" if reversed_kv else "plain"
            out[key] = {
                "max_abs_vs_unwrapped": float((got - plain).abs().max()),
                "max_abs_positional": float((got_again - plain).abs().max()),
                "outside_equal_unwrapped": bool(torch.equal(outside_out, plain)),
                "counting_subclass": bool(getattr(type(scope["backend"]), "_harness_counting", False)),
                "is_subclass_of_real": issubclass(type(scope["backend"]), plain_cls),
                "book": book.to_json(),
            }
    finally:  # instrument_registry swapped its class: later checks in this process get the real one
        REG.__class__ = registry_cls
    return out


def _parse_infer_args(argv: list[str]):
    """Run LightX2V's own ``infer.main`` until its parser has read ``argv``; return the namespace."""
    import lightx2v.infer as infer

    class Parsed(Exception):
        pass

    def stop(seed):  # main() calls seed_all(args.seed) right after parse_args()
        raise Parsed

    frame_args = {}
    original = infer.argparse.ArgumentParser.parse_args

    def capture(self, *a, **kw):
        ns = original(self, *a, **kw)
        frame_args["ns"] = ns
        return ns

    seed_all, saved_argv = infer.seed_all, sys.argv
    infer.seed_all = stop
    infer.argparse.ArgumentParser.parse_args = capture
    sys.argv = ["lightx2v.infer", *argv]
    try:
        infer.main()
    except Parsed:
        return frame_args["ns"]
    finally:  # as found, for the next case and the next check in this process
        infer.argparse.ArgumentParser.parse_args = original
        infer.seed_all, sys.argv = seed_all, saved_argv
    raise AssertionError("lightx2v.infer.main did not reach seed_all")


def check_infer(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """LightX2V's parser on the harness's argv, then its config loading on the resolved config.json."""
    from harness.runners.lightx2v.rank_env import prepare_platform

    prepare_platform()
    from lightx2v.utils.set_config import set_config

    results = {}
    for case in cases:
        try:
            ns = _parse_infer_args(case["argv"])
        except SystemExit as exc:  # argparse refuses with exit 2 and a usage line on stderr
            results[case["arm"]] = {"parser_exit": exc.code}
            continue
        config = set_config(ns)
        results[case["arm"]] = {
            "args": {k: getattr(ns, k, None) for k in case["expect_args"]},
            "config": {k: config.get(k) for k in case["expect_config"]},
        }
    return results


def check_profiler(_: Any) -> dict[str, Any]:
    """Lines written by LightX2V's own profiler context managers (to stderr, through loguru)."""
    import time

    from harness.runners.lightx2v.rank_env import prepare_platform

    prepare_platform()
    from lightx2v.utils.profiler import ProfilingContext4DebugL1, ProfilingContext4DebugL2

    slept = {"load": 0.05, "steps": [0.03, 0.02, 0.04]}
    with ProfilingContext4DebugL1("Total Cost"):
        with ProfilingContext4DebugL2("Load models"):
            time.sleep(slept["load"])
        with ProfilingContext4DebugL1("RUN pipeline"):
            for seconds in slept["steps"]:
                with ProfilingContext4DebugL1("Run Dit every step"):
                    time.sleep(seconds)
    return slept


def check_shim(_: Any) -> dict[str, Any]:
    """Which ``sageattn`` LightX2V's sage_attn2 module bound, with the shim first on the path."""
    from harness.runners.lightx2v.rank_env import prepare_platform

    prepare_platform()
    import lightx2v.common.ops.attn.sage_attn as sage_attn

    fn = sage_attn.sageattn
    package = sys.modules.get("sageattention")
    return {
        "bound": None if fn is None else f"{fn.__module__}.{fn.__name__}",
        "package_file": getattr(package, "__file__", None),
        "is_aiter_shim": bool(getattr(package, "IS_AITER_SHIM", False)),
    }


def check_shadows(_: Any) -> dict[str, Any]:
    """Which shadows of the real registry build here: a registered type whose kernel is missing
    (flash_attn3 without its package) is left out with a reason, not measured as failing calls."""
    from harness.runners.lightx2v.rank_env import prepare_platform
    from harness.runners.lightx2v.shadows import lightx2v_shadow, make_ops

    prepare_platform()
    from lightx2v.utils.registry_factory import ATTN_WEIGHT_REGISTER as REG

    _, op_class = make_ops({"kwargs": {}})
    out = {}
    for name, spec in (("flash_attn3", {}), ("torch_sdpa", {"kv_reversed": True})):
        got = lightx2v_shadow({"name": name, "attn_type": name, **spec}, REG[name], op_class)
        out[name] = got if isinstance(got, str) else {"exact": got.exact, "kv_reversed": got.kv_reversed}
    return out


@contextmanager
def _stderr_of_fd2():
    """What is written to fd 2 meanwhile (loguru writes to the stderr it found at import)."""
    captured = {"text": ""}
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as file:
        os.dup2(file.fileno(), 2)
        try:
            yield captured
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            file.seek(0)
            captured["text"] = file.read().decode(errors="replace")
            sys.stderr.write(captured["text"])  # the process's stderr still has it all


def check_many(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Each item's check in turn, in this process: {name: {result or error (traceback), stderr}}.
    A failing check is reported as its own, and the rest still run."""
    out = {}
    for item in items:
        with _stderr_of_fd2() as stderr:
            try:
                got = {"result": CHECKS[item["check"]](item.get("data"))}
            except (Exception, SystemExit):
                got = {"error": traceback.format_exc()}
        out[item["name"]] = {**got, "stderr": stderr["text"]}
    return out


CHECKS = {
    "registry": check_registry,
    "infer": check_infer,
    "profiler": check_profiler,
    "shim": check_shim,
    "shadows": check_shadows,
    "many": check_many,
}

if __name__ == "__main__":
    name = sys.argv[1]
    data = json.loads(Path(sys.argv[2]).read_text()) if len(sys.argv) > 2 else None
    result = CHECKS[name](data)
    print(json.dumps(result, default=str), flush=True)
