"""What the harness sets up inside a LightX2V process before LightX2V runs (a ``cpu`` platform, a
synthetic checkpoint's relaxed checks, the ``sageattention`` flavours, a plugin's backends served as
LightX2V classes), and what both sides know of LightX2V. Standard library at import time.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.runners import common
from harness.sage_packages import PACKAGES as PINNED_SAGEATTENTION

CPU_PLATFORM = "cpu"
# Written last by checkpoint.py into a synthetic checkpoint: the only folders relaxed checks apply to.
SYNTHETIC_MARKER = "harness_synthetic_checkpoint.json"
MARKER_SCHEMA = "harness.synthetic_checkpoint/1"
read_marker = functools.partial(common.read_marker, name=SYNTHETIC_MARKER, schema=MARKER_SCHEMA)
LIGHTX2V_REGISTRY = "lightx2v.utils.registry_factory"  # its ATTN_WEIGHT_REGISTER: name -> attention class
QWEN3VL_MODULE = "lightx2v.models.input_encoders.hf.minimax_h3.qwen3vl"
REF2AV_PACKING_MODULE = "lightx2v.models.networks.minimax_h3.packing_ref2av"
# LightX2V's sequence-parallel types wrap the real backend: their calls are neither it nor a fallback.
SP_WRAPPERS = ("ulysses", "ulysses-4090", "ring")
# The harness's `sageattention` shims for sage_attn2: folder under shims/, the package's flag, a label.
SAGEATTENTION_SHIMS = {
    "aiter_shim": ("aiter_sageattention", "IS_AITER_SHIM", "the aiter shim"),
    "emulator": ("emulator_sageattention", "IS_HARNESS_EMULATOR", "the harness emulator"),
}
SHIMS = Path(__file__).resolve().parent / "shims"
# Or thu-ml's package, or a pinned SageAttention `make sageattention` installs (first on the path).
SAGEATTENTION_FLAVOURS = ("package", *SAGEATTENTION_SHIMS, *PINNED_SAGEATTENTION)
SAGE_MODULE = "lightx2v.common.ops.attn.sage_attn"  # where LightX2V binds `sageattn` at import
AITER_OP = "aiter.ops.gfx1201.sage_attention:gfx1201_sage_attention"  # the gfx1201 op, module:function


def attention_registry() -> Any:
    """LightX2V's attention registry (importing it imports LightX2V)."""
    return importlib.import_module(LIGHTX2V_REGISTRY).ATTN_WEIGHT_REGISTER


def sageattention_flavour(module: Any) -> str:
    """A shim's flavour (by its flag), a pinned install's (by where it lives), else ``package``."""
    for flavour, (_, flag, _) in SAGEATTENTION_SHIMS.items():
        if getattr(module, flag, False):
            return flavour
    file = getattr(module, "__file__", None)
    if file:
        for choice, pkg in PINNED_SAGEATTENTION.items():
            if Path(file).resolve().is_relative_to(pkg.path().resolve()):
                return choice
    return "package"


def flavour_text(flavour: str) -> str:
    if flavour in SAGEATTENTION_SHIMS:
        return SAGEATTENTION_SHIMS[flavour][2]
    if flavour in PINNED_SAGEATTENTION:
        return PINNED_SAGEATTENTION[flavour].label
    return "the sageattention package"


def pinned_missing(flavour: str | None) -> str | None:
    """A pinned SageAttention that ``make sageattention`` has not installed here, in one line."""
    from harness.sage_packages import installed

    if flavour in PINNED_SAGEATTENTION and not installed(flavour):
        return (
            f"{flavour_text(flavour)} is not installed here (make sageattention, on a CUDA or ROCm machine)"
        )
    return None


def flavour_folder(flavour: str | None) -> Path | None:
    """The folder first on the ranks' path for ``flavour`` (None: the environment's package)."""
    if flavour in SAGEATTENTION_SHIMS:
        return SHIMS / SAGEATTENTION_SHIMS[flavour][0]
    if flavour in PINNED_SAGEATTENTION:
        return PINNED_SAGEATTENTION[flavour].path()
    return None


def bind_pinned_function() -> str | None:
    """With a pinned SageAttention, sage_attn2 calls the function that install runs (SageAttention2's
    Triton path on every GPU: its ``sageattn`` would dispatch to unbuilt CUDA kernels); its name."""
    module = sys.modules.get("sageattention")
    flavour = sageattention_flavour(module) if module is not None else "package"
    lightx2v = sys.modules.get(SAGE_MODULE)
    if flavour not in PINNED_SAGEATTENTION or lightx2v is None or getattr(lightx2v, "sageattn", None) is None:
        return None
    name = PINNED_SAGEATTENTION[flavour].function
    lightx2v.sageattn = getattr(module, name)
    return name


def sageattention_identity(flavour: str) -> dict[str, str]:
    """Version (and commit) of the ``sageattention`` a rank imported (empty for the harness's shims)."""
    if flavour in PINNED_SAGEATTENTION:
        from harness.sage_packages import read_marker

        marker = read_marker(PINNED_SAGEATTENTION[flavour]) or {}
        return {f"sageattention_{key}": str(marker[key]) for key in ("version", "commit") if marker.get(key)}
    if flavour != "package":
        return {}
    from importlib import metadata

    try:
        return {"sageattention_version": metadata.version("sageattention")}
    except metadata.PackageNotFoundError:
        return {}


def bound_sage_function() -> str | None:
    """The name of the function LightX2V's sage_attn2 calls in this process (None: none bound)."""
    return getattr(getattr(sys.modules.get(SAGE_MODULE), "sageattn", None), "__name__", None)


# thu-ml's variant knobs, which a shim (one op, one variant) accepts and ignores
SHIM_IGNORED = frozenset(
    {"quantization_backend", "qk_quant_gran", "pv_accum_dtype", "smooth_k", "smooth_v", "output_dtype"}
)


def sageattn_over(
    label: str, op_layout: str, refuse: Callable[..., None], run: Callable[..., Any], module: str, name: str
) -> Callable:
    """A shim's function ``name`` of ``module`` (as LightX2V binds it and a rank records it): thu-ml's
    ``sageattn`` calling ``run(q, k, v, sm_scale)`` in ``op_layout`` (HND or NHD) after
    ``refuse(q, is_causal, sm_scale, return_lse, attn_mask)``, which raises for what the op cannot do."""

    def sageattn(q, k, v, tensor_layout="HND", is_causal=False, sm_scale=None, return_lse=False, **kwargs):
        """thu-ml's ``sageattn`` signature; the output has the input layout and dtype."""
        attn_mask = kwargs.pop("attn_mask", None)
        if unknown := sorted(set(kwargs) - SHIM_IGNORED):
            raise TypeError(f"sageattention ({label}): unsupported argument(s) {', '.join(unknown)}")
        refuse(q, is_causal, sm_scale, return_lse, attn_mask)
        if tensor_layout == op_layout:
            return run(q, k, v, sm_scale)
        if tensor_layout in ("HND", "NHD"):  # the other one: [B, H, N, D] <-> [B, N, H, D]
            return run(*(t.transpose(1, 2) for t in (q, k, v)), sm_scale).transpose(1, 2).contiguous()
        raise ValueError(
            f"sageattention ({label}): tensor_layout must be 'HND' or 'NHD', got {tensor_layout!r}"
        )

    sageattn.__module__, sageattn.__name__, sageattn.__qualname__ = module, name, name
    return sageattn


class SyntheticCheckpointError(RuntimeError):
    """The scenario asked for synthetic relaxations the model folder does not allow."""


def register_cpu_platform() -> None:
    """Give LightX2V a ``cpu`` device (ranks meet over gloo), before ``import lightx2v`` initialises
    ``PLATFORM``'s (registered here, not by entry point: no installed harness needed)."""
    import torch.distributed as dist
    from lightx2v_platform.registry_factory import PLATFORM_DEVICE_REGISTER

    if CPU_PLATFORM in PLATFORM_DEVICE_REGISTER:
        return

    class HarnessCpuDevice:
        name = CPU_PLATFORM
        init_device_env = staticmethod(_complete_torch_cpu)
        is_available = staticmethod(lambda: True)
        get_device = staticmethod(lambda: CPU_PLATFORM)
        init_parallel_env = staticmethod(lambda: dist.init_process_group(backend="gloo"))

    PLATFORM_DEVICE_REGISTER.register(HarnessCpuDevice, key=CPU_PLATFORM)


def _complete_torch_cpu() -> None:
    """The CUDA-style calls LightX2V makes on ``torch.<device>`` that ``torch.cpu`` lacks (seeding,
    cache, memory counters at 0, free memory the machine's), never replacing one it has."""
    import torch

    def free_and_total(*_: Any) -> tuple[int, int]:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page

    extra = {
        "manual_seed": lambda seed: torch.manual_seed(seed),
        "manual_seed_all": lambda seed: torch.manual_seed(seed),
        "empty_cache": lambda: None,
        "mem_get_info": free_and_total,
        "memory_allocated": lambda *_: 0,
        "memory_reserved": lambda *_: 0,
        "max_memory_allocated": lambda *_: 0,
        "max_memory_reserved": lambda *_: 0,
        "reset_peak_memory_stats": lambda *_: None,
    }
    for name, fn in extra.items():
        if not hasattr(torch.cpu, name):
            setattr(torch.cpu, name, fn)


def prepare_platform() -> None:
    """Before ``import lightx2v``: register the CPU platform when ``PLATFORM=cpu``."""
    if os.environ.get("PLATFORM") == CPU_PLATFORM:
        register_cpu_platform()


def relax_synthetic_checks(model_path: str | os.PathLike, reference_short_edge: int | None = None) -> dict:
    """Let LightX2V load a synthetic checkpoint (marker required): the Qwen3-VL conditioner's released
    config and 50 layers (module globals) set from its ``text_encoder/config.json``; what changed."""
    if read_marker(model_path) is None:
        raise SyntheticCheckpointError(
            f"{model_path}: no synthetic-checkpoint marker; refusing to relax LightX2V's checks "
            "(real weights are loaded as LightX2V ships them)"
        )
    qwen = importlib.import_module(QWEN3VL_MODULE)
    raw = json.loads((Path(model_path) / "text_encoder" / "config.json").read_text())
    text = raw.get("text_config", raw)
    changed: dict[str, Any] = {}
    expected = qwen._EXPECTED_RELEASE_CONFIG
    for key in list(expected):
        if text.get(key) != expected[key]:
            changed[f"qwen3vl._EXPECTED_RELEASE_CONFIG.{key}"] = [expected[key], text.get(key)]
            expected[key] = text.get(key)
    layers = min(int(qwen.MINIMAX_H3_TEXT_ENCODER_LAYER), int(text["num_hidden_layers"]))
    settings = [
        (qwen, "qwen3vl", "MINIMAX_H3_TEXT_ENCODER_LAYER", layers),
        (qwen, "qwen3vl", "MINIMAX_H3_TEXT_HIDDEN_SIZE", int(text["hidden_size"])),
    ]
    if reference_short_edge is not None:
        packing = importlib.import_module(REF2AV_PACKING_MODULE)
        settings.append((packing, "packing_ref2av", "REFERENCE_IMAGE_SHORT_EDGE", reference_short_edge))
    for module, label, name, value in settings:
        if getattr(module, name) != value:
            changed[f"{label}.{name}"] = [getattr(module, name), value]
            setattr(module, name, value)
    return changed


EMULATED = "sage_emul_thuml"  # what the emulator shim serves sage_attn2 with (shims/emulator_sageattention)
# LightX2V types the harness also names, in every checkout: LightX2V's class serves them.
LIGHTX2V_CORE = frozenset(
    {"torch_sdpa", "sage_attn2", "aiter_attn", "flash_attn2", "flash_attn3", *SP_WRAPPERS}
)
_REGISTERED = re.compile(r"ATTN_WEIGHT_REGISTER\(\s*[\"']([^\"']+)[\"']")


@functools.cache
def lightx2v_types(root: str) -> frozenset[str]:
    """The attention types a LightX2V checkout's source registers (any platform's), and the core ones."""
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


def arm_served(spec: Any, params: Any) -> list[str]:
    """The types of an arm (its own, H3's refiner's, a schedule's exact one) that the launcher serves
    in LightX2V's registry: harness backends LightX2V lacks (a plugin's or the harness's own)."""
    plugins = set(common.plugin_backends(spec.plugins))
    own = lightx2v_types(params.root)
    arm = [spec.attn_type, params.attention.refiner_attn_type]
    if spec.schedule is not None:
        arm.append(spec.schedule.exact)
    lacking = [n for n in dict.fromkeys(arm) if n and n not in own]
    if all(n in plugins for n in lacking):  # the harness registry imports torch: only when asked
        return lacking
    from harness.attention.registry import BACKENDS

    return [n for n in lacking if n in plugins or n in BACKENDS]


def harness_backends(spec: Any, params: Any) -> list[str]:
    """The harness backends a LightX2V run calls: its arm's harness backends LightX2V lacks
    (``arm_served``), the sage_attn2 emulator where asked for, and shadows LightX2V lacks that are
    harness backends."""
    own = lightx2v_types(params.root)
    names = arm_served(spec, params)
    if params.sageattention == "emulator" or "emulator" in params.shadow_sageattention.values():
        names.append(EMULATED)
    others = [s.attn_type for s in spec.shadows if s.attn_type not in own]
    if others:  # the harness registry imports torch: only for shadows LightX2V does not serve
        from harness.attention.registry import BACKENDS

        names += [n for n in others if n in BACKENDS]
    return list(dict.fromkeys(names))


def options_problem(attn_type: str, options: dict[str, Any], own: frozenset[str]) -> str | None:
    """Why an arm's ``attn_options`` cannot reach its backend on the LightX2V launcher (one line naming
    the field), or None: options go to a harness backend LightX2V lacks, which the launcher serves
    (``serve_backends``), checked by the backend's own ``option_problem``."""
    if not options:
        return None
    if attn_type in own:
        return (
            f"attn_options: LightX2V's own {attn_type} class serves this arm and takes no options "
            "(options go to a harness backend LightX2V lacks, e.g. planted_error, which the launcher serves)"
        )
    from harness.attention.registry import BACKENDS, check_options

    if attn_type not in BACKENDS:
        return f"attn_options: {attn_type} is no harness backend, and only a harness backend takes options"
    if why := check_options(attn_type, options):
        return f"attn_options: {why}"
    return None


def weight_class(
    name: str, options: dict[str, Any] | None = None, sites: Callable[[], Any] | None = None
) -> type:
    """A LightX2V attention weight class (on LightX2V's template) calling harness backend ``name``
    with ``options``; each instance's backend bound to the call sites ``sites()`` gives (None: none)."""
    from harness.attention.registry import BACKENDS, get_backend

    try:
        from lightx2v.common.ops.attn.template import AttnWeightTemplate as base
    except ImportError:  # a LightX2V without the template: LightX2V only calls apply()
        base = object

    class HarnessAttnWeight(base):  # type: ignore[misc, valid-type]
        harness_backend = name
        harness_exact = bool(BACKENDS.get(name).exact)
        harness_options = dict(options or {})

        def __init__(self):  # LightX2V builds attention as REGISTER[name]()
            self.weight_name = name
            self.config = {}
            self.backend = get_backend(name, **self.harness_options)
            tracker = sites() if sites is not None else None
            if tracker is not None:
                self.backend.bind_sites(tracker)

        def apply(self, q, k, v, drop_rate=0, attn_mask=None, causal=False, cu_seqlens_q=None, cu_seqlens_kv=None,
                  max_seqlen_q=None, max_seqlen_kv=None, **kwargs):  # fmt: skip
            return self.backend.apply(
                q, k, v, cu_seqlens_q, cu_seqlens_kv, max_seqlen_q, max_seqlen_kv,
                causal=causal, attn_mask=attn_mask, drop_rate=drop_rate, **kwargs,
            )  # fmt: skip

    HarnessAttnWeight.__name__ = HarnessAttnWeight.__qualname__ = f"HarnessAttnWeight[{name}]"
    return HarnessAttnWeight


def serve_backends(
    registry: Any,
    names: list[str],
    options: dict[str, dict[str, Any]] | None = None,
    sites: Callable[[], Any] | None = None,
) -> tuple[list[str], list[str]]:
    """Register each backend of ``names`` ``registry`` lacks (with its ``options`` by name, bound to the
    call sites ``sites()`` gives): (registered, left to LightX2V's own class)."""
    served, lightx2v_own = [], []
    for name in names:
        if name in registry:
            harness_backend = getattr(registry[name], "harness_backend", None)  # None: LightX2V's own class
            (served if harness_backend == name else lightx2v_own).append(name)
            continue
        registry[name] = weight_class(name, (options or {}).get(name), sites)
        served.append(name)
    return served, lightx2v_own


def shadowed_by_lightx2v(attn_types: list[str], lightx2v_own: list[str]) -> str | None:
    """Why an arm whose type both a plugin and LightX2V register cannot run (LightX2V's would serve it)."""
    for name in attn_types:
        if name in lightx2v_own:
            return (
                f"attn_type {name!r}: a plugin registers a harness backend of that name, but LightX2V has "
                "its own class of that name, which would serve it (rename the plugin's backend)"
            )
    return None
