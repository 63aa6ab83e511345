"""What the runners share, written once: the child's entry and paths, the spec's plugins in a child,
a step's latents, synthetic weights, the pre-flight probe. Only the standard library, harness.errors and
harness.safe_write at import time: the ranks, the probes and the writers import it."""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any

from harness.errors import Exit, HarnessError, ScenarioError
from harness.safe_write import atomic_write_text, write_step_latents  # noqa: F401 (the runners' import)

HARNESS_IMPORT_ROOT = Path(__file__).resolve().parents[2]
SPEC_JSON = "spec.json"  # the spec a runner writes into the run folder for its child process
LATENTS_DIR = "latents"  # step_NNN.npz of every runner, where harness.compare.latents reads them
SMOKE_TOKENS, SMOKE_HEADS = 256, 2
SMOKE_MIN_COSINE = 0.99  # INT8/FP8 kernels give > 0.999 on random inputs; a broken kernel far less
NOT_A_MODEL = "random weights for checking the chain; not a model"
FRAMEWORK_FACT = "framework_unavailable"  # a probe's fact: the framework itself failed to import
BACKEND_LABEL = "attention backend "  # PluginRef.registers: "attention backend NAME"


def one_line(text: Any, limit: int = 500) -> str:
    return " ".join(str(text).split())[:limit]


def last_line(text: str) -> str:
    """The last non-blank line of a process's output (its error, as a rule), at most 300 characters."""
    return next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "no output")[:300]


def search_path(*parts: str | os.PathLike | None) -> str:
    """A PYTHONPATH of ``parts`` (each a folder or a path list) in order, each entry once."""
    entries = (e for part in parts if part for e in str(part).split(os.pathsep))
    return os.pathsep.join(dict.fromkeys(e for e in entries if e))


def not_found(exe: str | None) -> bool:
    """A named interpreter or launcher that is neither on PATH nor a file."""
    return bool(exe) and not (shutil.which(exe) or Path(exe).is_file())


def absolute_path(path: str, base: str | None = None) -> str:
    """``~`` expanded; a relative path taken from ``base`` (else the working directory)."""
    p = Path(os.path.expanduser(path))
    if not p.is_absolute() and base is not None:
        p = Path(base) / p
    return os.path.abspath(p)


def first_error(err: Any) -> tuple[str, str]:
    """A pydantic ValidationError's first problem: its location (dotted) and its message."""
    first = err.errors()[0]
    return ".".join(str(p) for p in first["loc"]), first["msg"]


def effective_block(
    scenario: Any, arm: Any, profile: str | None, runner: str, rest: str, merge: Callable, tidy: bool = False
) -> Any:
    """The ``runner`` block after the profile's, then the arm's parameters: a block field's key replaces
    it, any other is ``merge``d into ``rest``; ``tidy`` drops pydantic's "Value error, " opener."""
    from pydantic import ValidationError

    block = getattr(scenario, runner, None)
    if block is None:
        raise ScenarioError(f"scenario {scenario.name}: runner '{runner}' needs a '{runner}' block")
    cls, data = type(block), block.model_dump()
    layers = [(f"profiles.{profile}", (scenario.profiles or {}).get(profile, {}))] if profile else []
    layers.append((f"arms[{arm.name}].overrides", arm.overrides or {}))
    for where, layer in layers:
        for key, val in layer.items():
            if key == rest and not isinstance(val, dict):
                raise ScenarioError(f"scenario {scenario.name}: {where}.{rest} must be a mapping")
            if key != rest and key in cls.model_fields:
                data[key] = val
            else:
                data[rest] = merge(data[rest], val if key == rest else {key: val})
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        loc, msg = first_error(err)
        if tidy:
            loc, msg = loc or "(block)", msg.removeprefix("Value error, ")
        raise ScenarioError(
            f"scenario {scenario.name}: arm {arm.name}: {runner}.{loc}: {msg} (after profile/arm overrides)"
        ) from None


def print_step(i: int, n: int) -> None:
    """The line the executor reads a run's progress from (harness.executors.process)."""
    print(f"HARNESS_STEP {i}/{n}", flush=True)


def run_dir_main(argv: list[str] | None, module: str, run: Callable[[Path], Any]) -> int:
    """A runner's child process, ``python -m module RUN_DIR``; a HarnessError is its one line (exit 1)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(f"usage: python -m {module} RUN_DIR", file=sys.stderr)
        return 2
    try:
        timing = run(Path(argv[0]))
    except HarnessError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"done: {timing.dit_steps} DiT steps, {timing.s_per_step:.4f} s/step", flush=True)
    return 0


def json_arg(text: str, objects: bool = False) -> Any:
    """An argparse type: a JSON object, or (``objects``) a JSON list of objects."""
    try:
        value = json.loads(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not JSON ({err})") from None
    if objects and not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
        raise argparse.ArgumentTypeError("expected a JSON list of objects")
    if not objects and not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


# --- the spec's plugins in a child process (a rank, a probe) ------------------------------------


def plugin_backends(plugins: Iterable[Any]) -> list[str]:
    """The attention backends the plugins registered (PluginRef objects or their JSON dicts)."""
    registers = (r for p in plugins for r in (p["registers"] if isinstance(p, dict) else p.registers))
    names = (r.removeprefix(BACKEND_LABEL) for r in registers if r.startswith(BACKEND_LABEL))
    return list(dict.fromkeys(names))


def plugins_arg(plugins: Iterable[Any]) -> str:
    """The spec's plugins (PluginRef records) as a child process's ``--plugins`` argument."""
    return json.dumps([p.model_dump(mode="json") for p in plugins], sort_keys=True)


plugins_json = functools.partial(json_arg, objects=True)  # --plugins: a JSON list of PluginRef dicts


def load_plugins(payload: list[dict[str, Any]]) -> list[str]:
    """Import the spec's plugins (PluginRef dicts) as planned (ScenarioError when one changed); their backends."""
    from harness.records import PluginRef
    from harness.scenario.plugins import load_recorded

    refs = [PluginRef.model_validate(p) for p in payload]
    load_recorded(refs)
    return plugin_backends(refs)


# --- synthetic weights ---------------------------------------------------------------------------


def read_marker(folder: str | os.PathLike, name: str, schema: str) -> dict[str, Any] | None:
    """The marker file ``name`` of a synthetic folder, None for anything else (real weights included)."""
    try:
        data = json.loads((Path(folder) / name).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == schema else None


def write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def file_hashes(root: Path, marker: str) -> dict[str, str]:
    """sha256 of every file under ``root`` but the marker (the marker's own record)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(root).rglob("*"))
        if p.is_file() and p.name != marker
    }


def byte_level_bpe(corpus: str, vocab_size: int, specials: Iterable[str], unk: str | None = None) -> Any:
    """A byte-level BPE trained offline on a fixed text (``tokenizers``' Tokenizer)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE(unk_token=unk))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator([corpus] * 4, trainer=trainer)
    return bpe


def run_writer(
    module: str, args: list[str], what: str, out: str | os.PathLike, read: Callable[[Any], dict | None],
    marker: str, *, python: str | None = None, env: dict[str, str] | None = None, timeout_s: float = 600.0,
) -> dict[str, Any]:  # fmt: skip
    """Run the writer ``python -m module out args`` (``env`` added); its marker, or HarnessError (exit 3)."""
    cmd = [python or sys.executable, "-m", module, str(out), *args]
    try:
        done = subprocess.run(
            cmd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout_s
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise HarnessError(f"{what}: could not run the writer ({err})", exit_code=3) from None
    if done.returncode != 0:
        raise HarnessError(f"{what} writer exited {done.returncode}: {last_line(done.stderr)}", exit_code=3)
    found = read(out)
    if found is None:
        raise HarnessError(f"{out}: the writer finished but left no {marker}", exit_code=3)
    return found


def synthetic_problem(
    field: str, model: Path, what: str, marker: str, have: dict | None, asked: dict, nonempty: bool
) -> str | None:
    """Why ``model`` cannot be (or become) the synthetic ``what`` asked for; None when prepare may write it."""
    if have is None and nonempty:
        return (
            f"{field} {model}: not empty and not a {what} (no {marker}); "
            "the harness writes synthetic weights only into an empty or missing folder"
        )
    if have is not None and have != asked:
        return f"{field} {model}: holds the {what} {have}, the scenario asks for {asked} (use another folder)"
    return None


# --- the pre-flight probe ------------------------------------------------------------------------


class FrameworkUnavailable(HarnessError):
    """The framework (LightX2V, diffusers, torch) cannot be imported where the runs would run: no arm
    can run there, the reference included, so the run fails once (exit 3) rather than skip each arm."""

    exit_code = Exit.RUN_FAILED


def check_framework(framework: str, facts: dict, reason: object, python: str | None) -> None:
    """FrameworkUnavailable when a probe's ``facts`` say the framework itself failed to import."""
    if facts.get(FRAMEWORK_FACT):
        python = facts.get("python") or python
        where = f" by {python}" if python else ""
        raise FrameworkUnavailable(
            f"{framework} cannot be imported{where}: {reason}; no arm can run (a missing dependency of "
            f"{framework}, not an unavailable backend): install it in that interpreter or point the scenario "
            "at one that has it"
        )


def probe_output(
    cmd: list[str], env: dict[str, str] | None, timeout_s: float, opener: str
) -> tuple[Any, str]:
    """A probe process's answer (its last stdout line opening with ``opener``, as JSON; else None) and why none."""
    try:
        done = subprocess.run(
            cmd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout_s
        )
    except (OSError, subprocess.SubprocessError) as err:
        return None, f"pre-flight probe could not run ({err})"
    why = f"pre-flight probe failed (exit {done.returncode}): {last_line(done.stderr)}"
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(opener)]
    try:
        return json.loads(lines[-1]), why
    except (IndexError, ValueError):
        return None, why


def smoke_cosine(out: Any, ref: Any, dtype: Any) -> float:
    """A smoke call's cosine against exact attention, in ``dtype`` on the CPU; ValueError for a bad output."""
    import torch.nn.functional as F

    got = out.to(dtype).reshape(-1).cpu()
    if got.numel() != ref.numel() or not got.isfinite().all():
        raise ValueError(f"returned shape {tuple(out.shape)} with non-finite values or the wrong size")
    return float(F.cosine_similarity(got, ref.to(dtype).reshape(-1).cpu(), dim=0))


class ProbeBatch:
    """A plan's pre-flight questions by probe process (``group``): the first pre-flight of a group asks
    them all in one probe (each imports the framework, for seconds), answers kept for this process."""

    def __init__(self) -> None:
        self.pending: dict[Hashable, dict[Hashable, Any]] = {}
        self.answers: dict[tuple[Hashable, Hashable], Any] = {}

    def expect(self, group: Hashable, key: Hashable, question: Any) -> None:
        if (group, key) not in self.answers:
            self.pending.setdefault(group, {})[key] = question

    def answer(self, group: Hashable, key: Hashable, question: Any, ask: Callable[[list], list]) -> Any:
        """The answer to ``question``; ``ask(questions)`` answers a group's questions in order."""
        if (group, key) not in self.answers:
            todo = {key: question}
            todo.update(
                (k, q) for k, q in self.pending.pop(group, {}).items() if (group, k) not in self.answers
            )
            for k, result in zip(todo, ask(list(todo.values())), strict=True):
                self.answers[(group, k)] = result
        return self.answers[(group, key)]
