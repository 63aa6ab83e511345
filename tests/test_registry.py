"""harness.registry: one mechanism for every name the harness looks up (objects or lazy
"module:attr" strings, a base-class check, did-you-mean on unknown names)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from harness.errors import Exit, HarnessError
from harness.registry import Registry, UnknownName, did_you_mean, import_ref


class Base:
    pass


class Good(Base):
    pass


class Other:
    pass


def test_objects_by_name_and_as_decorator():
    reg: Registry[type[Base]] = Registry("widget", base=Base)
    assert reg.register("good", Good) is Good

    @reg.register("deco")
    class Deco(Base):
        pass

    assert reg.get("good") is Good and reg.get("deco") is Deco
    assert reg.names() == ["deco", "good"] and "good" in reg and "nope" not in reg


def test_the_base_check_takes_subclasses_and_instances_and_refuses_the_rest():
    reg: Registry[object] = Registry("widget", base=Base)
    reg.register("cls", Good)
    reg.register("inst", Good())
    with pytest.raises(TypeError, match="widget 'bad': Other is not a Base"):
        reg.register("bad", Other)
    with pytest.raises(TypeError, match="is not a Base"):
        reg.register("bad", 3)
    assert "bad" not in reg


def test_a_name_is_registered_once():
    reg: Registry[type] = Registry("widget")
    reg.register("a", Good)
    reg.register("a", Good)  # the same object again (a module imported twice): nothing changes
    with pytest.raises(ValueError, match="widget 'a' is already registered by Good"):
        reg.register("a", Other)
    assert reg.get("a") is Good


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """A module on sys.path that nothing has imported yet; it registers itself when imported."""
    name = f"registry_plugin_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from tests_registry_target import REG, Base

            @REG.register("eager")
            class Eager(Base):
                pass

            class Lazy(Base):
                pass

            class NotBase:
                pass
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


@pytest.fixture
def target(monkeypatch):
    """The registry the plug-in module registers into, importable by name."""
    import types

    mod = types.ModuleType("tests_registry_target")
    mod.REG = Registry("plug-in", base=Base)
    mod.Base = Base
    monkeypatch.setitem(sys.modules, "tests_registry_target", mod)
    return mod.REG


def test_a_lazy_entry_is_imported_on_first_use_only(target, plugin_module):
    target.register("lazy", lazy=f"{plugin_module}:Lazy")
    assert target.names() == ["lazy"] and "lazy" in target
    assert plugin_module not in sys.modules, "registering a lazy entry imports nothing"
    got = target.get("lazy")
    assert got.__name__ == "Lazy" and got.__module__ == plugin_module
    assert target.get("lazy") is got
    assert target.get("eager").__name__ == "Eager"  # the module registered it when it was imported


def test_a_lazy_entry_the_module_registers_itself_is_one_entry(target, plugin_module):
    target.register("eager", lazy=f"{plugin_module}:Eager")
    cls = target.get("eager")  # the import registers Eager under "eager": the same entry, no clash
    assert cls.__name__ == "Eager" and target.names() == ["eager"]


def test_a_lazy_entry_is_checked_against_the_base_when_loaded(target, plugin_module):
    target.register("wrong", lazy=f"{plugin_module}:NotBase")
    with pytest.raises(TypeError, match="plug-in 'wrong': NotBase is not a Base"):
        target.get("wrong")


def test_a_lazy_base_class_is_resolved_on_first_check():
    reg: Registry[object] = Registry("error kind", base="harness.errors:HarnessError")
    reg.register("usage", lazy="harness.errors:UsageError")
    assert reg.get("usage").__name__ == "UsageError"
    with pytest.raises(TypeError, match="is not a HarnessError"):
        reg.register("exit", Exit)


def test_lazy_references_must_be_module_colon_attr():
    reg: Registry[object] = Registry("widget")
    for bad in ("harness.errors", ":x", "harness.errors:"):
        with pytest.raises(ValueError, match="'module:attr'"):
            reg.register("x", lazy=bad)
    assert import_ref("harness.errors:Exit.BAD_INPUT") == Exit.BAD_INPUT


def test_unregister_removes_loaded_and_lazy_entries():
    reg: Registry[object] = Registry("widget")
    reg.register("a", Good)
    reg.register("b", lazy="harness.errors:UsageError")
    reg.unregister("a")
    reg.unregister("b")
    assert reg.names() == []


def test_an_unknown_name_is_one_line_with_a_did_you_mean():
    reg: Registry[object] = Registry("runner")
    reg.register("builtin", Good)
    reg.register("lightx2v", lazy="harness.errors:UsageError")
    with pytest.raises(UnknownName) as info:
        reg.get("builtn")
    assert str(info.value) == "unknown runner 'builtn'; did you mean 'builtin'? (known: builtin, lightx2v)"
    assert isinstance(info.value, HarnessError) and info.value.exit_code == Exit.BAD_INPUT
    assert isinstance(info.value, LookupError)
    assert reg.unknown_message("zzz") == "unknown runner 'zzz' (known: builtin, lightx2v)"
    assert Registry("thing").unknown_message("x") == "unknown thing 'x' (known: none)"
    assert did_you_mean("torch_sdpx", ["torch_sdpa", "exact"]) == "; did you mean 'torch_sdpa'?"
