"""Gates: thresholds on a comparison that fail CI (``harness compare --gate FILE`` exits 1).

A gate file is a YAML or JSON mapping of the ``Gate`` fields; unknown keys and wrong types are
errors naming the file. ``check_gate`` returns one line per violation (empty: the gate passes).
The accuracy bounds come from the metric table in ``harness.compare.metrics``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.compare.metrics import ACCURACY_METRICS
from harness.compare.pairwise import Comparison
from harness.errors import HarnessError


class Gate(BaseModel):
    """Thresholds for ``harness compare --gate``: any violation makes the command exit non-zero."""

    model_config = ConfigDict(extra="forbid")

    min_psnr: float | None = None  # video PSNR, mean over frames (dB)
    min_psnr_frame: float | None = None  # video PSNR of the worst frame (dB)
    min_ssim: float | None = None
    min_ssim_frame: float | None = None
    min_audio_snr: float | None = None  # dB
    min_audio_cosine: float | None = None
    min_audio_logmel_cosine: float | None = None
    max_step_ratio: float | None = None  # B s/step / A s/step
    max_total_ratio: float | None = None  # B pipeline total / A pipeline total
    bitwise_video: bool = False  # every decoded frame identical
    bitwise_audio: bool = False  # every decoded sample identical
    bitwise_files: bool = False  # output.mp4 byte for byte
    require_valid_attention: bool = False  # both runs: requested op served every call, no fallback
    max_fallbacks: int | None = None  # attention fallbacks allowed in B, all ranks
    require_ok: bool = True  # both runs ended ok


def load_gate(path: Path | str) -> Gate:
    """A gate from a YAML or JSON mapping; unknown keys and wrong types are errors naming the file."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise HarnessError(f"{p}: gate file not found") from None
    except OSError as err:
        raise HarnessError(f"{p}: cannot read gate file ({err.strerror})") from None
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise HarnessError(
            f"{p}: not valid {'JSON' if p.suffix.lower() == '.json' else 'YAML'}: "
            f"{' '.join(str(err).split())}"
        ) from None
    if data is None or data == {}:
        raise HarnessError(f"{p}: gate defines no thresholds")
    if not isinstance(data, dict):
        raise HarnessError(f"{p}: gate must be a mapping of thresholds, got {type(data).__name__}")
    known = set(Gate.model_fields)
    for key in data:
        if key not in known:
            raise HarnessError(f"{p}: unknown gate key {key!r} (known: {', '.join(sorted(known))})")
    try:
        return Gate.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise HarnessError(f"{p}: gate key {loc!r}: {first['msg']}") from None


def _unavailable(cmp: Comparison) -> str:
    return "; ".join(cmp.notes) if cmp.notes else "not measured"


def check_gate(cmp: Comparison, gate: Gate) -> list[str]:
    """Violations, one line each; an empty list means the gate passes."""
    out: list[str] = []
    if gate.require_ok:
        for side, s in (("A", cmp.a), ("B", cmp.b)):
            if not s.ok:
                out.append(
                    f"run {side} ({s.key}) status is {s.status}" + (f": {s.reason}" if s.reason else "")
                )

    for m in ACCURACY_METRICS:  # lower bounds: min_psnr, min_ssim_frame, min_audio_snr, ...
        limit = getattr(gate, m.gate)
        if limit is None:
            continue
        value, what = m.get(cmp), m.gate_label(cmp)
        if value is None:
            out.append(f"{m.gate}: {what} unavailable ({_unavailable(cmp)})")
        elif math.isnan(value) or value < limit:
            out.append(f"{m.gate}: {what} {m.fmt(value)} < {m.fmt(limit)}")

    def high(value: float | None, limit: float | None, name: str, what: str) -> None:
        if limit is None:
            return
        if value is None:
            out.append(f"{name}: {what} unavailable (timing missing in a run)")
        elif value > limit:
            out.append(f"{name}: {what} {value:.3f} > {limit:.3f}")

    high(cmp.speed.s_per_step_ratio, gate.max_step_ratio, "max_step_ratio", "s/step ratio B/A")
    high(cmp.speed.total_ratio, gate.max_total_ratio, "max_total_ratio", "pipeline total ratio B/A")

    for flag, value, what in (
        (gate.bitwise_video, cmp.bitwise.video, "decoded video frames"),
        (gate.bitwise_audio, cmp.bitwise.audio, "decoded audio samples"),
        (gate.bitwise_files, cmp.bitwise.files, "output files"),
    ):
        if flag and value is not True:
            out.append(f"bitwise: {what} {'differ' if value is False else 'could not be compared'}")

    if gate.require_valid_attention:
        for side, s in (("A", cmp.a), ("B", cmp.b)):
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
