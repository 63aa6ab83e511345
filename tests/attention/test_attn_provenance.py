"""Every emulator variant says what it models and whether that was measured (harness.emulator_provenance)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from harness.attention.registry import get_backend
from harness.attention.sage_emul import VARIANT_PROVENANCE, VARIANTS
from harness.emulator_provenance import provenance_of
from harness.kernels.results import KernelsResult
from harness.store import read_record

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_names_its_kernel_and_its_fidelity(variant):
    p = VARIANT_PROVENANCE[variant]
    assert p.variant == variant and p.kernel.package and p.kernel.function and p.kernel.short
    if p.fidelity.measured:
        assert p.fidelity.machine and p.fidelity.date and p.fidelity.agreement and p.fidelity.evidence
        assert (REPO / p.fidelity.evidence).is_file(), p.fidelity.evidence
        assert p.badge().endswith(f"measured on {p.fidelity.machine_short}")
    else:
        assert p.fidelity.unmeasured and p.badge().endswith("not measured")


def test_the_provenance_travels_in_the_params_and_reads_back():
    backend = get_backend("sage_emul_thuml", variant="sageattn2_triton")
    params = json.loads(json.dumps(backend.params))  # as a record holds it
    assert provenance_of(params) == VARIANT_PROVENANCE["sageattn2_triton"]
    assert provenance_of(params).badge() == "emulator of SageAttention2 d1a57a5 Triton, measured on H200"
    assert params["fidelity"].startswith("measured on one NVIDIA H200, 2026-12-03")
    assert (
        provenance_of(get_backend("sage_emul_aiter").params).badge()
        == "emulator of aiter fav3_sage, not measured"
    )
    assert provenance_of({"provenance": {"kernel": "tampered"}}) is None and provenance_of(None) is None


def test_numeric_options_away_from_the_variant_void_the_measured_figures():
    moved = get_backend("sage_emul_thuml", padded_keys="masked").params
    assert provenance_of(moved).changed == ["padded_keys"]
    assert (
        provenance_of(moved).badge()
        == "emulator of SageAttention 1.0.6 sageattn, not measured with padded_keys changed"
    )
    speed_only = get_backend("sage_emul_thuml", chunk_elems=1 << 16).params  # chunking changes no number
    assert provenance_of(speed_only).badge().endswith("measured on H200")


@pytest.mark.parametrize("variant", [v for v, p in sorted(VARIANT_PROVENANCE.items()) if p.fidelity.measured])
def test_a_measured_claim_is_what_its_evidence_holds(variant):
    """The kernels.json a measured variant cites (harness kernels, kernel beside emulator on an
    H200) pairs that variant with the kernel it names and agrees on every shape, within the
    figures its provenance states: rel L1 within 1.5 %, fitted scale within 0.001."""
    p = VARIANT_PROVENANCE[variant]
    result = read_record(REPO / p.fidelity.evidence, KernelsResult)
    (found,) = [a for a in result.agreement if a.variant == variant and not a.changed]
    assert found.word == "agrees" and len(found.shapes) == 10 and found.models_short == p.kernel.short
    assert found.kernel_package == p.kernel.package_choice and found.kernel_function == p.kernel.function
    assert max(abs(s.ratio - 1) for s in found.shapes) <= 0.015
    assert max(abs(s.scale_diff) for s in found.shapes) <= 0.001
    lo, hi = min(s.emulator_rel_l1 for s in found.shapes), max(s.emulator_rel_l1 for s in found.shapes)
    stated = re.search(r"\(([0-9.]+) to ([0-9.]+)\)", p.fidelity.agreement)
    assert (
        stated
        and math.isclose(float(stated[1]), lo, rel_tol=5e-3)
        and math.isclose(float(stated[2]), hi, rel_tol=5e-3)
    )
    assert "H200" in found.machine and found.date == p.fidelity.date
