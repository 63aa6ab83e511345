"""Runs inside every torchrun rank: instrument LightX2V's attention registry, then run LightX2V.

``python -m harness.runners.lightx2v.launch --run-dir DIR --attn-type NAME [flags: --help] -- <lightx2v.infer
arguments>``. Relies on LightX2V's ``ATTN_WEIGHT_REGISTER`` and ``lightx2v.infer`` only; writes
DIR/rank<N>.log and DIR/attn_calls.rank<N>.json (also on an exception or SIGTERM). ``--bare``: the overhead
baseline.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import runpy
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from harness.runners.common import json_arg, load_plugins, one_line, plugins_json
from harness.runners.lightx2v import rank_env
from harness.runners.lightx2v.counting import CallBook, Instrument, count_op, instrument_registry
from harness.runners.lightx2v.latents import LatentSaver, parse_steps
from harness.runners.lightx2v.serve import CallPath, RunHooks

LIGHTX2V_ENTRY = "lightx2v.infer"
# stop() writes it into the pipe once fd 1/2 are restored: the pump forwards up to it and ends (an
# end of file would wait on any child process that inherited the descriptor).
END_MARK = b"\x00harness.tee.end\x00"
DRAIN_S = 60.0  # stop()'s wait for the pump: far above a loaded machine's scheduling delays


class Tee:
    """File descriptors 1 and 2 (C extensions' output too) copied into one file in whole lines, in
    the order written; both streams still reach their destinations."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed in stop()
        self._lock = threading.Lock()
        self._streams: list[tuple[int, int, int, threading.Thread]] = []
        for fd in (1, 2):
            saved = os.dup(fd)
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)  # write_end is kept: stop() sends END_MARK through it
            t = threading.Thread(target=self._pump, args=(read_end, saved), daemon=True, name=f"tee-{fd}")
            t.start()
            self._streams.append((fd, saved, write_end, t))

    def _pump(self, read_end: int, out_fd: int) -> None:
        pending = b""  # the file's partial line
        buf = b""  # read, not yet forwarded (a possible start of END_MARK)
        done = False
        while not done:
            try:
                chunk = os.read(read_end, 65536)
            except OSError:
                chunk = b""
            buf += chunk
            end = buf.find(END_MARK)
            if end >= 0:
                out, buf, done = buf[:end], b"", True
            elif not chunk:
                out, buf, done = buf, b"", True
            else:
                # buf's last bytes that could begin END_MARK, kept until the next read decides
                ends = range(min(len(buf), len(END_MARK) - 1), 0, -1)
                keep = next((n for n in ends if END_MARK.startswith(buf[-n:])), 0)
                out, buf = buf[: len(buf) - keep], buf[len(buf) - keep :]
            if not out:
                continue
            with contextlib.suppress(OSError):  # the destination is gone: the file still gets it
                view = memoryview(out)
                while view:  # os.write may write a part (a signal, a full pipe)
                    view = view[os.write(out_fd, view) :]
            pending += out
            cut = pending.rfind(b"\n") + 1
            if cut:
                with self._lock:
                    self._file.write(pending[:cut])
                pending = pending[cut:]
        if pending:  # a last line with no newline: ended here, so the other stream's lines stay whole
            with self._lock:
                self._file.write(pending + b"\n")
        os.close(read_end)

    def stop(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        deadline = time.monotonic() + DRAIN_S
        for fd, saved, write_end, _ in self._streams:
            os.dup2(saved, fd)  # the descriptor writes to its destination again
            # the pipe may be full (a slow pump): retried until the deadline
            os.set_blocking(write_end, False)
            while True:
                try:
                    os.write(write_end, END_MARK)  # shorter than PIPE_BUF: written whole or not at all
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
                except OSError:  # the pump has ended (its read end is closed)
                    break
            os.close(write_end)
        # `saved` stays open until its pump has forwarded the last bytes through it.
        for _, saved, _, t in self._streams:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
            if not t.is_alive():
                os.close(saved)
        self._streams = []
        with self._lock:
            self._file.close()


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    cut = argv.index("--") if "--" in argv else len(argv)
    own, rest = argv[:cut], argv[cut + 1 :]
    p = argparse.ArgumentParser(
        prog="python -m harness.runners.lightx2v.launch", description=__doc__.split("\n")[0]
    )
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--attn-type", required=True)
    p.add_argument("--kv-reversed", action="store_true")
    p.add_argument("--scope", action="append", default=[], help="module prefix of the model under test")
    p.add_argument("--wrapper", action="append", default=[], help="attention type that wraps another one")
    p.add_argument("--count-op", action="append", default=[], metavar="LABEL=module:function")
    p.add_argument(
        "--latent-steps",
        default="none",
        metavar="SPEC",
        help="DiT steps whose latents are saved: all, none, "
        "auto (every step of a short run; else step 1, every 5th and the last) or a comma list",
    )
    p.add_argument("--time-blocks", action="store_true", help="time each DiT block (device synchronised)")
    p.add_argument("--schedule", type=json_arg, help="a step schedule (harness.records.StepSchedule, JSON)")
    p.add_argument(
        "--insitu", type=json_arg, help="the primary, its shadows and in-situ settings (a JSON object)"
    )
    p.add_argument(
        "--plugins",
        type=plugins_json,
        default=[],
        help="the spec's plugins (PluginRef JSON list): imported before LightX2V's registry, their "
        "attention backends registered in it (served by the harness)",
    )
    p.add_argument(
        "--serve",
        action="append",
        default=[],
        metavar="NAME",
        help="a harness backend the arm names that LightX2V lacks (e.g. planted_error): registered in "
        "LightX2V's registry, served by the harness",
    )
    p.add_argument(
        "--attn-options",
        type=json_arg,
        default={},
        metavar="JSON",
        help="the arm's attn_options (a JSON object), for the harness backend --attn-type names",
    )
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


def wire_calls(ns: argparse.Namespace, rest: list[str], inst: Instrument, book: CallBook, rank: str):
    """Hooks, latents and the call path of one rank; returns what must be closed at the end."""
    from harness.attention.insitu.recorder import CallSites  # shared with the in-situ recorder
    from harness.records import StepSchedule

    hooks = RunHooks(CallSites(), time_blocks=ns.time_blocks)
    flag = "--model_cls"  # LightX2V's own argument, as ``--model_cls X`` or ``--model_cls=X``
    given = (
        rest[i + 1] if a == flag else a.split("=", 1)[1]
        for i, a in enumerate(rest)
        if (a == flag and i + 1 < len(rest)) or a.startswith(flag + "=")
    )
    hooks.install(next(given, None))
    book.step_key = lambda: hooks.sites.current.step_key
    book.extra["attribution"] = {"hooks": list(hooks.installed), "missing": list(hooks.missing)}
    saver = LatentSaver(ns.run_dir, rank, ns.latent_choice)
    hooks.on_step_end.append(saver.on_step_end)
    shadowed = None
    if ns.insitu:
        from harness.insitu_records import INSITU_DIR
        from harness.runners.lightx2v.shadows import build_shadowed

        served = {"name": ns.attn_type, "kv_reversed": ns.kv_reversed}
        shadowed = build_shadowed(ns.insitu, inst.raw, ns.run_dir / INSITU_DIR, rank, hooks.sites, served)
    schedule = StepSchedule.model_validate(ns.schedule) if ns.schedule else None
    inst.serve = CallPath(book, hooks, inst.raw, schedule=schedule, shadowed=shadowed)
    return hooks, saver, shadowed


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask Linux for ``sig`` when the parent dies: a torchrun killed outright leaves its ranks (each in
    a session of its own) running; so they write their counts. Whether the request was made."""
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


def _run_entry(rest: list[str]) -> None:
    sys.argv = [LIGHTX2V_ENTRY, *rest]
    runpy.run_module(LIGHTX2V_ENTRY, run_name="__main__", alter_sys=True)


def plugin_types(plugins: list | None, book: CallBook | None) -> list[str] | None:
    """The plugins' backend names; None when one fails to import (one line on stderr and in the counts)."""
    try:
        return load_plugins(plugins) if plugins else []
    except BaseException as err:  # the user's plugin
        line = f"launcher: {one_line(err) or type(err).__name__}"
        if book is not None:
            book.error(line)
        print(line, file=sys.stderr, flush=True)
        return None


def serve_plugins(names: list[str], book: CallBook | None, ns: argparse.Namespace, sites=None) -> None:
    """Register the plugins' backends and the harness backends of ``--serve`` in LightX2V's registry
    (before it is instrumented), the arm's backend with its ``--attn-options``, each instance bound to
    the rank's call sites (``sites()``: the launcher's ``CallSites`` once wired)."""
    names = list(dict.fromkeys([*names, *ns.serve]))
    if not names:
        return
    options = {ns.attn_type: ns.attn_options} if ns.attn_options else {}
    served, lightx2v_own = rank_env.serve_backends(rank_env.attention_registry(), names, options, sites)
    if book is not None:
        book.extra["harness_served"] = served
        for name in lightx2v_own:  # the pre-flight refuses an arm of such a name; a shadow is LightX2V's
            if name == book.requested:
                book.error(
                    f"attn_type {name}: LightX2V's own class of that name served it, not the harness backend"
                )


def main(argv: list[str] | None = None) -> int:
    ns, rest = parse_args(sys.argv[1:] if argv is None else argv)
    rank_env.prepare_platform()
    if ns.bare:
        die_with_parent()
        names = plugin_types(ns.plugins, None)
        if names is None:
            return 2
        serve_plugins(names, None, ns)
        if ns.synthetic_checkpoint is not None:
            rank_env.relax_synthetic_checks(ns.synthetic_checkpoint, ns.reference_short_edge)
        _run_entry(rest)
        return 0

    rank = os.environ.get("RANK", "0")
    run_dir: Path = ns.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    book = CallBook(rank, ns.attn_type, ns.kv_reversed, ns.scope, ns.wrapper)
    out = run_dir / f"attn_calls.rank{rank}.json"
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

    atexit.register(Tee(run_dir / f"rank{rank}.log").stop)  # registered first: runs last, after the counts
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
    names = plugin_types(ns.plugins, book)  # after the counted ops (a plugin may import one)
    if names is None:
        return 2

    @contextlib.contextmanager
    def noted(prefix: str, typed: bool = True) -> Iterator[None]:
        """A set-up stage: its failure is one line of the rank's record, written, then raised."""
        try:
            yield
        except Exception as err:
            book.error(f"{prefix}: {type(err).__name__}: {err}" if typed else f"{prefix}: {err}")
            book.write(out)
            raise

    with noted(f"cannot import {rank_env.LIGHTX2V_REGISTRY}.ATTN_WEIGHT_REGISTER"):
        registry = rank_env.attention_registry()
    with noted("plugin backends"):
        # the rank's call sites, wired below, before LightX2V builds its attention instances
        serve_plugins(names, book, ns, sites=lambda: closing[0][0].sites if closing else None)
    rank_env.bind_pinned_function()  # a pinned SageAttention's function, where LightX2V bound `sageattn`
    inst = instrument_registry(registry, book)
    with noted("launcher"):
        closing.append(wire_calls(ns, rest, inst, book, rank))
    if ns.synthetic_checkpoint is not None:
        with noted("synthetic checkpoint", typed=False):
            book.relaxed = rank_env.relax_synthetic_checks(ns.synthetic_checkpoint, ns.reference_short_edge)

    try:
        _run_entry(rest)
        book.finished = True
    except SystemExit as exc:
        if exc.code not in (0, None):
            book.error(f"{LIGHTX2V_ENTRY} exited with {exc.code}")
        else:
            book.finished = True
        raise
    except BaseException as exc:
        book.error(f"{type(exc).__name__}: {exc}")
        raise
    finally:
        record()
    return 0


if __name__ == "__main__":
    sys.exit(main())
