"""A `sageattention` package served by ``sage_emul_thuml`` (``sageattention: emulator``): the real LightX2V
on any device, CPU included (timings are no kernel's). Non-causal, unmasked, no LSE; variant knobs ignored.
"""

from __future__ import annotations

import functools
from typing import Any

from harness.runners.lightx2v.rank_env import EMULATED, sageattn_over

__version__ = "0.0.0+harness.sage_emul_thuml"
IS_HARNESS_EMULATOR = True  # lets the harness tell this package from thu-ml's


@functools.cache
def _emulation():
    from harness.attention.registry import get_backend

    return get_backend(EMULATED)


def provenance() -> dict:
    """What the emulation models and whether it was measured."""
    return _emulation().params["provenance"]


def _refuse(q, is_causal: bool, sm_scale: float | None, return_lse: bool, attn_mask: Any) -> None:
    if is_causal or attn_mask is not None or return_lse:
        raise NotImplementedError("sageattention (harness emulator): non-causal, unmasked, no LSE only")


def _run(q, k, v, scale):  # [B, H, N, D]: the emulation's own layout
    return _emulation()(q, k, v, scale)


sageattn = sageattn_over("harness emulator", "HND", _refuse, _run, __name__, "sageattn")
# the entry LightX2V picks on devices reporting capability (8, 9) or (12, 0); same emulation
sageattn_qk_int8_pv_fp16_triton = sageattn

__all__ = ["sageattn", "sageattn_qk_int8_pv_fp16_triton", "IS_HARNESS_EMULATOR", "__version__"]
