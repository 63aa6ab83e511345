"""The diffusers pre-flight, run in the run's interpreter and environment: can these backends run here?
A dispatcher or harness backend must pass diffusers' checks at the run's device and dtype and agree
with exact attention on one small call per head dim. One JSON line on stdout: ``ProbeResult``s."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pydantic import Field

from harness.errors import HarnessError
from harness.records import Record
from harness.registry import did_you_mean
from harness.runners import common

MODULE = "harness.runners.diffusers.probe"


class ProbeResult(Record):
    """One backend's pre-flight in the run's interpreter: can it run, and does it agree with exact attention?"""

    attn_type: str
    ok: bool
    reason: str | None = None
    kind: str = ""  # dispatcher | harness
    cosine: dict[str, float] = Field(default_factory=dict)  # head dim -> cosine against exact attention
    facts: dict[str, Any] = Field(default_factory=dict)


def _smoke_inputs(device: Any, dtype: Any, head_dim: int) -> tuple[Any, Any, Any]:
    import torch

    gen = torch.Generator().manual_seed(head_dim)
    shape = (1, common.SMOKE_TOKENS, common.SMOKE_HEADS, head_dim)  # the dispatcher's [B, S, H, D]
    return tuple(torch.randn(shape, generator=gen).to(device, dtype) for _ in range(3))  # type: ignore[return-value]


def _dispatcher_check(name: str, device: Any, dtype: Any, head_dims: list[int]) -> tuple[str | None, dict]:
    from diffusers.models import attention_dispatch as ad

    member = ad.AttentionBackendName(name)
    try:
        ad._check_attention_backend_requirements(member)
        ad._maybe_download_kernel_for_backend(member)
    except Exception as err:  # diffusers raises RuntimeError; a hub fetch anything
        return common.one_line(err, 300), {}
    cosines: dict[str, float] = {}
    refused = f"diffusers' checks refuse {str(dtype).removeprefix('torch.')} on {device}"
    for d in head_dims:
        q, k, v = _smoke_inputs(device, dtype, d)
        for check in ad._AttentionBackendRegistry._constraints.get(member, []):
            try:
                check(query=q, key=k, value=v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None)
            except ValueError as err:
                return f"{refused}: {err}", cosines
        cosines[str(d)] = _call(member, q, k, v, d)
    return None, cosines


def _call(member: Any, q: Any, k: Any, v: Any, d: int) -> float:
    """One call through the dispatcher against float64 exact attention: the cosine of the outputs."""
    import torch
    from diffusers.models.attention_dispatch import dispatch_attention_fn

    from harness.attention.exact import exact_attention

    try:
        out = dispatch_attention_fn(q, k, v, backend=member)
        ref = exact_attention(*(x.transpose(1, 2) for x in (q, k, v))).transpose(1, 2)
        return common.smoke_cosine(out, ref, torch.float64)
    except Exception as err:
        raise _Refused(f"a {common.SMOKE_TOKENS}-token test call (head dim {d}) failed: {type(err).__name__}: "
                       f"{common.one_line(err, 200)}") from None  # fmt: skip


class _Refused(Exception):
    pass


def _harness_check(
    name: str, options: dict, device: Any, dtype: Any, head_dims: list[int]
) -> tuple[str | None, dict]:
    from harness.attention.registry import BACKENDS
    from harness.attention.wrappers import make_attention
    from harness.records import AttentionChoice
    from harness.runners.diffusers.dispatch import CallBook, Instrument

    ok, why = BACKENDS.get(name).availability()
    if not ok:
        return f"harness backend {name} unavailable here: {why}", {}
    try:
        chain = make_attention(AttentionChoice(attn_type=name, attn_options=options))
    except HarnessError as err:
        return str(err), {}
    cosines: dict[str, float] = {}
    with Instrument(CallBook(name, "harness", False)) as inst:
        inst.register_harness(name, chain)
        member = inst.ad.AttentionBackendName(name)
        for d in head_dims:
            q, k, v = _smoke_inputs(device, dtype, d)
            cosines[str(d)] = _call(member, q, k, v, d)
        if chain.errors:
            return f"harness backend {name}: {chain.errors[0]}", cosines
    return None, cosines


def probe(
    backends: list[tuple[str, dict]], device_name: str, dtype_name: str, head_dims: list[int]
) -> list[dict]:
    facts: dict[str, Any] = {"python": sys.executable}
    try:
        import torch

        from harness.envinfo import package_versions, resolve_device

        facts["packages"] = package_versions(
            ("diffusers", "transformers", "torch", "sageattention", "flash-attn")
        )
        device = torch.device(resolve_device(device_name, context="diffusers.device"))
        from harness.runners.diffusers.launch import resolve_dtype

        dtype = resolve_dtype(dtype_name, device)
        facts["device"] = str(device)
        if device.type == "cuda":
            facts["gpu"] = torch.cuda.get_device_name(device)
            facts["capability"] = list(torch.cuda.get_device_capability(device))
        from diffusers.models import attention_dispatch as ad

        from harness.attention.registry import BACKENDS
    except (ImportError, HarnessError) as err:
        if isinstance(err, ImportError):  # torch or diffusers itself: no backend can run (exit 3)
            facts[common.FRAMEWORK_FACT] = True
            err = f"{type(err).__name__}: {err}"
        return [_result(n, False, common.one_line(err, 300), "", {}, facts) for n, _ in backends]
    names = sorted(m.value for m in ad.AttentionBackendName)
    ours = BACKENDS.names()
    out = []
    for name, options in backends:
        kind = "dispatcher" if name in names else "harness" if name in ours else ""
        try:
            if kind == "dispatcher":
                why, cos = _dispatcher_check(name, device, dtype, head_dims)
            elif kind == "harness":
                why, cos = _harness_check(name, options, device, dtype, head_dims)
            else:
                why, cos = f"unknown attention backend {name!r}{did_you_mean(name, [*names, *ours])}", {}
        except _Refused as err:
            why, cos = str(err), {}
        low = [f"head dim {d}: cosine {c:.4f}" for d, c in cos.items() if c < common.SMOKE_MIN_COSINE]
        if why is None and low:
            why = f"disagrees with exact attention ({', '.join(low)} < {common.SMOKE_MIN_COSINE})"
        out.append(_result(name, why is None, why, kind, cos, facts))
    return out


def _result(name: str, ok: bool, why: str | None, kind: str, cos: dict, facts: dict) -> dict:
    result = ProbeResult(attn_type=name, ok=ok, reason=why, kind=kind, cosine=cos, facts=facts)
    return result.model_dump(mode="json")


def probe_in_subprocess(
    backends: list[tuple[str, dict]],
    *,
    device: str = "auto",
    dtype: str = "auto",
    head_dims: list[int] | None = None,
    python: str | None = None,
    env: dict[str, str] | None = None,
    plugins: list[Any] | None = None,
) -> list[dict]:
    """Run this module in ``python`` (``env`` added, ``plugins`` imported first); a result per backend."""
    cmd = [python or sys.executable, "-m", MODULE, "--device", device, "--dtype", dtype]
    if plugins:
        cmd += ["--plugins-json", common.plugins_arg(plugins)]
    for d in head_dims or [128]:
        cmd += ["--head-dim", str(d)]
    for name, options in backends:
        cmd += ["--backend", f"{name}={json.dumps(options, sort_keys=True)}" if options else name]

    results, why = common.probe_output(cmd, env, 600.0, "[")
    for result in results or []:
        common.check_framework(
            "diffusers", result.get("facts") or {}, result.get("reason"), python or sys.executable
        )
    if results is not None and len(results) == len(backends):
        return results
    why = why if results is None else "the pre-flight probe answered for other backends"
    return [{"attn_type": n, "ok": False, "reason": why} for n, _ in backends]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--head-dim", type=int, action="append", default=[])
    p.add_argument("--backend", action="append", required=True, metavar="NAME[=OPTIONS_JSON]")
    p.add_argument(
        "--plugins-json", type=common.plugins_json, default=[], help="the spec's plugins, imported first"
    )
    ns = p.parse_args(argv)
    backends = [
        (name, json.loads(opts) if opts else {}) for name, _, opts in (b.partition("=") for b in ns.backend)
    ]
    try:
        common.load_plugins(ns.plugins_json)
    except HarnessError as err:
        print(json.dumps([_result(n, False, str(err), "", {}, {}) for n, _ in backends]), flush=True)
        return 0
    results = probe(backends, ns.device, ns.dtype, ns.head_dim or [128])
    print(json.dumps(results, default=str), flush=True)  # the last stdout line is the result
    return 0


if __name__ == "__main__":
    sys.exit(main())
