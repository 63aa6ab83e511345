"""Harness attention backends a LightX2V run calls, and how a LightX2V process serves them.

A plugin's backend (the scenario's ``plugins:``) is not a LightX2V attention type. Inside a
LightX2V process (every rank, the pre-flight probe) the spec's plugins are imported as planned
(a file changed since is refused), and each backend they registered that LightX2V's
``ATTN_WEIGHT_REGISTER`` lacks is registered there under its own name as a LightX2V attention
class whose ``apply`` is the harness backend's packed call, so the launcher counts, reverses,
schedules and shadows its calls as any LightX2V class's.

At plan time (``harness_backends``): which harness backends a run calls, for its code identity.
Standard library at import time; torch, pydantic and LightX2V are imported by the functions.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from harness.runners.common import plugin_backends
from harness.runners.lightx2v.rank_env import SP_WRAPPERS

EMULATED = "sage_emul_thuml"  # what the emulator shim serves sage_attn2 with (shims/emulator_sageattention)
# LightX2V types the harness also names, in every checkout: LightX2V's class serves them.
LIGHTX2V_CORE = frozenset(
    {"torch_sdpa", "sage_attn2", "aiter_attn", "flash_attn2", "flash_attn3", *SP_WRAPPERS}
)
_REGISTERED = re.compile(r"ATTN_WEIGHT_REGISTER\(\s*[\"']([^\"']+)[\"']")


@functools.cache
def lightx2v_types(root: str) -> frozenset[str]:
    """The attention types a LightX2V checkout registers, read from its source (any platform's),
    with the core types when the checkout is not here (planned away from the target machine)."""
    found = set(LIGHTX2V_CORE)
    for package in ("lightx2v", "lightx2v_platform"):
        for path in sorted((Path(root) / package).rglob("*.py")):
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            if "ATTN_WEIGHT_REGISTER" in text:
                found.update(_REGISTERED.findall(text))
    return frozenset(found)


def harness_backends(spec: Any, params: Any) -> list[str]:
    """The harness backends a LightX2V run calls: the plugin backends its arm runs (attn_type,
    refiner, schedule's exact) that LightX2V does not register itself, the sage_attn2 emulator
    where the arm or a shadow asks for it, and shadows LightX2V does not register that are
    harness backends (``shadows.build_shadowed`` runs those through the harness)."""
    plugins = set(plugin_backends(spec.plugins))
    own = lightx2v_types(params.root)
    arm = [spec.attn_type, params.attention.refiner_attn_type]
    if spec.schedule is not None:
        arm.append(spec.schedule.exact)
    names = [n for n in arm if n in plugins and n not in own]
    if params.sageattention == "emulator" or "emulator" in params.shadow_sageattention.values():
        names.append(EMULATED)
    others = [s.attn_type for s in spec.shadows if s.attn_type not in own]
    if others:  # the harness registry imports torch: only for shadows LightX2V does not serve
        from harness.attention.registry import BACKENDS

        names += [n for n in others if n in BACKENDS]
    return list(dict.fromkeys(names))


# --- inside a LightX2V process -------------------------------------------------------------------


def served_backend(cls: Any) -> str | None:
    """The harness backend a registry entry serves (None: one of LightX2V's own classes)."""
    return getattr(cls, "harness_backend", None)


def weight_class(name: str, base: type | None = None) -> type:
    """A LightX2V attention weight class calling harness backend ``name``; ``base``: LightX2V's
    attention template unless given (imported here: a class is built per process, in LightX2V's)."""
    from harness.attention.registry import backend_class, get_backend

    if base is None:
        try:
            from lightx2v.common.ops.attn.template import AttnWeightTemplate as base
        except ImportError:  # a LightX2V without the template: LightX2V only calls apply()
            base = object

    class HarnessAttnWeight(base):  # type: ignore[misc, valid-type]
        harness_backend = name
        harness_exact = bool(backend_class(name).exact)

        def __init__(self):  # LightX2V builds attention as REGISTER[name]()
            self.weight_name = name
            self.config = {}
            self.backend = get_backend(name)

        def apply(self, q, k, v, drop_rate=0, attn_mask=None, causal=False, cu_seqlens_q=None, cu_seqlens_kv=None,
                  max_seqlen_q=None, max_seqlen_kv=None, **kwargs):  # fmt: skip
            return self.backend.apply(
                q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv,
                causal=causal, attn_mask=attn_mask, drop_rate=drop_rate, **kwargs,
            )  # fmt: skip

    HarnessAttnWeight.__name__ = HarnessAttnWeight.__qualname__ = f"HarnessAttnWeight[{name}]"
    return HarnessAttnWeight


def serve_backends(registry: Any, names: list[str], base: type | None = None) -> tuple[list[str], list[str]]:
    """Register each harness backend of ``names`` that ``registry`` lacks (``weight_class``);
    returns (registered, left to LightX2V's own class of that name)."""
    served, lightx2v_own = [], []
    for name in names:
        if name in registry:
            (served if served_backend(registry[name]) == name else lightx2v_own).append(name)
            continue
        registry[name] = weight_class(name, base)
        served.append(name)
    return served, lightx2v_own


def shadowed_by_lightx2v(attn_types: list[str], lightx2v_own: list[str]) -> str | None:
    """Why an arm whose attention type both a plugin and LightX2V register cannot run (the name is
    LightX2V's class, not the plugin's), or None."""
    for name in attn_types:
        if name in lightx2v_own:
            return (
                f"attn_type {name!r}: a plugin registers a harness backend of that name, but LightX2V has "
                "its own class of that name, which would serve it (rename the plugin's backend)"
            )
    return None
