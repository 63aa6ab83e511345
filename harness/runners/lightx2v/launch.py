"""Runs inside every torchrun rank: instrument LightX2V's attention registry, then run LightX2V.

    python -m harness.runners.lightx2v.launch --run-dir DIR --attn-type NAME [--kv-reversed]
        [--scope MODULE_PREFIX]... [--wrapper NAME]... [--count-op LABEL=module:function]...
        [--latent-steps all|none|auto|1,2,..] [--no-direct-check] [--time-blocks]
        [--schedule JSON] [--insitu JSON] [--plugins JSON]
        [--synthetic-checkpoint MODEL_PATH [--reference-short-edge PX]] [--bare]
        -- <lightx2v.infer arguments>

It depends on LightX2V through two things only: ``lightx2v.utils.registry_factory.
ATTN_WEIGHT_REGISTER`` (a mapping name -> backend class, used as ``REGISTER[name]()``, whose
backends expose ``apply(q, k, v, ...)``) and the ``lightx2v.infer`` entry point, which is run
as ``__main__`` with the remaining arguments. With ``--plugins`` (the spec's plugins), they are
imported first and their attention backends registered in that registry under their own names
(``served``: LightX2V attention classes calling the harness backend), so they count as any other.

What it adds, per rank (RANK from torchrun, 0 otherwise):
* every backend class handed out by the registry is a counting subclass: calls are counted by
  backend name and by the module that built the instance. Instances built under a ``--scope``
  prefix are the model under test; a call there of a backend other than the requested one is a
  fallback. Instances built elsewhere (text encoder, VAE) are counted apart.
* with ``--kv-reversed``, in-scope calls of the requested backend get K and V reversed along
  the sequence (exact attention is invariant to that order; only summation order changes).
* every in-scope call of the requested backend goes through ``serve.CallPath``: its call site
  (DiT step, block, kind) from hooks on LightX2V's own step and block loops (``hooks``), the
  arm's step schedule (``--schedule``), the bitwise check of the backend against its op called
  directly (``direct``; ``--no-direct-check`` leaves it out) and the in-situ shadows
  (``--insitu``, ``shadows``: DIR/insitu/rank<N>.jsonl, this rank's heads);
* with ``--time-blocks``, the seconds of every DiT block of the measured steps (``hooks``);
* the latents of the chosen DiT steps (``--latent-steps``, ``latents``): DIR/latents/ on rank 0,
  DIR/latents/rank<N>/ on the others;
* DIR/rank<N>.log: the rank's stdout and stderr (also passed through), so that lines LightX2V
  prints without a rank (step markers, packed layout) can be attributed.
* DIR/attn_calls.rank<N>.json at exit, on an exception and on SIGTERM: calls per backend and
  per DiT step, the first-call check, what the hooks found, the latents saved.

The counting and the reversal are ``counting``'s, the rank log ``tee``'s; this module wires them
up in the right order around LightX2V's entry point.

Before LightX2V is imported: ``PLATFORM=cpu`` gets a CPU platform, and ``--synthetic-checkpoint``
relaxes the released-size checks for a synthetic checkpoint (``rank_env``). ``--bare`` runs
LightX2V with those alone, no instrumentation: the baseline of the overhead benchmark.

Standard library only at import time. Once running, a rank imports ``harness.attention.insitu``
for its call sites (with torch and pydantic: the ranks' interpreter needs the harness's own
dependencies, as the harness's interpreter, the default, has them).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import json
import os
import runpy
import signal
import sys
from pathlib import Path

from harness.runners.lightx2v.counting import CallBook, Instrument, count_op, instrument_registry
from harness.runners.lightx2v.hooks import RunHooks
from harness.runners.lightx2v.latents import LatentSaver, parse_steps
from harness.runners.lightx2v.rank_env import bind_pinned_function, prepare_platform, relax_synthetic_checks
from harness.runners.lightx2v.serve import CallPath
from harness.runners.lightx2v.served import load_plugins, plugins_json, serve_backends
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
    p.add_argument(
        "--latent-steps",
        default="none",
        metavar="SPEC",
        help="DiT steps whose latents are saved: all, none, "
        "auto (every step of a short run; else step 1, every 5th and the last) or a comma list",
    )
    p.add_argument("--no-direct-check", action="store_true", help="no first-call check against the direct op")
    p.add_argument("--time-blocks", action="store_true", help="time each DiT block (device synchronised)")
    p.add_argument(
        "--schedule", type=_json_object, help="a step schedule (harness.records.StepSchedule, JSON)"
    )
    p.add_argument(
        "--insitu", type=_json_object, help="shadows and in-situ settings (shadows.insitu_payload, JSON)"
    )
    p.add_argument(
        "--plugins",
        type=plugins_json,
        default=[],
        help="the spec's plugins (PluginRef JSON list): imported before LightX2V's registry, their "
        "attention backends registered in it (served by the harness)",
    )
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
    if ns.bare and (ns.kv_reversed or ns.count_op or ns.schedule or ns.insitu):
        p.error("--bare runs LightX2V uninstrumented: no --kv-reversed, --count-op, --schedule or --insitu")
    try:
        ns.latent_choice = parse_steps(ns.latent_steps)
    except ValueError as err:
        p.error(f"--latent-steps: {err}")
    return ns, rest


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not JSON ({err})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def infer_flag(rest: list[str], flag: str) -> str | None:
    """The value of one of LightX2V's own arguments (``--model_cls X``) in the entry's argv."""
    for i, item in enumerate(rest):
        if item == flag and i + 1 < len(rest):
            return rest[i + 1]
        if item.startswith(flag + "="):
            return item.split("=", 1)[1]
    return None


def call_sites() -> object:
    """The rank's call-site tracker (``harness.attention.insitu``, shared with the in-situ recorder)."""
    from harness.attention.insitu.sites import CallSites

    return CallSites()


def wire_calls(ns: argparse.Namespace, rest: list[str], inst: Instrument, book: CallBook, rank: str):
    """Hooks, latents and the call path of one rank; returns what must be closed at the end."""
    hooks = RunHooks(call_sites(), time_blocks=ns.time_blocks)
    hooks.install(infer_flag(rest, "--model_cls"))
    book.step_key = lambda: hooks.sites.current.step_key
    book.extra["attribution"] = {"hooks": list(hooks.installed), "missing": list(hooks.missing)}
    saver = LatentSaver(ns.run_dir, rank, ns.latent_choice)
    hooks.on_step_end.append(saver.on_step_end)
    shadowed = None
    if ns.insitu:
        from harness.attention.insitu import INSITU_DIR
        from harness.runners.lightx2v.shadows import build_shadowed

        served = {"name": ns.attn_type, "kv_reversed": ns.kv_reversed}
        shadowed = build_shadowed(ns.insitu, inst.raw, ns.run_dir / INSITU_DIR, rank, hooks.sites, served)
    schedule = None
    if ns.schedule:
        from harness.records import StepSchedule

        schedule = StepSchedule.model_validate(ns.schedule)
    inst.serve = CallPath(
        book, hooks, inst.raw, schedule=schedule, direct_check=not ns.no_direct_check, shadowed=shadowed
    )
    return hooks, saver, shadowed


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


def plugin_problem(exc: BaseException) -> str:
    """A plugin that fails to import, in one line (a ScenarioError already is one)."""
    return " ".join(str(exc).split())[:500] or type(exc).__name__


def serve_plugins(names: list[str], book: CallBook | None) -> None:
    """Register the plugins' backends in LightX2V's registry (before it is instrumented)."""
    if not names:
        return
    registry = importlib.import_module(LIGHTX2V_REGISTRY).ATTN_WEIGHT_REGISTER
    served, lightx2v_own = serve_backends(registry, names)
    if book is not None:
        book.extra["harness_served"] = served
        for name in lightx2v_own:  # the pre-flight refuses an arm of such a name; a shadow is LightX2V's
            if name == book.requested:
                book.error(f"attn_type {name}: LightX2V's own class of that name served it, not the plugin's")


def main(argv: list[str] | None = None) -> int:
    ns, rest = parse_args(sys.argv[1:] if argv is None else argv)
    prepare_platform()
    if ns.bare:
        die_with_parent()
        if ns.plugins:
            try:
                names = load_plugins(ns.plugins)
            except BaseException as err:
                print(f"launcher: {plugin_problem(err)}", file=sys.stderr, flush=True)
                return 2
            serve_plugins(names, None)
        if ns.synthetic_checkpoint is not None:
            relax_synthetic_checks(ns.synthetic_checkpoint, ns.reference_short_edge)
        _run_entry(ns.entry, rest)
        return 0

    rank = rank_label()
    run_dir: Path = ns.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    book = CallBook(rank, ns.attn_type, ns.kv_reversed, ns.scope, ns.wrapper)
    out = rank_calls_path(run_dir, rank)
    closing: list = []  # (latent saver, shadowed attention) once wired

    def record(timeout_s: float = 120.0) -> None:
        """The rank's record, after the latent files and the in-situ lines are out."""
        for hooks, saver, shadowed in closing:
            if hooks.time_blocks:
                book.extra["block_seconds"] = {
                    s: [round(x, 6) for x in v] for s, v in hooks.block_seconds.items()
                }
            saver.close(timeout_s)
            book.extra["latents"] = saver.to_json()
            for problem in saver.errors:
                book.error(problem)
            if shadowed is not None:
                shadowed[0].recorder.close()
        book.write(out)

    tee = None if ns.no_tee else Tee(rank_log_path(run_dir, rank))
    if tee is not None:
        atexit.register(tee.stop)  # registered first: runs last, after the counts are written
    atexit.register(record)

    def on_sigterm(signum, frame):  # torchrun stops the other ranks with SIGTERM when one fails
        book.error("terminated by SIGTERM")
        record(timeout_s=5.0)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    die_with_parent()

    for item in ns.count_op:
        label, ref = item.split("=", 1)
        count_op(ref, label, book)
    plugin_types: list[str] = []
    if ns.plugins:  # after the counted ops (a plugin may import one), before LightX2V's registry
        try:
            plugin_types = load_plugins(ns.plugins)
        except BaseException as err:  # the user's plugin: one line in the counts and on stderr
            book.error(f"launcher: {plugin_problem(err)}")
            print(f"launcher: {plugin_problem(err)}", file=sys.stderr, flush=True)
            return 2
    try:
        registry_module = importlib.import_module(LIGHTX2V_REGISTRY)
        registry = registry_module.ATTN_WEIGHT_REGISTER
    except Exception as err:
        book.error(f"cannot import {LIGHTX2V_REGISTRY}.ATTN_WEIGHT_REGISTER: {type(err).__name__}: {err}")
        book.write(out)
        raise
    try:
        serve_plugins(plugin_types, book)
    except Exception as err:
        book.error(f"plugin backends: {type(err).__name__}: {err}")
        book.write(out)
        raise
    bind_pinned_function()  # a pinned SageAttention's function, where LightX2V bound `sageattn`
    inst = instrument_registry(registry, book)
    try:
        closing.append(wire_calls(ns, rest, inst, book, rank))
    except Exception as err:
        book.error(f"launcher: {type(err).__name__}: {err}")
        book.write(out)
        raise
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
        record()
        raise
    except BaseException as exc:
        book.error(f"{type(exc).__name__}: {exc}")
        record()
        raise
    book.finished = True
    record()
    return 0


if __name__ == "__main__":
    sys.exit(main())
