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

The counting and the reversal are ``counting``'s, the rank log ``tee``'s; this module wires them
up in the right order around LightX2V's entry point.

Before LightX2V is imported: ``PLATFORM=cpu`` gets a CPU platform, and ``--synthetic-checkpoint``
relaxes the released-size checks for a synthetic checkpoint (``rank_env``). ``--bare`` runs
LightX2V with those alone, no instrumentation: the baseline of the overhead benchmark.

Standard library only at import time: torch is imported when a reversal needs it.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import runpy
import signal
import sys
from pathlib import Path

from harness.runners.lightx2v.counting import CallBook, count_op, instrument_registry
from harness.runners.lightx2v.rank_env import prepare_platform, relax_synthetic_checks
from harness.runners.lightx2v.tee import Tee

LIGHTX2V_REGISTRY = "lightx2v.utils.registry_factory"
LIGHTX2V_ENTRY = "lightx2v.infer"


def rank_label() -> str:
    return os.environ.get("RANK", "0")


def rank_calls_path(run_dir: Path, rank: str) -> Path:
    return Path(run_dir) / f"attn_calls.rank{rank}.json"


def rank_log_path(run_dir: Path, rank: str) -> Path:
    return Path(run_dir) / f"rank{rank}.log"


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
