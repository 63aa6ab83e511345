"""What both runners share (harness.runners.common): the probe's batching, the ranks' import path,
a synthetic folder's problems, a failed process's last line."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.runners.common import (
    ProbeBatch,
    last_line,
    probe_output,
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
