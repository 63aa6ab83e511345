"""Runs inside every torchrun rank: instrument LightX2V's attention registry, then run LightX2V.

    python -m harness.runners.lightx2v.launch --run-dir DIR --attn-type NAME [--kv-reversed]
        [--scope MODULE_PREFIX]... [--wrapper NAME]... [--count-op LABEL=module:function]...
        [--synthetic-checkpoint MODEL_PATH [--reference-short-edge PX]] [--bare]
        -- <lightx2v.infer arguments>

It depends on LightX2V through two things only: ``lightx2v.utils.registry_factory.
ATTN_WEIGHT_REGISTER`` (a mapping name -> backend class, used as ``REGISTER[name]()``, whose
backends expose ``apply(q, k, v, ...)``) and the ``lightx2v.infer`` entry point, which is run
as ``__main__`` with the remaining arguments.

What it adds, per rank (RANK from torchrun, 0 otherwise):
* every backend class handed out by the registry is a counting subclass: calls are counted by
  backend name and by the module that built the instance. Instances built under a ``--scope``
  prefix are the model under test; a call there of a backend other than the requested one is a
  fallback. Instances built elsewhere (text encoder, VAE) are counted apart.
* with ``--kv-reversed``, in-scope calls of the requested backend get K and V reversed along
  the sequence (exact attention is invariant to that order; only summation order changes).
* DIR/rank<N>.log: the rank's stdout and stderr (also passed through), so that lines LightX2V
  prints without a rank (step markers, packed layout) can be attributed.
* DIR/attn_calls.rank<N>.json at exit, on an exception and on SIGTERM.

Before LightX2V is imported: ``PLATFORM=cpu`` gets a CPU platform, and ``--synthetic-checkpoint``
relaxes the released-size checks for a synthetic checkpoint (``rank_env``). ``--bare`` runs
LightX2V with those alone, no instrumentation: the baseline of the overhead benchmark.

Standard library only at import time: torch is imported when a reversal needs it.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import inspect
import json
import os
import runpy
import signal
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from harness.runners.lightx2v.rank_env import prepare_platform, relax_synthetic_checks

RANK_SCHEMA = "harness.attn_calls.rank/1"
LIGHTX2V_REGISTRY = "lightx2v.utils.registry_factory"
LIGHTX2V_ENTRY = "lightx2v.infer"
_SELF_FILE = __file__


def rank_label() -> str:
    return os.environ.get("RANK", "0")


def rank_calls_path(run_dir: Path, rank: str) -> Path:
    return Path(run_dir) / f"attn_calls.rank{rank}.json"


def rank_log_path(run_dir: Path, rank: str) -> Path:
    return Path(run_dir) / f"rank{rank}.log"


# --- counting ----------------------------------------------------------------------------------


class CallBook:
    """What one rank saw: calls per backend, split by scope, and why anything went wrong."""

    def __init__(self, rank: str, requested: str, kv_reversed: bool, scopes: list[str], wrappers: list[str]):
        self.rank = rank
        self.requested = requested
        self.kv_reversed = kv_reversed
        self.scopes = list(scopes)
        self.wrappers = set(wrappers)
        self.calls: Counter[str] = Counter()
        self.fallbacks: Counter[str] = Counter()
        self.outside_scope: Counter[str] = Counter()
        self.sites: Counter[str] = Counter()
        self.instances: Counter[str] = Counter()
        self.op_calls: Counter[str] = Counter()
        self.kv_reversed_calls = 0
        self.errors: list[str] = []
        self.relaxed: dict[str, Any] = {}  # LightX2V checks relaxed for a synthetic checkpoint
        self.finished = False
        self._lock = threading.Lock()

    def in_scope(self, site: str | None) -> bool:
        if not self.scopes or site is None:
            return True
        return any(site == p or site.startswith(p + ".") for p in self.scopes)

    def instance(self, name: str, site: str | None) -> None:
        with self._lock:
            self.instances[f"{name} <- {site or '?'}"] += 1

    def call(self, name: str, site: str | None) -> None:
        with self._lock:
            self.sites[f"{name} <- {site or '?'}"] += 1
            if not self.in_scope(site):
                self.outside_scope[name] += 1
                return
            self.calls[name] += 1
            if name != self.requested and name not in self.wrappers:
                self.fallbacks[name] += 1

    def error(self, text: str) -> None:
        line = " ".join(str(text).split())[:500]
        with self._lock:
            if line not in self.errors:
                self.errors.append(line)

    def to_json(self) -> dict[str, Any]:
        modules = {}
        mod = sys.modules.get("sageattention")
        if mod is not None:  # which `sageattention` served sage_attn2: the package or the shim
            modules["sageattention"] = str(getattr(mod, "__file__", None))
            modules["sageattention_is_aiter_shim"] = bool(getattr(mod, "IS_AITER_SHIM", False))
        return {
            "schema": RANK_SCHEMA,
            "rank": self.rank,
            "requested": self.requested,
            "kv_reversed": self.kv_reversed,
            "scope": self.scopes,
            "calls": dict(self.calls),
            "fallbacks": dict(self.fallbacks),
            "outside_scope": dict(self.outside_scope),
            "sites": dict(self.sites),
            "instances": dict(self.instances),
            "kv_reversed_calls": self.kv_reversed_calls,
            "op_calls": dict(self.op_calls),
            "modules": modules,
            "errors": list(self.errors),
            "relaxed": dict(self.relaxed),
            "finished": self.finished,
            "pid": os.getpid(),
        }

    def write(self, path: Path) -> None:
        """Atomic (temp file + rename): a reader never sees half a file."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)


# --- K/V reversal --------------------------------------------------------------------------------


def _as_int_list(x: Any) -> list[int]:
    if hasattr(x, "tolist"):
        x = x.tolist()
    return [int(v) for v in x]


def reverse_kv(arguments: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
    """Reverse k and v along the sequence, in place in ``arguments`` (or ``extra``, the **kwargs).

    Layouts: 3-D ``[N, H, D]`` (one packed sequence) or 4-D ``[B, N, H, D]``. Only one sequence
    per call is supported: ``cu_seqlens_kv`` must be absent or ``[0, N]``. Causal attention and
    masks are refused, since reversing K/V would change what they compute.
    """
    extra = {} if extra is None else extra

    def get(*names: str) -> Any:
        for name in names:
            for where in (arguments, extra):
                if where.get(name) is not None:
                    return where[name]
        return None

    k, v = get("k"), get("v")
    if k is None or v is None:
        raise ValueError("kv_reversed: the call passed no 'k'/'v' arguments")
    if get("causal") or get("is_causal"):
        raise ValueError("kv_reversed: refusing a causal attention call (reversal would change it)")
    if get("attn_mask") is not None:
        raise ValueError("kv_reversed: refusing an attention call with attn_mask (reversal would change it)")
    if k.ndim == 3:
        seq_dim, batch = 0, 1
    elif k.ndim == 4:
        seq_dim, batch = 1, k.shape[0]
    else:
        raise ValueError(f"kv_reversed: expected k of shape [N,H,D] or [B,N,H,D], got {tuple(k.shape)}")
    n = k.shape[seq_dim]
    if v.shape[seq_dim] != n:
        raise ValueError(f"kv_reversed: k and v disagree on the sequence length ({n} vs {v.shape[seq_dim]})")
    cu = get("cu_seqlens_kv", "cu_seqlens_k")
    if cu is not None:
        count = cu.numel() if hasattr(cu, "numel") else len(cu)
        if count != 2:
            raise ValueError(
                f"kv_reversed: cu_seqlens_kv holds {count - 1} packed sequences; only a single sequence "
                "per call is supported (reversing across sequence boundaries would mix them)"
            )
        if batch != 1:
            raise ValueError(f"kv_reversed: cu_seqlens_kv with batch {batch} is ambiguous; expected batch 1")
        max_kv = get("max_seqlen_kv", "max_seqlen_k")
        # A matching max_seqlen proves [0, N] without reading the device tensor (no sync).
        if not (isinstance(max_kv, int) and max_kv == n):
            bounds = _as_int_list(cu)
            if bounds != [0, n]:
                raise ValueError(
                    f"kv_reversed: cu_seqlens_kv {bounds} does not cover the whole sequence of {n}"
                )
    for name, tensor in (("k", k), ("v", v)):
        where = arguments if arguments.get(name) is not None else extra
        where[name] = tensor.flip(seq_dim)


# --- the registry wrapper --------------------------------------------------------------------------


def _caller_module() -> str | None:
    """Module that instantiated the backend: the first frame outside this file.

    Compared by file, not by ``__name__``: under ``python -m`` this module and LightX2V's entry
    (run by runpy) are both called ``__main__``.
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == _SELF_FILE:
        frame = frame.f_back
    return frame.f_globals.get("__name__") if frame is not None else None


class Instrument:
    """Turns registered backends into counting (and, when asked, K/V-reversing) subclasses."""

    def __init__(self, book: CallBook):
        self.book = book
        self._made: dict[tuple[str, int], Any] = {}

    def wrap(self, name: str, target: Any) -> Any:
        if getattr(target, "_harness_counting", False) or not callable(target):
            return target
        key = (name, id(target))
        if key not in self._made:
            self._made[key] = (
                self._subclass(name, target) if isinstance(target, type) else self._factory(name, target)
            )
        return self._made[key]

    def _apply(self, name: str, original: Any) -> Any:
        book = self.book
        try:
            signature = inspect.signature(original)
        except (TypeError, ValueError):
            signature = None
        varkw = next(
            (p.name for p in (signature.parameters.values() if signature else ()) if p.kind == p.VAR_KEYWORD),
            None,
        )

        def apply(obj, *args, **kwargs):
            site = getattr(obj, "_harness_site", None)
            book.call(name, site)
            if book.kv_reversed and name == book.requested and book.in_scope(site):
                if signature is None:
                    raise ValueError(f"kv_reversed: cannot read the signature of {name}.apply")
                try:
                    bound = signature.bind(obj, *args, **kwargs)
                except TypeError as err:
                    raise ValueError(f"kv_reversed: {name}.apply arguments do not bind ({err})") from None
                try:
                    reverse_kv(bound.arguments, bound.arguments.get(varkw) if varkw else None)
                except ValueError as err:
                    book.error(f"{name}: {err}")
                    raise
                book.kv_reversed_calls += 1
                return original(*bound.args, **bound.kwargs)
            return original(obj, *args, **kwargs)

        return apply

    def _subclass(self, name: str, cls: type) -> Any:
        original_apply = getattr(cls, "apply", None)
        original_init = cls.__init__
        book = self.book

        def __init__(obj, *args, **kwargs):
            site = _caller_module()
            obj._harness_site = site
            book.instance(name, site)
            original_init(obj, *args, **kwargs)

        namespace: dict[str, Any] = {
            "__init__": __init__,
            "_harness_counting": True,
            "__module__": cls.__module__,
        }
        if original_apply is not None:
            namespace["apply"] = self._apply(name, original_apply)
        else:
            book.error(f"{name}: backend class {cls.__qualname__} has no apply(); its calls are not counted")
        try:
            return type(cls.__name__, (cls,), namespace)
        except TypeError as err:  # a class that cannot be subclassed: count through a factory
            book.error(f"{name}: cannot subclass {cls.__qualname__} ({err}); counting per instance")
            return self._factory(name, cls)

    def _factory(self, name: str, target: Any) -> Any:
        book = self.book
        made = self

        def factory(*args, **kwargs):
            site = _caller_module()
            obj = target(*args, **kwargs)
            book.instance(name, site)
            unbound = getattr(type(obj), "apply", None)
            if callable(unbound):
                obj._harness_site = site
                obj.apply = made._apply(name, unbound).__get__(obj)
            else:
                book.error(
                    f"{name}: {type(obj).__qualname__} has no apply() method; its calls are not counted"
                )
            return obj

        factory._harness_counting = True  # type: ignore[attr-defined]
        return factory


def instrument_registry(registry: Any, book: CallBook) -> Instrument:
    """Make every lookup of ``registry`` hand out instrumented backends.

    The registry's class is swapped for a subclass whose ``__getitem__``/``get`` wrap what they
    return, so backends registered later (LightX2V imports most of them with the model) are
    covered too. Nothing in the registry's dict is changed.
    """
    inst = Instrument(book)
    base = type(registry)

    class CountingRegistry(base):  # type: ignore[misc, valid-type]
        def __getitem__(self, key):
            return inst.wrap(key, base.__getitem__(self, key))

        def get(self, key, default=None):
            return self[key] if key in self else default

    CountingRegistry.__name__ = CountingRegistry.__qualname__ = base.__name__
    try:
        registry.__class__ = CountingRegistry
    except TypeError as err:  # fall back to wrapping what is registered now
        book.error(f"registry class swap failed ({err}); backends registered later are not counted")
        for key in list(registry.keys()):
            registry[key] = inst.wrap(key, registry[key])
    return inst


def count_op(ref: str, label: str, book: CallBook) -> None:
    """Replace ``module:function`` with a counting wrapper before anything imports it."""
    mod_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(mod_name)
        original = getattr(module, attr)
    except Exception as err:  # an op that is not installed is a fact to record, not a crash
        book.error(f"count-op {label}: {ref} unavailable ({type(err).__name__}: {err})")
        return
    if getattr(original, "_harness_counting", False):
        return

    def counted(*args, **kwargs):
        book.op_calls[label] += 1
        return original(*args, **kwargs)

    counted._harness_counting = True  # type: ignore[attr-defined]
    counted.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(module, attr, counted)
    # Packages above it that re-export the same function (``from .x import f``) get it too.
    parts = mod_name.split(".")
    for i in range(1, len(parts)):
        parent = sys.modules.get(".".join(parts[:i]))
        if parent is not None and getattr(parent, attr, None) is original:
            setattr(parent, attr, counted)


# --- per-rank log ----------------------------------------------------------------------------------


class Tee:
    """Copy this process's stdout and stderr (file descriptors 1 and 2) into one file, line by line.

    Both streams still reach their original destinations; the file gets whole lines in the order
    they were written. Works for output from C extensions too, since it works on descriptors.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed in stop()
        self._lock = threading.Lock()
        self._streams: list[tuple[int, int, threading.Thread]] = []
        for fd in (1, 2):
            saved = os.dup(fd)
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            t = threading.Thread(target=self._pump, args=(read_end, saved), daemon=True, name=f"tee-{fd}")
            t.start()
            self._streams.append((fd, saved, t))

    def _pump(self, read_end: int, out_fd: int) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(read_end, 65536)
            except OSError:
                break
            if not chunk:
                break
            try:
                os.write(out_fd, chunk)
            except OSError:
                pass
            pending += chunk
            cut = pending.rfind(b"\n") + 1
            if cut:
                with self._lock:
                    self._file.write(pending[:cut])
                pending = pending[cut:]
        if pending:
            with self._lock:
                self._file.write(pending)
        os.close(read_end)

    def stop(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        for fd, saved, _ in self._streams:
            os.dup2(saved, fd)  # closes the pipe's last write end: the pump sees EOF
            os.close(saved)
        for _, _, t in self._streams:
            t.join(timeout=5)
        self._streams = []
        self._file.close()


# --- main -----------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        cut = argv.index("--")
        own, rest = argv[:cut], argv[cut + 1 :]
    else:
        own, rest = argv, []
    p = argparse.ArgumentParser(
        prog="python -m harness.runners.lightx2v.launch", description=__doc__.split("\n")[0]
    )
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--attn-type", required=True)
    p.add_argument("--kv-reversed", action="store_true")
    p.add_argument("--scope", action="append", default=[], help="module prefix of the model under test")
    p.add_argument("--wrapper", action="append", default=[], help="attention type that wraps another one")
    p.add_argument("--count-op", action="append", default=[], metavar="LABEL=module:function")
    p.add_argument("--no-tee", action="store_true", help="do not write rank<N>.log")
    p.add_argument("--entry", default=LIGHTX2V_ENTRY, help=argparse.SUPPRESS)
    p.add_argument(
        "--synthetic-checkpoint",
        type=Path,
        metavar="MODEL_PATH",
        help="relax LightX2V's released-size checks for this synthetic checkpoint (refused without its marker)",
    )
    p.add_argument(
        "--reference-short-edge", type=int, help="ref2av reference image short edge (synthetic only)"
    )
    p.add_argument(
        "--bare",
        action="store_true",
        help="no counting, no K/V reversal, no rank log: LightX2V as it runs without the harness "
        "(platform and synthetic relaxations only); the overhead benchmark's baseline",
    )
    ns = p.parse_args(own)
    for item in ns.count_op:
        if "=" not in item or ":" not in item.split("=", 1)[1]:
            p.error(f"--count-op expects LABEL=module:function, got {item!r}")
    if ns.reference_short_edge is not None and ns.synthetic_checkpoint is None:
        p.error("--reference-short-edge is only allowed with --synthetic-checkpoint")
    if ns.bare and (ns.kv_reversed or ns.count_op):
        p.error("--bare runs LightX2V uninstrumented: no --kv-reversed or --count-op")
    return ns, rest


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask Linux to send ``sig`` to this rank when its parent (torchrun) dies.

    torchrun starts every rank in a session of its own, so a torchrun killed outright (SIGKILL)
    would leave its ranks running; with this they get SIGTERM and write their counts. Returns
    whether the request was made (Linux only).
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, int(sig), 0, 0, 0) != 0:  # 1 = PR_SET_PDEATHSIG
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:  # the parent died before the request: act on it now
        os.kill(os.getpid(), sig)
    return True


def _run_entry(entry: str, rest: list[str]) -> None:
    sys.argv = [entry, *rest]
    runpy.run_module(entry, run_name="__main__", alter_sys=True)


def main(argv: list[str] | None = None) -> int:
    ns, rest = parse_args(sys.argv[1:] if argv is None else argv)
    prepare_platform()
    if ns.bare:
        die_with_parent()
        if ns.synthetic_checkpoint is not None:
            relax_synthetic_checks(ns.synthetic_checkpoint, ns.reference_short_edge)
        _run_entry(ns.entry, rest)
        return 0

    rank = rank_label()
    run_dir: Path = ns.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    book = CallBook(rank, ns.attn_type, ns.kv_reversed, ns.scope, ns.wrapper)
    out = rank_calls_path(run_dir, rank)

    tee = None if ns.no_tee else Tee(rank_log_path(run_dir, rank))
    if tee is not None:
        atexit.register(tee.stop)  # registered first: runs last, after the counts are written
    atexit.register(book.write, out)

    def on_sigterm(signum, frame):  # torchrun stops the other ranks with SIGTERM when one fails
        book.error("terminated by SIGTERM")
        book.write(out)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    die_with_parent()

    for item in ns.count_op:
        label, ref = item.split("=", 1)
        count_op(ref, label, book)
    try:
        registry_module = importlib.import_module(LIGHTX2V_REGISTRY)
        registry = registry_module.ATTN_WEIGHT_REGISTER
    except Exception as err:
        book.error(f"cannot import {LIGHTX2V_REGISTRY}.ATTN_WEIGHT_REGISTER: {type(err).__name__}: {err}")
        book.write(out)
        raise
    instrument_registry(registry, book)
    if ns.synthetic_checkpoint is not None:
        try:
            book.relaxed = relax_synthetic_checks(ns.synthetic_checkpoint, ns.reference_short_edge)
        except Exception as err:
            book.error(f"synthetic checkpoint: {err}")
            book.write(out)
            raise

    try:
        _run_entry(ns.entry, rest)
    except SystemExit as exc:
        if exc.code not in (0, None):
            book.error(f"{ns.entry} exited with {exc.code}")
        else:
            book.finished = True
        book.write(out)
        raise
    except BaseException as exc:
        book.error(f"{type(exc).__name__}: {exc}")
        book.write(out)
        raise
    book.finished = True
    book.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
