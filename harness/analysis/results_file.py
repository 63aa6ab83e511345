"""The one reader of a results.json from the world (``report --from-results``, ``harness history``, the job
summary): it travels, so it is held to bounds before anything is read of it, refused in one line (exit 3)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from harness.errors import Exit, HarnessError
from harness.input_files import check_input, read_input_text
from harness.records import positive_seconds, stage_seconds, step_count

MiB = 1 << 20
# The largest results.json of the committed examples is 0.35 MiB (3 arms, in-situ readings);
# 32 MiB is about a hundred such campaigns in one file.
MAX_RESULTS_BYTES = 32 * MiB
MAX_DEPTH = 64  # results.json nests about 8 deep
RUN_TIMES = ("s_per_step", "pipeline_total_s", "wall_total_s")


class ResultsFileError(HarnessError):
    """A results.json that does not hold (exit 3); the message names the file and what is wrong."""

    exit_code = Exit.RUN_FAILED


def load_results_json(path: Path, schema: str | None = None) -> dict[str, Any]:
    """The parsed results.json at ``path`` once it is within every bound above; else one line.
    ``schema``: the one the caller reads; a file of another is left to the caller's schema check
    (refused in one line) once its bounds and run times hold (None: every file is read as current)."""
    path = Path(path)
    p = check_input(path, "results.json")  # missing, a folder, unreadable: exit 2 as any input
    size = p.stat().st_size
    if size > MAX_RESULTS_BYTES:
        raise ResultsFileError(
            f"{path}: results.json of {size / MiB:.1f} MiB, over the {MAX_RESULTS_BYTES // MiB} MiB "
            "a results.json may have (not read)"
        )
    # empty, not UTF-8 (line and byte named), grown while read: one line, as any input file
    text = read_input_text(p, "results.json", max_bytes=MAX_RESULTS_BYTES)
    try:
        data = json.loads(text)
    except RecursionError:
        raise ResultsFileError(
            f"{path}: not a harness results.json (nested deeper than {MAX_DEPTH})"
        ) from None
    except ValueError as err:
        raise ResultsFileError(f"{path}: not a readable results.json (not JSON: {err})") from None
    problem = bounds_problem(data)
    is_dict = isinstance(data, dict)
    runs = is_dict and isinstance(data.get("runs"), list)
    if problem is None and runs:
        problem = timing_problem(data["runs"])
    # Another schema's structure is the schema check's to name; bounds and run times hold.
    current = schema is None or not is_dict or data.get("schema", schema) == schema
    if problem is None and current and not (runs and "campaign_id" in data):
        problem = "no campaign_id/runs" if is_dict else "not a JSON object"
    if problem:
        raise ResultsFileError(f"{path}: not a harness results.json ({problem})")
    return data


def bounds_problem(data: Any) -> str | None:
    """Why ``data`` (parsed JSON) is out of bounds: too deep, or a number that is not finite."""
    todo: list[tuple[Any, str, int]] = [(data, "", 1)]
    while todo:
        obj, where, depth = todo.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} at {where or 'the top'}"
        if isinstance(obj, dict):
            todo.extend((v, f"{where}.{k}" if where else str(k), depth + 1) for k, v in obj.items())
        elif isinstance(obj, list):
            todo.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(obj))
        elif isinstance(obj, float) and not math.isfinite(obj):
            return f"{where}: {obj} is not a finite number"
    return None


def timing_problem(runs: list[Any]) -> str | None:
    """Why a run's times cannot be a measurement (as timing.json is checked); None: they can."""
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            return f"runs[{i}]: not an object"
        steps, stages = run.get("step_seconds") or [], run.get("stages") or {}
        if not isinstance(steps, list) or not isinstance(stages, dict):
            return f"runs[{i}]: step_seconds or stages of the wrong type"
        values = [(f"step_seconds[{j}]", v, positive_seconds) for j, v in enumerate(steps)]
        values += [(name, run.get(name), positive_seconds) for name in RUN_TIMES]
        values += [(f"stages.{k}", v, stage_seconds) for k, v in stages.items()]
        values.append(("step_seconds", steps, step_count))
        for name, value, check in values:
            if value is None:
                continue
            try:
                number = isinstance(value, int | float) and not isinstance(value, bool)
                if check is not step_count and not number:
                    raise ValueError(f"{value!r} is not a number")
                check(value)
            except ValueError as err:
                return f"runs[{i}] ({run.get('key', '?')}): {name}: {err}"
    return None
