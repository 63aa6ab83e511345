"""Inside a rank: the in-situ shadows of a LightX2V arm (``--insitu JSON``), a ``ShadowedAttention``
around every in-scope call whose primary is the served call itself; a shadow of a type LightX2V
registers is LightX2V's own class, any other the harness backend of that name. A shadow that
cannot run here is noted and left out.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.runners.lightx2v.rank_env import (
    PINNED_SAGEATTENTION,
    SAGE_MODULE,
    SAGEATTENTION_SHIMS,
    SHIMS,
    flavour_text,
)

# LightX2V attention types that compute exact attention (the others quantise or sparsify).
EXACT_TYPES = frozenset({"torch_sdpa", "flash_attn2", "flash_attn3", "flash_attn4", "aiter_attn"})


def to_heads_first(t: Any) -> Any:
    """LightX2V's ``[N, H, D]`` (or ``[B, N, H, D]``) as a ``[B, H, N, D]`` view."""
    return (t.unsqueeze(0) if t.ndim == 3 else t).transpose(1, 2)


def output_heads_first(out: Any, heads: int, head_dim: int) -> Any:
    """A LightX2V output ``[B*N, H*D]`` as a ``[B, H, N, D]`` view (batch 1)."""
    return out.reshape(1, -1, heads, head_dim).transpose(1, 2)


def load_shim(flavour: str) -> Any:
    """One of the harness's ``sageattention`` shims, under a private name (``sageattention`` untouched)."""
    folder = SAGEATTENTION_SHIMS[flavour][0]
    name = f"harness_shim_{folder}"
    if name in sys.modules:
        return sys.modules[name]
    from harness.scenario.plugins import exec_file_module

    return exec_file_module(name, SHIMS / folder / "sageattention" / "__init__.py")


def make_ops(insitu_context: dict[str, Any]) -> tuple[type, type]:
    """The two op classes (built on first use: AttentionOp imports torch); ``insitu_context["kwargs"]``:
    the current call's arguments besides q, k, v."""
    from harness.attention.registry import AttentionOp, UnsupportedCall, default_scale

    class PrimaryCall(AttentionOp):
        """The call the model makes: ``pending()`` serves it; the output is kept for the model."""

        def __init__(self, name: str, exact: bool, kv_reversed: bool):
            self.name, self.exact = name, exact
            self.params = {"backend": name, "exact": exact, "kv_reversed": kv_reversed, "lightx2v": True}
            self.pending: Any = None
            self.out: Any = None

        def __call__(self, q, k, v, scale=None):
            self.out = self.pending()
            return output_heads_first(self.out, q.shape[1], q.shape[3])

    class LightX2VOp(AttentionOp):
        """A LightX2V attention class as an op on ``[B, H, N, D]``, with the call's own arguments."""

        def __init__(self, name: str, backend: Any, kv_reversed: bool, sageattn: Any = None, **params: Any):
            self.name, self.backend, self.kv_reversed, self.sageattn = name, backend, kv_reversed, sageattn
            self.exact = name in EXACT_TYPES
            self.params = {"backend": name, "exact": self.exact, "kv_reversed": kv_reversed, **params}

        def __call__(self, q, k, v, scale=None):
            if scale is not None and abs(scale - default_scale(q, None)) > 1e-12 * abs(scale):
                raise UnsupportedCall(f"{self.name}: LightX2V's class takes the default softmax scale")
            # [N, H, D], contiguous as the model hands it over (some kernels need that)
            q3, k3, v3 = (t.transpose(1, 2)[0].contiguous() for t in (q, k, v))
            if self.kv_reversed:
                k3, v3 = k3.flip(0), v3.flip(0)
            kwargs = dict(insitu_context.get("kwargs") or {})
            try:
                with self._bound():
                    out = self.backend.apply(q=q3, k=k3, v=v3, **kwargs)
            except (UnsupportedCall, RuntimeError, ValueError):
                raise
            except Exception as err:  # a missing kernel raises TypeError & co: a failure, measured as one
                raise RuntimeError(f"{type(err).__name__}: {err}") from err
            return output_heads_first(out, q.shape[1], q.shape[3]).to(q.dtype)

        @contextlib.contextmanager
        def _bound(self) -> Iterator[None]:
            """LightX2V's ``sageattn`` bound to the shadow's for the call (its own without one)."""
            if self.sageattn is None:
                yield
                return
            module = sys.modules[SAGE_MODULE]
            saved, module.sageattn = module.sageattn, self.sageattn
            try:
                yield
            finally:
                module.sageattn = saved

    return PrimaryCall, LightX2VOp


def lightx2v_shadow(spec: dict[str, Any], raw: Any, op_class: type) -> Any:
    """A shadow of a LightX2V attention type, or a reason it cannot run here (a str)."""
    from harness.records import AttentionChoice

    choice = AttentionChoice.of(spec)
    name = choice.attn_type
    if refused := choice.harness_only(f"LightX2V's {name}"):
        return refused[1]
    flavour = spec.get("sageattention") or "package"
    fn = None
    if name == "sage_attn2":
        if flavour != "package":
            try:
                if flavour in PINNED_SAGEATTENTION:  # the function the ranks bind, under a private name
                    from harness.sage_packages import load

                    fn = getattr(load(flavour), PINNED_SAGEATTENTION[flavour].function)
                else:
                    fn = load_shim(flavour).sageattn
            except Exception as err:
                return f"{flavour_text(flavour)} does not import ({type(err).__name__}: {err})"
        elif getattr(sys.modules.get(SAGE_MODULE), "sageattn", None) is None:
            return "LightX2V's sage_attn2 bound no sageattn (the package is not installed here)"
    try:
        backend = raw()
    except Exception as err:
        return f"LightX2V's {name} does not construct ({type(err).__name__}: {err})"
    if fn is None:  # LightX2V's own kernel: one small call first (a kernel not installed fails it)
        from harness.runners.lightx2v.probe import smoke_call

        try:
            from lightx2v_platform.base.global_var import AI_DEVICE

            device = str(AI_DEVICE)
        except Exception:  # outside a LightX2V process (tests): where torch computes
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        cosine, why = smoke_call(lambda: backend, device)
        if cosine is None:  # an inaccurate answer is no reason: the shadow measures it
            return f"LightX2V's {name}: {why}"
    return op_class(
        name, backend, choice.kv_reversed, sageattn=fn, lightx2v_class=type(backend).__qualname__,
        **({"sageattention": flavour} if name == "sage_attn2" else {}),
    )  # fmt: skip


def build_shadowed(payload: dict[str, Any], raw_of: Any, folder: Path, rank: str, sites: Any, served: dict):
    """(shadowed attention, its primary, the shared call context) for a rank; ``raw_of(name)``:
    LightX2V's uninstrumented class (None: not registered); ``served``: the arm's {name, kv_reversed}."""
    from harness.attention.insitu.recorder import InSituRecorder
    from harness.attention.insitu.shadow import ShadowedAttention
    from harness.attention.wrappers import make_attention
    from harness.records import AttentionChoice, InSituSettings

    context: dict[str, Any] = {"kwargs": {}}
    primary_class, op_class = make_ops(context)
    settings = InSituSettings.model_validate(payload.get("settings") or {})
    recorder = InSituRecorder(folder, settings, rank=rank, sites=sites)
    ops: dict[str, Any] = {}
    notes = []
    for spec in payload.get("shadows", []):
        name, attn_type = spec["name"], spec["attn_type"]
        raw = raw_of(attn_type)
        if raw is not None and getattr(raw, "harness_backend", None) is None:  # LightX2V's own class
            op = lightx2v_shadow(spec, raw, op_class)
        else:
            try:
                op = make_attention(AttentionChoice.of(spec), sites=sites)  # a site-bound one reads them
            except Exception as err:  # unavailable here: BackendUnavailable, HarnessError
                op = f"not a LightX2V attention type, and the harness backend fails ({err})"
        if isinstance(op, str):
            notes.append(f"shadow {name} ({attn_type}) left out on rank {rank}: {op}")
        else:
            ops[name] = op
    own = raw_of(served["name"])
    exact = served["name"] in EXACT_TYPES or bool(getattr(own, "harness_exact", False))
    primary = primary_class(served["name"], exact, bool(served.get("kv_reversed")))
    shadowed = ShadowedAttention(primary, ops, recorder=recorder, primary_name=payload["primary"])
    for note in notes:
        recorder.note(note)
    return shadowed, primary, context
