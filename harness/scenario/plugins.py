"""Plugins: a file or module a scenario names (``plugins:``) or an installed package declares (entry
points ``harness.plugins``), imported before the scenario is checked and in the process of every arm
that calls what they register (a scenario is code, like a Makefile). Each is a ``PluginRef`` in those
arms' run specs: an edited plugin re-runs them, and a changed file re-imported first takes back what
it registered. A plugin registers; it may not change what exact attention computes (torch's functions
and flags, the environment, the random state): one that does is refused where it is imported."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import random
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.errors import ScenarioError
from harness.records import PluginRef, file_sha256
from harness.registry import Registration, recording_registrations

ENTRY_POINT_GROUP = "harness.plugins"
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

# What each plugin file or module imported in this process registered, by its key
# (the file's resolved path, or the module name), with the digest it had then.
_LOADED: dict[str, tuple[str, list[Registration], PluginRef]] = {}
_ENTRY_POINTS: list[PluginRef] | None = None
ATTENTION_BACKEND = "attention backend "  # how a PluginRef names a backend it registers
# What exact attention's result depends on beyond its inputs: torch's functions (compared by
# identity), its precision and algorithm flags (by value), read as torch.<name> or torch.<name>().
TORCH_FUNCTIONS = ("nn.functional.scaled_dot_product_attention", "nn.functional.softmax", "softmax",
                   "matmul", "bmm", "baddbmm", "einsum")  # fmt: skip
TORCH_FLAGS = ("backends.cuda.matmul.allow_tf32", "backends.cudnn.allow_tf32",
               "backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
               "backends.cuda.matmul.allow_bf16_reduced_precision_reduction")  # fmt: skip
TORCH_CALLS = ("get_float32_matmul_precision", "are_deterministic_algorithms_enabled", "get_default_dtype",
               "backends.cuda.flash_sdp_enabled", "backends.cuda.mem_efficient_sdp_enabled",
               "backends.cuda.math_sdp_enabled")  # fmt: skip


def is_module_name(ref: str) -> bool:
    """``pkg.mod`` names a module; anything with a slash or ending in .py names a file."""
    return not ref.endswith(".py") and "/" not in ref and MODULE_NAME.fullmatch(ref) is not None


def _forget(key: str) -> None:
    """Take back what an earlier import of this plugin registered (its file has changed)."""
    _, made, _ = _LOADED.pop(key)
    for reg in made:
        reg.registry.unregister(reg.name)


def exec_file_module(name: str, path: Path, **location: Any) -> ModuleType:
    """The file at ``path`` imported as module ``name``; a failed import leaves nothing of it in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, path, **location)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path} as a Python module")
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        for key in [n for n in sys.modules if n == name or n.startswith(name + ".")]:
            del sys.modules[key]
        raise
    return module


def _dotted(obj: Any, name: str) -> Any:
    for part in name.split("."):
        obj = getattr(obj, part, None)
    return obj


def global_state() -> dict[str, Any]:
    """What a plugin must leave as it found it (module docstring), by the name a refusal gives it."""
    import numpy as np

    state: dict[str, Any] = {f"os.environ[{k!r}]": v for k, v in os.environ.items()}
    state["Python's random state"] = random.getstate()
    state["numpy's random state"] = hashlib.sha256(np.random.get_state()[1].tobytes()).hexdigest()
    try:
        import torch
    except ImportError:
        return state
    state |= {f"torch.{n}": _dotted(torch, n) for n in (*TORCH_FUNCTIONS, *TORCH_FLAGS)}
    state |= {f"torch.{n}()": f() for n in TORCH_CALLS if callable(f := _dotted(torch, n))}
    state["torch's random state"] = hashlib.sha256(torch.random.get_rng_state().numpy().tobytes()).hexdigest()
    return state


def check_untouched(before: dict[str, Any], what: str) -> None:
    """Refuse, in one line naming ``what``, a change to ``global_state()`` since ``before``."""
    after = global_state()
    missing = object()  # a variable set or unset, a flag this torch lacks
    changed = [k for k in {**before, **after}
               if (a := after.get(k, missing)) is not (b := before.get(k, missing)) and a != b]  # fmt: skip
    if changed:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        raise ScenarioError(
            f"{what} changed {shown} when imported: exact attention, and so the reference and the noise "
            "floor, would differ unseen; a plugin may register backends, not change torch, the environment "
            "or the random state (set environment variables in the scenario's env:): refused"
        )


def plugins_for(refs: Iterable[PluginRef], backends: Iterable[str]) -> list[PluginRef]:
    """The plugins an arm's process imports: those registering a backend it calls (``backends``), and
    those registering anything else (a runner, an executor), which any arm may need."""
    calls = {ATTENTION_BACKEND + n for n in backends}
    return [p for p in refs if any(r in calls or not r.startswith(ATTENTION_BACKEND) for r in p.registers)]


def import_plugin(ref: str, base_dir: Path) -> PluginRef:
    """Import one plugin (once per content) and say what it is and registered; errors propagate."""
    if is_module_name(ref):
        if ref in _LOADED:
            return _LOADED[ref][2]
        with recording_registrations() as made:
            module = importlib.import_module(ref)
        file = getattr(module, "__file__", None)
        if not file:
            raise ImportError(f"module {ref} has no source file to record (a namespace package?)")
        path, key, module_name = Path(file).resolve(), ref, ref
    else:
        path = (base_dir / Path(ref).expanduser()).resolve()  # an absolute path stays itself
        if not path.is_file():
            raise FileNotFoundError(f"no such file {path}")
        key, module_name = str(path), None
        digest = file_sha256(path)
        if key in _LOADED:
            if _LOADED[key][0] == digest:
                return _LOADED[key][2]
            _forget(key)
        if str(path.parent) not in sys.path:  # its own modules beside it import by name (``import mathmod``)
            sys.path.append(str(path.parent))
        # One module name per content: an edited file is a new module, never a half-updated old one.
        with recording_registrations() as made:
            exec_file_module(f"harness_plugin_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}_{digest[:12]}", path)
    # A plugin's first `import harness.attention` registers the harness's own backends: not its.
    mine = [r for r in made if r.module != "harness" and not r.module.startswith("harness.")]
    labels = [f"{r.registry.what} {r.name}" for r in mine]
    record = PluginRef(
        ref=ref, path=str(path), module=module_name, sha256=file_sha256(path), registers=labels
    )
    _LOADED[key] = (record.sha256, mine, record)
    return record


@contextlib.contextmanager
def _plugin_import(where: str, check: bool = True) -> Iterator[None]:
    """Any failure of a plugin's own code (Ctrl-C aside) as one ScenarioError line after ``where``;
    with ``check``, a change to ``global_state()`` refused (``check_untouched``)."""
    before = global_state() if check else {}
    try:
        yield
    except KeyboardInterrupt:
        raise
    except BaseException as err:
        if isinstance(err, SyntaxError) and err.lineno:
            why = f"SyntaxError: {err.msg} (line {err.lineno})"
        else:
            why = f"{type(err).__name__}: {(' '.join(str(err).split()) or 'no message')[:300]}"
        raise ScenarioError(f"{where}: {why}") from None
    if check:
        check_untouched(before, where)


def load_plugins(refs: list[str], base_dir: Path, where: Callable[[int], str]) -> list[PluginRef]:
    """Import the scenario's plugins in order, then the installed ones; a failure is one ScenarioError
    line after ``where(i)`` (file:line: plugins[i])."""
    records: list[PluginRef] = []
    for i, ref in enumerate(refs):
        with _plugin_import(f"{where(i)}: plugin {ref}"):
            record = import_plugin(ref, base_dir)
        if all(r.path != record.path for r in records):  # a file listed twice is one plugin
            records.append(record)
    return records + entry_point_plugins()


def entry_point_plugins() -> list[PluginRef]:
    """The installed packages' plugins (entry-point group ``harness.plugins``), imported once."""
    global _ENTRY_POINTS
    if _ENTRY_POINTS is None:
        found = []
        for point in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
            module = point.value.partition(":")[0].strip()
            where = f"entry point {point.name} = {point.value} (group {ENTRY_POINT_GROUP})"
            with _plugin_import(where, check=False):
                record = import_plugin(module, Path.cwd())
                if point.attr:  # "module:function": a function to call, as pytest's plugins may give
                    point.load()()
            found.append(record.model_copy(update={"ref": f"entry point {point.name}"}))
        _ENTRY_POINTS = found
    return list(_ENTRY_POINTS)


def load_recorded(plugins: list[PluginRef]) -> None:
    """In an arm's process: import its spec's plugins; one changed since planning is refused."""
    for plugin in plugins:
        if plugin.ref.startswith("entry point "):
            before = global_state()
            entry_point_plugins()
            check_untouched(before, "the installed plugins (entry points harness.plugins)")
            continue
        with _plugin_import(f"plugin {plugin.ref} ({plugin.path})"):
            now = import_plugin(plugin.module or plugin.path, Path(plugin.path).parent)
        if now.sha256 != plugin.sha256:
            raise ScenarioError(
                f"plugin {plugin.ref} ({plugin.path}) changed since the campaign was planned "
                f"(sha256 {now.sha256[:12]}, planned {plugin.sha256[:12]}): run harness run again"
            )


def sources_digest(refs: list[str], base_dir: Path, where: Callable[[int], str]) -> str:
    """sha256 of the scenario's ``sources:``: files and folders (relative to the scenario; folders
    recursively, no __pycache__ or dot folders) by relative name and content, ``pkg:NAME`` by version and
    RECORD; "" when none. Missing: one ScenarioError line after ``where(i)``."""
    h = hashlib.sha256()
    for i, ref in enumerate(refs):
        h.update(f"{ref}\0".encode())
        if ref.startswith("pkg:"):
            try:
                dist = importlib.metadata.distribution(ref[4:])
            except importlib.metadata.PackageNotFoundError:
                raise ScenarioError(f"{where(i)}: no installed package {ref[4:]!r}") from None
            h.update(f"{dist.version}\0".encode() + (dist.read_text("RECORD") or "").encode())
            continue
        root = (base_dir / Path(ref).expanduser()).resolve()
        if not root.exists():
            raise ScenarioError(f"{where(i)}: no such file or folder {root}")
        files = [root] if root.is_file() else sorted(root.rglob("*"))
        for file in files:
            parts = file.relative_to(root).parts[:-1]
            if file.is_file() and not any(p == "__pycache__" or p.startswith(".") for p in parts):
                h.update(f"{file.relative_to(root).as_posix()}\0".encode() + file.read_bytes())
    return h.hexdigest() if refs else ""


def unload_all() -> None:
    """Take back what every plugin imported here registered, and forget them (the next load imports)."""
    global _ENTRY_POINTS
    for key in list(_LOADED):
        _forget(key)
    _ENTRY_POINTS = None
