"""What the harness sets up inside a LightX2V process before LightX2V runs (ranks, probe, checkpoint writer).

* a ``cpu`` platform, so ``PLATFORM=cpu`` runs LightX2V with no GPU (it ships none);
* for a synthetic checkpoint only (``checkpoint.SYNTHETIC_MARKER`` present): the text-encoder
  checks that insist on the released Qwen3-VL sizes, and optionally the reference-image short
  edge, are set to the checkpoint's values. Never applied to real weights.

It also names what both sides need to know of LightX2V (its sequence-parallel wrappers).
Standard library at import time; torch and LightX2V are imported by the functions.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from harness.runners import common
from harness.sage_packages import PACKAGES as PINNED_SAGEATTENTION

CPU_PLATFORM = "cpu"
# Written last by checkpoint.py into a synthetic checkpoint: the only folders relaxed checks apply to.
SYNTHETIC_MARKER = "harness_synthetic_checkpoint.json"
MARKER_SCHEMA = "harness.synthetic_checkpoint/1"
LIGHTX2V_REGISTRY = "lightx2v.utils.registry_factory"  # its ATTN_WEIGHT_REGISTER: name -> attention class
QWEN3VL_MODULE = "lightx2v.models.input_encoders.hf.minimax_h3.qwen3vl"
REF2AV_PACKING_MODULE = "lightx2v.models.networks.minimax_h3.packing_ref2av"
# LightX2V's sequence-parallel attention types: they wrap the real backend, so their calls are
# neither the backend under test nor a fallback.
SP_WRAPPERS = ("ulysses", "ulysses-4090", "ring")
# Which `sageattention` serves LightX2V's sage_attn2: thu-ml's package, or one of the harness's
# shims (folder under shims/, the flag the package carries, what a reason calls it).
SAGEATTENTION_SHIMS = {
    "aiter_shim": ("aiter_sageattention", "IS_AITER_SHIM", "the aiter shim"),
    "emulator": ("emulator_sageattention", "IS_HARNESS_EMULATOR", "the harness emulator"),
}
SHIMS = Path(__file__).resolve().parent / "shims"
# Or one of the pinned thu-ml SageAttentions `make sageattention` installs (harness.sage_packages):
# its folder goes first on the ranks' path.
SAGEATTENTION_FLAVOURS = ("package", *SAGEATTENTION_SHIMS, *PINNED_SAGEATTENTION)
SAGE_MODULE = "lightx2v.common.ops.attn.sage_attn"  # where LightX2V binds `sageattn` at import


def attention_registry() -> Any:
    """LightX2V's attention registry (importing it imports LightX2V)."""
    import importlib

    return importlib.import_module(LIGHTX2V_REGISTRY).ATTN_WEIGHT_REGISTER


def sageattention_flavour(module: Any) -> str:
    """``package`` for thu-ml's sageattention as the environment has it, a pinned install's choice
    (by where the module lives), else the shim's flavour (by the flag it carries)."""
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
    """The folder the ranks' path starts with for ``flavour`` (None: the environment's package)."""
    if flavour in SAGEATTENTION_SHIMS:
        return SHIMS / SAGEATTENTION_SHIMS[flavour][0]
    if flavour in PINNED_SAGEATTENTION:
        return PINNED_SAGEATTENTION[flavour].path()
    return None


def bind_pinned_function() -> str | None:
    """With a pinned SageAttention, LightX2V's sage_attn2 calls the function that install runs:
    SageAttention2's is its Triton path only, so ``sageattn_qk_int8_pv_fp16_triton`` on every GPU
    (what LightX2V binds on capability (8, 9) and (12, 0), gfx1201 included; its ``sageattn``
    would dispatch to CUDA kernels that were not built). Returns the function's name, or None."""
    module = sys.modules.get("sageattention")
    flavour = sageattention_flavour(module) if module is not None else "package"
    lightx2v = sys.modules.get(SAGE_MODULE)
    if flavour not in PINNED_SAGEATTENTION or lightx2v is None or getattr(lightx2v, "sageattn", None) is None:
        return None
    name = PINNED_SAGEATTENTION[flavour].function
    lightx2v.sageattn = getattr(module, name)
    return name


def sageattention_identity(flavour: str) -> dict[str, str]:
    """Version (and commit) of the ``sageattention`` a rank imported: a pinned install's marker, else
    the installed distribution's metadata (empty for the harness's shims)."""
    if flavour in PINNED_SAGEATTENTION:
        from harness.sage_packages import read_marker

        marker = read_marker(PINNED_SAGEATTENTION[flavour]) or {}
        found = {"sageattention_version": marker.get("version"), "sageattention_commit": marker.get("commit")}
        return {k: str(v) for k, v in found.items() if v}
    if flavour != "package":
        return {}
    from importlib import metadata

    try:
        return {"sageattention_version": metadata.version("sageattention")}
    except metadata.PackageNotFoundError:
        return {}


def bound_sage_function() -> str | None:
    """The name of the function LightX2V's sage_attn2 calls in this process (None: none bound)."""
    fn = getattr(sys.modules.get(SAGE_MODULE), "sageattn", None)
    return getattr(fn, "__name__", None) if fn is not None else None


def read_marker(model_path: str | os.PathLike) -> dict[str, Any] | None:
    """The synthetic marker of a model folder, or None for anything else (real weights included)."""
    return common.read_marker(model_path, SYNTHETIC_MARKER, MARKER_SCHEMA)


class SyntheticCheckpointError(RuntimeError):
    """The scenario asked for synthetic relaxations the model folder does not allow."""


def register_cpu_platform() -> None:
    """Give LightX2V a ``cpu`` device, so ``PLATFORM=cpu`` runs without a GPU.

    Must run before ``import lightx2v``, which initialises the platform named by ``PLATFORM``.
    Ranks meet over gloo. (LightX2V could also take this through its ``lightx2v.platform_plugins``
    entry point; registering here needs no installed harness in the ranks' interpreter.)
    """
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
    """Add the CUDA-style calls LightX2V makes on ``torch.<device>`` that ``torch.cpu`` lacks.

    LightX2V calls ``getattr(torch, AI_DEVICE).manual_seed(...)``, ``.empty_cache()`` and memory
    queries. On the CPU: seeding is the default generator's, there is no cache to empty, and the
    device-memory counters read 0 (free memory: the machine's available memory). Existing
    attributes are never replaced.
    """
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
    """Let LightX2V load a synthetic checkpoint: text-encoder sizes from its config, not the release's.

    LightX2V's Qwen3-VL conditioner refuses any config but the released one and loads exactly
    50 layers; both are module globals read at run time. They are set from the checkpoint's
    ``text_encoder/config.json``, and only when the folder carries the synthetic marker, so real
    weights are never loaded under relaxed checks. Returns what was changed (for the run record).
    """
    if read_marker(model_path) is None:
        raise SyntheticCheckpointError(
            f"{model_path}: no synthetic-checkpoint marker; refusing to relax LightX2V's checks "
            "(real weights are loaded as LightX2V ships them)"
        )
    import importlib

    qwen = importlib.import_module(QWEN3VL_MODULE)
    config_path = Path(model_path) / "text_encoder" / "config.json"
    raw = json.loads(config_path.read_text())
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
