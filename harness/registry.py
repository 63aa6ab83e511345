"""One registry for everything looked up by name (runners, executors, backends, scenario parts,
metrics): a name maps to an object of the registry's base, or to a lazy ``"module:attr"`` imported
when first asked (``harness --help`` imports no runner); an unknown name is one line with a
did-you-mean."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from harness.errors import HarnessError

T = TypeVar("T")


# Open recordings of registrations: what a plugin added, to name it and take it back.
_RECORDINGS: list[list[Registration]] = []


@dataclasses.dataclass(frozen=True)
class Registration:
    registry: Registry[Any]
    name: str
    module: str  # where the registered object is defined (a lazy entry: the module it names)


@contextlib.contextmanager
def recording_registrations() -> Iterator[list[Registration]]:
    """Every registration made inside the block, in order."""
    made: list[Registration] = []
    _RECORDINGS.append(made)
    try:
        yield made
    finally:
        _RECORDINGS.remove(made)


class UnknownName(HarnessError, LookupError):
    """A name no registry entry has (exit 2: it comes from the user's input)."""


def import_ref(ref: str) -> Any:
    """The object a ``"module:attr"`` (or ``"module:attr.sub"``) string names."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"expected 'module:attr', got {ref!r}")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def did_you_mean(name: str, known: list[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest known name, or ``""``."""
    hint = difflib.get_close_matches(str(name), known, n=1)
    return f"; did you mean {hint[0]!r}?" if hint else ""


class Registry(Generic[T]):
    """Named entries of one kind (``what``); ``base``: a class or a lazy ``"module:attr"`` naming one
    (a low module can hold the registry of classes defined higher up), None checks nothing."""

    def __init__(self, what: str, *, base: type | str | None = None):
        self.what = what
        self._base = base
        self._entries: dict[str, T] = {}
        self._lazy: dict[str, str] = {}

    def register(self, name: str, obj: Any = None, *, lazy: str | None = None) -> Any:
        """Register ``obj`` (or ``lazy``: "module:attr"; neither: a decorator) under ``name``, once: the
        same object again is a no-op, another is a ValueError."""
        if obj is None and lazy is None:
            return lambda target: self.register(name, target)
        if lazy is not None:
            if obj is not None:
                raise ValueError(f"{self.what} {name!r}: give an object or a lazy reference, not both")
            module, sep, attr = lazy.partition(":")
            if not (module and sep and attr):
                raise ValueError(f"{self.what} {name!r}: lazy reference must be 'module:attr', got {lazy!r}")
            if name in self._entries or self._lazy.get(name, lazy) != lazy:
                raise ValueError(f"{self.what} {name!r} is already registered")
            self._lazy[name] = lazy
            self._recorded(name, module)
            return None
        self._check_base(name, obj)
        held = self._entries.get(name)
        if held is not None and held is not obj:
            raise ValueError(f"{self.what} {name!r} is already registered by {_label(held)}")
        if held is None and name in self._lazy:
            # The lazy entry's module registers its object on import: the same entry if it is the target.
            target = self._lazy[name]
            module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
            if not (module and qualname and f"{module}:{qualname}" == target):
                raise ValueError(f"{self.what} {name!r} is already registered as {target}")
            del self._lazy[name]
        if held is None:
            self._recorded(name, getattr(obj, "__module__", "") or "")
        self._entries[name] = obj
        return obj

    def _recorded(self, name: str, module: str) -> None:
        for made in _RECORDINGS:
            made.append(Registration(self, name, module))

    def unregister(self, name: str) -> None:
        """Remove an entry (for tests that register one of their own)."""
        self._entries.pop(name, None)
        self._lazy.pop(name, None)

    def names(self) -> list[str]:
        """Every registered name, loaded or not, sorted."""
        return sorted({*self._entries, *self._lazy})

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._lazy

    def get(self, name: str) -> T:
        """The object registered under ``name`` (importing a lazy one); UnknownName otherwise."""
        if name in self._entries:
            return self._entries[name]
        if name not in self._lazy:
            raise UnknownName(self.unknown_message(name))
        obj = import_ref(self._lazy[name])
        self._check_base(name, obj)
        self._lazy.pop(name, None)
        self._entries[name] = obj  # the module may have registered it on import already
        return obj

    def unknown_message(self, name: str) -> str:
        """``unknown runner 'x'; did you mean 'y'? (known: a, b)``: one line."""
        known = self.names()
        listed = ", ".join(known) if known else "none"
        return f"unknown {self.what} {name!r}{did_you_mean(name, known)} (known: {listed})"

    def _check_base(self, name: str, obj: Any) -> None:
        if isinstance(self._base, str):
            self._base = import_ref(self._base)
        base = self._base
        ok = base is None or (issubclass(obj, base) if isinstance(obj, type) else isinstance(obj, base))
        if not ok:
            raise TypeError(
                f"{self.what} {name!r}: {_label(obj)} is not a {base.__name__} (nor a subclass or an instance of it)"
            )


def _label(obj: Any) -> str:
    return getattr(obj, "__name__", None) or type(obj).__name__


# The harness's own entries, as lazy ``"module:attr"`` strings: this low module names runner modules
# without importing them (the scenario core names no runner). Adding a runner is one module plus one
# line here, or ``RUNNERS.register`` from a plug-in; attention backends register in
# ``harness.attention.registry``.
PART = "harness.scenario.parts:ScenarioPart"

# Runner classes by the name a scenario's `runner:` gives.
RUNNERS: Registry[Any] = Registry("runner", base="harness.runners.base:Runner")
RUNNERS.register("builtin", lazy="harness.runners.builtin:BuiltinRunner")
RUNNERS.register("lightx2v", lazy="harness.runners.lightx2v.runner:LightX2VRunner")
RUNNERS.register("diffusers", lazy="harness.runners.diffusers.runner:DiffusersRunner")

# What a runner adds to the scenario (its block, arm fields, checks); a runner without an entry
# adds nothing.
RUNNER_SCENARIO: Registry[Any] = Registry("runner scenario part", base=PART)
RUNNER_SCENARIO.register("builtin", lazy="harness.runners.builtin:SCENARIO_PART")
RUNNER_SCENARIO.register("lightx2v", lazy="harness.runners.lightx2v.schema:SCENARIO_PART")
RUNNER_SCENARIO.register("diffusers", lazy="harness.runners.diffusers.schema:SCENARIO_PART")

# Scenario kinds other than "e2e" (which the core is), by the name `kind:` gives.
SCENARIO_KINDS: Registry[Any] = Registry("scenario kind", base=PART)
SCENARIO_KINDS.register("kernels", lazy="harness.kernels.schema:SCENARIO_PART")

# Executors by the name `executor.kind` and `--executor` give; the class is built with options.
EXECUTORS: Registry[Any] = Registry("executor", base="harness.executors.base:Executor")
EXECUTORS.register("local", lazy="harness.executors.process:LocalExecutor")
EXECUTORS.register("slurm", lazy="harness.executors.slurm:SlurmExecutor")
