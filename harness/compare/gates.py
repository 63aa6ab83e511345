"""Gates: thresholds on a comparison that fail CI (``harness compare --gate FILE`` exits 1); a bad key or
value is one line naming file, line and key (exit 2). Accuracy bounds: the metric registry's (``gate_model``)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError, create_model

from harness.compare.pairwise import Comparison
from harness.errors import HarnessError
from harness.input_files import MAX_YAML_BYTES, read_input_text
from harness.metrics.metric import Metric, accuracy_metrics
from harness.registry import did_you_mean
from harness.strict_yaml import YamlProblem, line_map, load_yaml


def _threshold(description: str, **bounds: float) -> Any:
    """A finite number (int or float; never a bool, a string, NaN or infinity), or null for none."""
    return Field(None, strict=True, allow_inf_nan=False, description=description, **bounds)


Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class GateBase(BaseModel):
    """Thresholds for ``harness compare --gate``: any violation makes the command exit 1."""

    model_config = ConfigDict(extra="forbid", title="harness gate")


def _fields(metrics: tuple[Metric, ...]) -> dict[str, Any]:
    """The gate's fields: each accuracy metric's bound, in table order, then the other thresholds."""
    fields: dict[str, Any] = {}
    for m in metrics:
        ge, le = m.gate_range
        bounds = {k: v for k, v in (("ge", ge), ("le", le)) if v is not None}
        fields[m.gate] = (Number | None, _threshold(m.gate_doc, **bounds))
    return fields | {
        "max_step_ratio": (Number | None, _threshold("B s/step / A s/step (below 1: B is faster).", gt=0)),
        "max_total_ratio": (Number | None, _threshold("B pipeline total / A pipeline total.", gt=0)),
        "bitwise_video": (StrictBool, Field(False, description="Every decoded frame identical.")),
        "bitwise_audio": (StrictBool, Field(False, description="Every decoded audio sample identical.")),
        "bitwise_files": (StrictBool, Field(False, description="output.mp4 identical byte for byte.")),
        "require_valid_attention": (StrictBool, Field(
            False, description="Both runs: the requested backend served every call, nothing fell back."
        )),
        "max_fallbacks": (Annotated[StrictInt, Field(ge=0)] | None, Field(
            None, description="Attention fallbacks allowed in B, all ranks together."
        )),
        "require_ok": (StrictBool, Field(True, description="Both runs ended ok.")),
    }  # fmt: skip


@functools.cache
def _model(metrics: tuple[Metric, ...]) -> type[GateBase]:
    return create_model(
        "Gate", __base__=GateBase, __doc__=GateBase.__doc__, __module__=__name__, **_fields(metrics)
    )


def gate_model() -> type[GateBase]:
    """The gate file's model, a bound for every accuracy metric registered now."""
    return _model(tuple(accuracy_metrics()))


Gate = gate_model()  # the harness's own metrics


def gate_schema() -> dict[str, Any]:
    schema = gate_model().model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["description"] = (
        "Thresholds for `harness compare RUN_A RUN_B --gate FILE` (YAML or JSON). Numbers must be "
        "finite; a violation exits 1, a bad gate file exits 2."
    )
    return schema


def _no_duplicate_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse_gate(text: str, source: str = "<gate>", *, as_json: bool = False) -> GateBase:
    """A gate from the text of a YAML or JSON file; every problem is one line naming ``source``."""
    lines: dict[tuple, int] = {}
    if as_json:
        try:
            data = json.loads(text, object_pairs_hook=_no_duplicate_pairs)
        except (json.JSONDecodeError, ValueError, RecursionError) as err:
            raise HarnessError(f"{source}: not valid JSON: {' '.join(str(err).split())}") from None
    else:
        try:
            data, node = load_yaml(text)
        except YamlProblem as err:
            raise HarnessError(f"{source}{f':{err.line}' if err.line else ''}: {err.message}") from None
        lines = line_map(node) if node is not None else {}
    if data is None or data == {}:
        raise HarnessError(f"{source}: gate defines no thresholds")
    if not isinstance(data, dict):
        raise HarnessError(f"{source}: gate must be a mapping of thresholds, got {type(data).__name__}")

    def where(key: object) -> str:
        line = lines.get((str(key),))
        return f"{source}:{line}" if line else source

    model = gate_model()
    known = list(model.model_fields)
    for key in data:
        if key not in known:
            raise HarnessError(
                f"{where(key)}: unknown gate key {str(key)!r}{did_you_mean(str(key), known)} "
                f"(known: {', '.join(sorted(known))})"
            )
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        key = first["loc"][0] if first["loc"] else "?"
        got = first.get("input")
        shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
        msg = " ".join(f"{first['msg']} (got {shown})".split())
        raise HarnessError(f"{where(key)}: gate key {str(key)!r}: {msg}") from None


def load_gate(path: Path | str) -> GateBase:
    p = Path(path)
    text = read_input_text(p, "gate file", max_bytes=MAX_YAML_BYTES, allow_empty=True)
    return parse_gate(text, str(p), as_json=p.suffix.lower() == ".json")


def check_gate(cmp: Comparison, gate: GateBase) -> list[str]:
    """Violations, one line each; an empty list means the gate passes."""
    sides = (("A", cmp.a), ("B", cmp.b))
    out = [
        f"run {side} ({s.key}) status is {s.status}" + (f": {s.reason}" if s.reason else "")
        for side, s in sides
        if gate.require_ok and not s.ok
    ]
    for m in accuracy_metrics():  # min_psnr, min_ssim_frame, min_audio_snr, ... (max_ where lower is closer)
        limit = getattr(gate, m.gate, None)  # a gate made before the metric was registered has none
        if limit is None:
            continue
        value, what = m.get(cmp), m.gate_label(cmp)
        if value is None:
            out.append(f"{m.gate}: {what} unavailable ({'; '.join(cmp.notes) or 'not measured'})")
        elif m.breaks(value, limit):
            out.append(f"{m.gate}: {what} {m.fmt(value)} {m.beyond} {m.fmt(limit)}")

    for name, value, what in (
        ("max_step_ratio", cmp.speed.s_per_step_ratio, "s/step ratio B/A"),
        ("max_total_ratio", cmp.speed.total_ratio, "pipeline total ratio B/A"),
    ):
        limit = getattr(gate, name)
        if limit is not None and value is None:
            out.append(f"{name}: {what} unavailable (timing missing in a run)")
        elif limit is not None and value > limit:
            out.append(f"{name}: {what} {value:.3f} > {limit:g}")

    for flag, value, what in (
        (gate.bitwise_video, cmp.bitwise.video, "decoded video frames"),
        (gate.bitwise_audio, cmp.bitwise.audio, "decoded audio samples"),
        (gate.bitwise_files, cmp.bitwise.files, "output files"),
    ):
        if flag and value is not True:
            out.append(f"bitwise: {what} {'differ' if value is False else 'could not be compared'}")

    if gate.require_valid_attention:
        for side, s in sides:
            if s.valid is not True:
                why = "; ".join(s.invalid_reasons) or ("not recorded" if s.valid is None else "invalid")
                out.append(f"attention in run {side} ({s.key}) not valid: {why}")
    if gate.max_fallbacks is not None:
        if cmp.b.attn is None:
            out.append(f"max_fallbacks: attention calls of B ({cmp.b.key}) were not recorded")
        elif cmp.b.attn.fallbacks > gate.max_fallbacks:
            out.append(
                f"max_fallbacks: B ({cmp.b.key}) fell back {cmp.b.attn.fallbacks} time(s) > {gate.max_fallbacks}"
            )
    return out


class GateOutcome(BaseModel):
    file: str
    passed: bool  # no violation, and the comparison was measured
    violations: list[str]


def judge_gate(cmp: Comparison, gate: GateBase, file: Path | str) -> GateOutcome:
    violations = check_gate(cmp, gate)
    return GateOutcome(file=str(file), passed=not violations and cmp.measured, violations=violations)
