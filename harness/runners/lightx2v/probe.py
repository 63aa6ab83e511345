"""The LightX2V pre-flight, run in the ranks' interpreter and environment: can these arms run here?

Asked several arms' ``--questions JSON``, it imports LightX2V's registry as a rank does; each type must
agree with exact attention on one small call. The last stdout line is ``{"answers": [{"ok", "reason",
"facts"}, ...]}``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from harness.envinfo import git_info
from harness.registry import did_you_mean
from harness.runners import common
from harness.runners.common import SMOKE_HEADS, SMOKE_MIN_COSINE, SMOKE_TOKENS, one_line, smoke_cosine
from harness.runners.lightx2v.rank_env import (
    AITER_OP,
    CPU_PLATFORM,
    PINNED_SAGEATTENTION,
    SAGEATTENTION_FLAVOURS,
    SP_WRAPPERS,
    attention_registry,
    bind_pinned_function,
    flavour_text,
    pinned_missing,
    prepare_platform,
    sageattention_flavour,
    serve_backends,
    shadowed_by_lightx2v,
)

# Features of a LightX2V checkout the harness relies on: (module, text in its source, since).
FEATURES = {
    "adaln_cache": (
        "lightx2v.models.networks.minimax_h3.infer.transformer_infer",
        "use_adaln_cache",
        "f8aee98 (#1413): use_adaln_cache; older checkouts ignore the key silently",
    ),
    "sage_sm120_triton": (
        "lightx2v.common.ops.attn.sage_attn",
        "(12, 0)",
        "205d5c87: sage_attn2 selects sageattn_qk_int8_pv_fp16_triton on capability (12, 0)",
    ),
}
SMOKE_HEAD_DIM = 128


def _op_reason(ref: str) -> str | None:
    """Why ``module:function`` cannot be called here (the aiter op also needs ROCm and gfx1201)."""
    if ref == AITER_OP:
        import torch

        if not getattr(torch.version, "hip", None):
            return f"needs a ROCm build of torch (this one is {torch.__version__}, no HIP)"
        if torch.cuda.device_count() < 1:
            return "no GPU is visible"
        arch = str(getattr(torch.cuda.get_device_properties(0), "gcnArchName", "")).split(":")[0]
        if arch != "gfx1201":
            return f"needs gfx1201 (Radeon AI PRO R9700); GPU 0 is {arch or 'unknown'}"
    mod_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(mod_name)
    except Exception as err:
        return f"{mod_name} is not importable ({type(err).__name__}: {err})"
    if not hasattr(module, attr):
        return f"{mod_name} has no {attr}"
    return None


def sageattention_reason(flavour: str) -> str | None:
    """Which ``sageattention`` LightX2V's sage_attn2 would import, and whether it has the entry it needs."""
    if missing := pinned_missing(flavour):
        return missing
    if importlib.util.find_spec("sageattention") is None:
        return "the sageattention package is not importable" + (
            f" ({flavour_text(flavour)} is not on PYTHONPATH)" if flavour != "package" else ""
        )
    try:
        module = importlib.import_module("sageattention")
    except Exception as err:
        return f"import sageattention failed: {type(err).__name__}: {err}"
    found = sageattention_flavour(module)
    if flavour != "package":
        if found != flavour:
            return f"sageattention resolves to {module.__file__}, not {flavour_text(flavour)}"
        if flavour in PINNED_SAGEATTENTION and not hasattr(module, PINNED_SAGEATTENTION[flavour].function):
            return f"{flavour_text(flavour)} at {module.__file__} has no {PINNED_SAGEATTENTION[flavour].function}"
        return _op_reason(AITER_OP) if flavour == "aiter_shim" else None
    if found != "package":
        return f"sageattention resolves to {flavour_text(found)} ({module.__file__}), not the package"
    import torch

    capability = torch.cuda.get_device_capability(0) if torch.cuda.is_available() else None
    needed = "sageattn_qk_int8_pv_fp16_triton" if capability in ((8, 9), (12, 0)) else "sageattn"
    if not hasattr(module, needed):
        return (
            f"sageattention at {module.__file__} has no {needed}, which LightX2V's sage_attn2 imports "
            f"on this device (capability {capability})"
        )
    return None


def smoke_call(backend_cls: Any, device: str) -> tuple[float | None, str | None]:
    """One small packed call ``[N, H, 128]`` in bf16; cosine against FP32 exact attention."""
    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    n, h, d = SMOKE_TOKENS, SMOKE_HEADS, SMOKE_HEAD_DIM
    q, k, v = (torch.randn(n, h, d, generator=gen) for _ in range(3))
    cu = torch.tensor([0, n], dtype=torch.int32, device=device)
    packed = {"cu_seqlens_q": cu, "cu_seqlens_kv": cu, "max_seqlen_q": n, "max_seqlen_kv": n}
    q16, k16, v16 = (t.to(device, torch.bfloat16) for t in (q, k, v))
    try:
        out = backend_cls().apply(q=q16, k=k16, v=v16, **packed)
    except Exception as err:
        return None, f"a {n}-token test call failed ({type(err).__name__}: {str(err)[:200]})"
    ref = F.scaled_dot_product_attention(*(t.transpose(0, 1)[None] for t in (q, k, v)))[0].transpose(0, 1)
    try:
        cosine = smoke_cosine(out, ref, torch.float32)
    except ValueError as err:
        return None, f"a {n}-token test call {err}"
    if cosine < SMOKE_MIN_COSINE:
        return (
            cosine,
            f"a {n}-token test call disagrees with exact attention (cosine {cosine:.4f} < {SMOKE_MIN_COSINE})",
        )
    return cosine, None


def _torch_facts(facts: dict[str, Any]) -> int:
    import torch

    facts["torch"] = torch.__version__
    facts["hip"] = getattr(torch.version, "hip", None)
    facts["cuda"] = getattr(torch.version, "cuda", None)
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    facts["gpus"] = count
    if count:
        props = torch.cuda.get_device_properties(0)
        facts["gpu0"] = props.name
        facts["arch"] = str(getattr(props, "gcnArchName", "")).split(":")[0] or None
        facts["capability"] = list(torch.cuda.get_device_capability(0))
    if importlib.util.find_spec("aiter") is not None:
        try:
            import aiter

            facts["aiter_file"] = getattr(aiter, "__file__", None)
            facts["aiter_version"] = getattr(aiter, "__version__", None)
            if facts["aiter_file"]:
                checkout = Path(facts["aiter_file"]).resolve().parent.parent
                facts["aiter_git"] = (git_info(checkout) or {}).get("sha")
        except Exception as err:
            facts["aiter_error"] = f"{type(err).__name__}: {err}"
    return count


def probe_many(
    questions: list[dict[str, Any]], flavour: str = "package", plugins: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Several arms' questions (``{attn_types, nproc, count_ops, require, shadow_types[, serve]}``), LightX2V
    imported once, the ``plugins`` (PluginRef dicts) served as the ranks do: the answers in order."""
    facts: dict[str, Any] = {"python": sys.executable, "platform": os.environ.get("PLATFORM", "cuda")}
    facts["questions"] = len(questions)  # how many arms this probe process answered

    def answer(reason: str | None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"ok": reason is None, "reason": reason, "facts": {**facts, **(extra or {})}}

    framework = {common.FRAMEWORK_FACT: True}  # no arm can run: the pre-flight fails the run, not a skip
    try:
        gpus = _torch_facts(facts)
    except Exception as err:
        return [answer(f"torch is not importable ({err})", framework) for _ in questions]
    platform = facts["platform"]
    # Cheap checks first: an import of LightX2V takes seconds.
    early = [early_reason(q, flavour, platform, gpus) for q in questions]
    answers: list[Any] = [answer(why) if why else None for why in early]
    if all(early):
        return answers

    plugin_types: list[str] = []
    try:
        prepare_platform()
        if plugins:  # before LightX2V's registry: their backends are attention types too
            try:
                plugin_types = common.load_plugins(plugins)
            except BaseException as err:  # a ScenarioError is one line; a plugin's own failure too
                raise PluginFailed(one_line(err) or type(err).__name__) from err
        registry = attention_registry()
        import lightx2v
        from lightx2v_platform.base.global_var import AI_DEVICE
    except BaseException as err:  # LightX2V raises SystemExit-free RuntimeErrors; catch all, report one line
        plugin = isinstance(err, PluginFailed)  # a plugin's own failure: its arms, not the framework
        failed = f"import lightx2v failed with PLATFORM={platform}: {type(err).__name__}: {str(err)[:300]}"
        reason = str(err) if plugin else failed
        return [a or answer(reason, None if plugin else framework) for a in answers]
    if bound := bind_pinned_function():  # as the ranks do: the smoke call runs what they run
        facts["sageattention_function"] = bound
    root = Path(lightx2v.__file__).resolve().parent.parent
    facts["lightx2v_root"] = str(root)
    facts["lightx2v_version"] = getattr(lightx2v, "__version__", None)
    facts["lightx2v_git"] = (git_info(root) or {}).get("sha")
    lightx2v_own: list[str] = []
    # the plugins' backends and the harness's own an arm names (``serve``), as the ranks serve them
    to_serve = list(dict.fromkeys([*plugin_types, *(n for q in questions for n in q.get("serve") or [])]))
    if to_serve:
        facts["harness_served"], lightx2v_own = serve_backends(registry, to_serve)
    facts["registered"] = sorted(registry.keys())
    facts["features"] = {}
    for name, (module, token, _) in FEATURES.items():
        spec = importlib.util.find_spec(module)
        try:
            text = Path(spec.origin).read_text(errors="replace") if spec and spec.origin else ""
        except OSError:
            text = ""
        facts["features"][name] = token in text
    facts["device"] = str(AI_DEVICE)
    smoke: dict[str, tuple[float | None, str | None]] = {}  # one test call per type, whoever asks
    for i, q in enumerate(questions):
        if answers[i] is None:
            cosines: dict[str, float | None] = {}
            why = registry_reason(q, flavour, registry, lightx2v_own, facts, smoke, cosines)
            answers[i] = answer(why, {"smoke_cosine": cosines})
    return answers


class PluginFailed(Exception):
    """A plugin of the spec failed to import in the probe (its one line is the answer)."""


def early_reason(q: dict[str, Any], flavour: str, platform: str, gpus: int) -> str | None:
    """Why the question is refused before LightX2V is imported: ranks, counted ops, sageattention."""
    if platform != CPU_PLATFORM and q["nproc"] > gpus:
        visible = os.environ.get("HIP_VISIBLE_DEVICES") or os.environ.get("CUDA_VISIBLE_DEVICES")
        where = f" (visible devices: {visible})" if visible else ""
        return f"nproc_per_node {q['nproc']} exceeds the {gpus} visible GPU(s){where}"
    if platform == "amd_rocm" and importlib.util.find_spec("aiter") is None:
        return "PLATFORM=amd_rocm needs aiter (LightX2V's ROCm platform imports it)"
    for label, ref in sorted((q.get("count_ops") or {}).items()):
        if why := _op_reason(ref):
            return f"count_ops {label}: {ref}: {why}"
    if "sage_attn2" in q["attn_types"] and (why := sageattention_reason(flavour)):
        return f"sage_attn2: {why}"
    return None


def registry_reason(
    q: dict, flavour: str, registry: Any, lightx2v_own: list[str], facts: dict, smoke: dict, cosines: dict
) -> str | None:
    """Why the question is refused by the imported LightX2V (features, names, a test call), or None;
    ``smoke``: each type's test call (cosine, why), whoever asks; ``cosines``: this question's."""
    attn_types = q["attn_types"]
    if why := shadowed_by_lightx2v(attn_types, lightx2v_own):
        return why
    needed = list(q.get("require") or [])
    if "sage_attn2" in attn_types and flavour == "package" and facts.get("capability") == [12, 0]:
        needed.append("sage_sm120_triton")
    for feature in needed:
        if feature not in FEATURES:
            return f"unknown LightX2V feature {feature!r} (known: {', '.join(FEATURES)})"
        if not facts["features"][feature]:
            return (
                f"the LightX2V checkout at {facts['lightx2v_root']} is older than this scenario needs: "
                f"no {feature} (from {FEATURES[feature][2]})"
            )
    unknown = [n for n in dict.fromkeys(q.get("shadow_types") or []) if n not in registry]
    if unknown:  # a shadow's type that neither LightX2V nor the harness knows (a typo)
        from harness.attention.registry import BACKENDS

        for name in (n for n in unknown if n not in BACKENDS.names()):
            hint = did_you_mean(name, [*registry.keys(), *BACKENDS.names()])
            return f"shadow {name!r}: neither a LightX2V attention type nor a harness backend{hint}"
    for name in dict.fromkeys(attn_types):
        if name not in registry:
            return (
                f"attn_type {name!r} is not registered in LightX2V at {facts['lightx2v_root']} "
                f"with PLATFORM={facts['platform']}{did_you_mean(name, list(registry.keys()))}"
            )
        if name in SP_WRAPPERS:
            continue  # wrappers need a process group and a backend to wrap
        if name not in smoke:
            smoke[name] = smoke_call(registry[name], facts["device"])
        cosines[name], why = smoke[name]
        if why:
            return f"{name}: {why}"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m harness.runners.lightx2v.probe", description=__doc__.split("\n")[0]
    )
    p.add_argument("--sageattention", choices=SAGEATTENTION_FLAVOURS, default="package")
    p.add_argument(
        "--plugins", type=common.plugins_json, default=[], help="the spec's plugins (PluginRef JSON list)"
    )
    p.add_argument(
        "--questions",
        type=json.loads,
        required=True,
        help="the arms' questions (a JSON list of {attn_types, nproc, count_ops, require, shadow_types}); "
        'the answer is {"answers": [...]}, in order',
    )
    ns = p.parse_args(argv)
    result = {"answers": probe_many(ns.questions, ns.sageattention, ns.plugins)}
    # LightX2V logs to stderr; the result is the last stdout line.
    print(json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
