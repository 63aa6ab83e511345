"""Named attention backends, registered by decorator in ``BACKENDS``, and the calling convention they
share (``scale``: the softmax scale, ``D ** -0.5`` when None). A backend refuses a call it cannot serve
with :class:`UnsupportedCall` (a fallback may take it); one that cannot run on this machine at all
raises :class:`~harness.errors.BackendUnavailable` from :func:`get_backend`.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

import torch

from harness.emulator_provenance import Provenance
from harness.errors import BackendUnavailable, HarnessError
from harness.registry import Registry

# (q, k, v, scale) -> out, all [B, H, N, D]: an op called without the backend around it.
DirectCall = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]


class UnsupportedCall(HarnessError):
    """The backend refuses this particular call (shape, dtype, options); another may serve it."""


class AttentionOp:
    """Anything that follows the calling convention; wrappers and backends share this base."""

    name: str = ""
    exact: bool = False
    params: dict[str, Any]

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None
    ) -> torch.Tensor:
        raise NotImplementedError

    def apply(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cu_seqlens_q: torch.Tensor | None = None,
        cu_seqlens_kv: torch.Tensor | None = None,
        max_seqlen_q: int | None = None,
        max_seqlen_kv: int | None = None,
        *,
        softmax_scale: float | None = None,
        causal: bool = False,
        attn_mask: torch.Tensor | None = None,
        drop_rate: float = 0.0,
        **_ignored: Any,
    ) -> torch.Tensor:
        """LightX2V-style packed call: q/k/v ``[N, H, D]`` or ``[B, N, H, D]``, out ``[B*N, H*D]``; only the
        dense non-causal single-sequence case is served, extra keywords (scheduler, ...) are ignored."""
        if causal:
            raise UnsupportedCall(f"{self.name}: causal attention is not supported (non-causal only)")
        if attn_mask is not None:
            raise UnsupportedCall(f"{self.name}: attention masks are not supported")
        if drop_rate:
            raise UnsupportedCall(f"{self.name}: dropout (drop_rate={drop_rate}) is not supported")
        if q.ndim not in (3, 4) or k.ndim != q.ndim or v.ndim != q.ndim:
            raise UnsupportedCall(
                f"{self.name}: expected q/k/v as [N, H, D] or [B, N, H, D], got "
                f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
            )
        if q.ndim == 3:
            q, k, v = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)
        batch, n_q, heads, dim = q.shape
        n_k = k.shape[1]
        _check_single_sequence(self.name, "cu_seqlens_q", cu_seqlens_q, batch, n_q)
        _check_single_sequence(self.name, "cu_seqlens_kv", cu_seqlens_kv, batch, n_k)
        for label, given, actual in (
            ("max_seqlen_q", max_seqlen_q, n_q),
            ("max_seqlen_kv", max_seqlen_kv, n_k),
        ):
            if given is not None and int(given) != actual:
                raise UnsupportedCall(f"{self.name}: {label}={given} but the sequence has {actual} tokens")
        out = self(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale)
        return out.transpose(1, 2).reshape(batch * n_q, heads * dim)


class WrappedOp(AttentionOp):
    """An op around another one (``inner``), reported under its name and exactness, with its params."""

    def __init__(self, inner: AttentionOp):
        self.inner = inner
        self.name = inner.name
        self.exact = inner.exact

    @property
    def params(self) -> dict[str, Any]:  # type: ignore[override]
        return self.inner.params

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


def _check_single_sequence(name: str, label: str, cu: torch.Tensor | None, batch: int, n: int) -> None:
    """Accept cu_seqlens only when it describes one full sequence per batch element."""
    if cu is None:
        return
    expected = [i * n for i in range(batch + 1)]
    got = [int(x) for x in cu.detach().reshape(-1).cpu().tolist()]
    if got != expected:
        raise UnsupportedCall(
            f"{name}: cu_seqlens {label}={got} describes several sequences; only one packed "
            f"sequence per batch element ({expected}) is supported"
        )


class AttentionBackend(AttentionOp):
    """Base class of registered backends: ``default_options`` (every accepted option with its default),
    ``__call__``, and where needed ``availability`` (no GPU work), ``setup`` and ``direct_call``."""

    name: ClassVar[str] = ""
    exact: ClassVar[bool] = False
    description: ClassVar[str] = ""
    emulated: ClassVar[bool] = False  # a numerics model, not a kernel (its speed means nothing)
    models: ClassVar[str] = ""  # an emulator's: the backend whose kernel it reproduces
    default_options: ClassVar[dict[str, Any]] = {}

    def __init__(self, **options: Any):
        if unknown := _unknown_options(type(self), options):
            raise HarnessError(
                f"attention backend {self.name!r}: unknown option(s) {unknown[0]}; accepted: {unknown[1]}"
            )
        self.options: dict[str, Any] = {**self.default_options, **options}
        self.setup()

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        return True, "available"

    def setup(self) -> None:
        """Validate options and resolve the underlying op; raise BackendUnavailable if it cannot run."""

    def bind_sites(self, sites: Any) -> None:
        """Keep the run's call-site tracker (``CallSites``), for a backend that acts by call site."""

    @classmethod
    def option_problem(cls, options: dict[str, Any]) -> str | None:
        """Why these option values cannot work, told before any run (None: only ``setup`` can tell)."""
        return None

    @property
    def provenance(self) -> Provenance | None:
        """An emulator's: the kernel it models and whether it was measured against it."""
        return None

    @property
    def params(self) -> dict[str, Any]:  # type: ignore[override]
        """Numerics parameters recorded in run metadata."""
        return {"backend": self.name, "exact": self.exact, **({"models": self.models} if self.models else {}),
                **self.options}  # fmt: skip

    def direct_call(self) -> DirectCall | None:
        """The underlying op called straight through its layout adapter only (no checks, no refusals),
        which ``registry_vs_direct`` compares the backend with; None: no op apart from the backend."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, options={self.options!r})"


BACKENDS: Registry[type[AttentionBackend]] = Registry("attention backend", base=AttentionBackend)


def register_backend(
    name: str, *, exact: bool, description: str
) -> Callable[[type[AttentionBackend]], type[AttentionBackend]]:
    """Class decorator: register ``cls`` under ``name`` (a name is registered once)."""

    def decorate(cls: type[AttentionBackend]) -> type[AttentionBackend]:
        if not (isinstance(cls, type) and issubclass(cls, AttentionBackend)):
            raise TypeError(f"register_backend({name!r}) must decorate an AttentionBackend subclass")
        BACKENDS.register(name, cls)
        cls.name = name
        cls.exact = exact
        cls.description = description
        return cls

    return decorate


def source_digests(names: Iterable[str], sources: str = "") -> dict[str, str]:
    """sha256 of each named backend's code (``unknown``: in no file): an edited kernel is a new spec. A
    plugin's backend: its file, every module loaded from the plugin's folder (extensions too) and the
    scenario's ``sources:`` digest; the harness's own: its file (the harness version covers the rest)."""
    digests = {}
    for name in sorted(set(names)):
        cls = BACKENDS.get(name)
        try:
            file = inspect.getsourcefile(cls)
        except TypeError:  # defined in no file (built at run time)
            file = None
        top = cls.__module__.partition(".")[0]
        if not file or top == "harness":
            digests[name] = hashlib.sha256(Path(file).read_bytes()).hexdigest() if file else "unknown"
            continue
        # Its folder: a file plugin's, or its top package's (a lone module: its file alone).
        package = sys.modules.get(top)
        lone = not hasattr(package, "__path__") and not top.startswith("harness_plugin_")
        root = Path(getattr(package, "__file__", None) or file).resolve().parent
        found = {Path(file).resolve()}
        for mname, module in [] if lone else list(sys.modules.items()):
            if mname.partition(".")[0] == "harness":  # the harness version covers it
                continue
            mfile = getattr(module, "__file__", None)
            path = Path(mfile).resolve() if mfile else None
            if path and path.is_relative_to(root) and not _installed(path.relative_to(root)):
                found.add(path)
        if found == {Path(file).resolve()} and not sources:  # its file alone: its sha256, as before
            digests[name] = hashlib.sha256(Path(file).read_bytes()).hexdigest()
            continue
        h = hashlib.sha256(sources.encode())
        for path in sorted(found):
            if path.is_file():  # relative names: no machine path in what is hashed
                h.update(f"{path.relative_to(root).as_posix()}\0".encode() + path.read_bytes())
        digests[name] = h.hexdigest()
    return digests


def _installed(rel: Path) -> bool:
    """A path under a dot folder (``.venv``) or site-packages: installed code, not the plugin's."""
    return any(p.startswith(".") or p in ("site-packages", "dist-packages") for p in rel.parts[:-1])


def check_options(name: str, options: dict[str, Any]) -> str | None:
    """Why ``options`` are not options of backend ``name`` (unknown keys, refused values), or None."""
    cls = BACKENDS.get(name)
    if unknown := _unknown_options(cls, options):
        return f"unknown option(s) {unknown[0]} for backend {name!r}; accepted: {unknown[1]}"
    return cls.option_problem(options)


def _unknown_options(cls: type[AttentionBackend], options: dict[str, Any]) -> tuple[str, str] | None:
    """(the options ``cls`` does not know, those it accepts), as listed in an error; None: all known."""
    unknown = sorted(set(options) - set(cls.default_options))
    return (", ".join(unknown), ", ".join(sorted(cls.default_options)) or "none") if unknown else None


def get_backend(name: str, **options: Any) -> AttentionBackend:
    cls = BACKENDS.get(name)
    ok, reason = cls.availability()
    if not ok:
        raise BackendUnavailable(f"attention backend {name!r} is unavailable here: {reason}")
    return cls(**options)


def check_qkv(name: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Shapes of the calling convention: [B, H, Nq, D], [B, H, Nk, D], [B, H, Nk, D]."""
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise HarnessError(
            f"{name}: q, k, v must be [B, H, N, D]; got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if k.shape != v.shape or q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise HarnessError(
            f"{name}: incompatible shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} "
            "(need equal B, H, D and k.shape == v.shape)"
        )
    if q.dtype != k.dtype or q.dtype != v.dtype:
        raise HarnessError(f"{name}: q, k, v dtypes differ ({q.dtype}, {k.dtype}, {v.dtype})")


def check_gpu_call(
    name: str, *qkv: torch.Tensor, needs: str = "the op needs the GPU", dtypes: str = "bf16 or fp16"
) -> None:
    """``check_qkv``, then a GPU kernel's refusal of tensors off the GPU or not bf16/fp16, in its words."""
    check_qkv(name, *qkv)
    if qkv[0].device.type != "cuda":
        raise UnsupportedCall(f"{name}: tensors on {qkv[0].device}; {needs}")
    if qkv[0].dtype not in (torch.bfloat16, torch.float16):
        raise UnsupportedCall(f"{name}: dtype {qkv[0].dtype} ({dtypes} only)")


def default_scale(q: torch.Tensor, scale: float | None) -> float:
    return float(q.shape[-1]) ** -0.5 if scale is None else float(scale)
