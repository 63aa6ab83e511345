"""What the runners share (harness.runners.common): the probe's batching, the ranks' import path,
a synthetic folder's problems, a failed process's last line, a child process's entry and a block
after profile and arm overrides."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError, ScenarioError
from harness.runners.common import (
    ProbeBatch,
    effective_block,
    last_line,
    probe_output,
    run_dir_main,
    run_writer,
    search_path,
    synthetic_problem,
)


def test_the_questions_of_a_group_are_asked_in_one_process_and_answered_once():
    batch, asked = ProbeBatch(), []

    def ask(questions):
        asked.append(list(questions))
        return [f"answer {q}" for q in questions]

    for key in ("a", "b"):
        batch.expect("g1", key, key)
    batch.expect("g2", "c", "c")
    assert batch.answer("g1", "b", "b", ask) == "answer b"
    assert asked == [["b", "a"]]  # the asking question first, then the group's others
    assert batch.answer("g1", "a", "a", ask) == "answer a" and len(asked) == 1  # from memory
    assert batch.answer("g2", "c", "c", ask) == "answer c" and asked[-1] == ["c"]
    batch.expect("g1", "a", "a")  # answered already: not asked again
    assert batch.answer("g1", "d", "d", ask) == "answer d" and asked[-1] == ["d"]


def test_the_import_path_keeps_its_order_and_each_entry_once():
    rest = os.pathsep.join(["/x", "", "/a", "/y"])
    assert search_path("/a", None, Path("/b"), rest).split(os.pathsep) == ["/a", "/b", "/x", "/y"]


def test_a_synthetic_folder_is_refused_when_it_holds_other_weights(tmp_path):
    def problem(have, nonempty):
        return synthetic_problem(
            "x.model_path", tmp_path, "synthetic thing", "M.json", have, {"seed": 0}, nonempty
        )

    assert problem(None, False) is None and problem({"seed": 0}, True) is None
    assert "not empty and not a synthetic thing (no M.json)" in problem(None, True)
    assert problem({"seed": 1}, True).endswith(
        "holds the synthetic thing {'seed': 1}, the scenario asks for {'seed': 0} (use another folder)"
    )


def test_a_process_that_fails_is_its_last_line(tmp_path):
    assert last_line("first\nthe error  \n\n") == "the error" and last_line("") == "no output"
    code = "import sys; print('[1]'); print('partial', file=sys.stderr); sys.exit(3)"
    assert probe_output([sys.executable, "-c", code], None, 60, "[") == (
        [1],
        "pre-flight probe failed (exit 3): partial",
    )
    found, why = probe_output([sys.executable, "-c", "print('no answer')"], None, 60, "[")
    assert found is None and why == "pre-flight probe failed (exit 0): no output"
    with pytest.raises(HarnessError, match=r"synthetic thing writer exited 1: .*No module named"):
        run_writer("no_such_module_here", [], "synthetic thing", tmp_path, lambda _: None, "M.json")


def test_a_child_process_says_its_usage_its_error_or_its_steps_in_one_line(tmp_path, capsys):
    from types import SimpleNamespace

    seen = []

    def run(run_dir):
        seen.append(run_dir)
        if run_dir.name == "bad":
            raise HarnessError("the spec is damaged")
        return SimpleNamespace(dit_steps=3, s_per_step=0.25)

    assert run_dir_main([], "harness.runners.x", run) == 2
    assert capsys.readouterr().err == "usage: python -m harness.runners.x RUN_DIR\n" and not seen
    assert run_dir_main([str(tmp_path / "bad")], "harness.runners.x", run) == 1
    assert capsys.readouterr().err == "error: the spec is damaged\n"
    assert run_dir_main([str(tmp_path / "ok")], "harness.runners.x", run) == 0
    assert capsys.readouterr().out == "done: 3 DiT steps, 0.2500 s/step\n" and seen[-1] == tmp_path / "ok"


def test_a_block_takes_the_profiles_then_the_arms_parameters():
    from types import SimpleNamespace

    from pydantic import BaseModel, field_validator

    class Block(BaseModel):
        steps: int = 2
        rest: dict = {}

        @field_validator("steps")
        @classmethod
        def _positive(cls, v: int) -> int:
            if v < 1:
                raise ValueError("steps must be positive")
            return v

    def scenario(**block):
        return SimpleNamespace(name="s", x=Block(**block), profiles={"fast": {"steps": 1, "a": {"b": 1}}})

    def arm(**overrides):
        return SimpleNamespace(name="cand", overrides=overrides)

    def merge(base, over):
        return {**base, **over}

    got = effective_block(scenario(rest={"k": 0}), arm(rest={"k": 1}, z=2), "fast", "x", "rest", merge)
    assert got == Block(steps=1, rest={"k": 1, "a": {"b": 1}, "z": 2})
    with pytest.raises(ScenarioError, match=r"^scenario s: runner 'y' needs a 'y' block$"):
        effective_block(scenario(), arm(), None, "y", "rest", merge)
    with pytest.raises(ScenarioError, match=r"^scenario s: arms\[cand\]\.overrides\.rest must be a mapping$"):
        effective_block(scenario(), arm(rest=1), None, "x", "rest", merge)
    bad = "scenario s: arm cand: x.steps: {} (after profile/arm overrides)"
    with pytest.raises(ScenarioError) as raw:
        effective_block(scenario(), arm(steps=0), None, "x", "rest", merge)
    assert str(raw.value) == bad.format("Value error, steps must be positive")
    with pytest.raises(ScenarioError) as tidy:
        effective_block(scenario(), arm(steps=0), None, "x", "rest", merge, tidy=True)
    assert str(tidy.value) == bad.format("steps must be positive")
