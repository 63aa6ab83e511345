"""Every emulator variant says what it models and whether that was measured (harness.emulator_provenance)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.attention import get_backend
from harness.attention.sage_emul import VARIANT_PROVENANCE, VARIANTS
from harness.emulator_provenance import badge_of, provenance_of

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
    assert badge_of(params) == "emulator of SageAttention2 d1a57a5 Triton, measured on H200"
    assert params["fidelity"].startswith("measured on one NVIDIA H200, 2026-12-03")
    assert badge_of(get_backend("sage_emul_aiter").params) == "emulator of aiter fav3_sage, not measured"
    assert badge_of({"provenance": {"kernel": "tampered"}}) == "" and badge_of(None) == ""


def test_numeric_options_away_from_the_variant_void_the_measured_figures():
    moved = get_backend("sage_emul_thuml", padded_keys="masked").params
    assert provenance_of(moved).changed == ["padded_keys"]
    assert badge_of(moved) == "emulator of SageAttention 1.0.6 sageattn, not measured with padded_keys changed"
    speed_only = get_backend("sage_emul_thuml", chunk_elems=1 << 16).params  # chunking changes no number
    assert badge_of(speed_only).endswith("measured on H200")


def test_1_0_6_s_measured_claim_is_what_its_evidence_holds():
    """The figures 1.0.6's variant cites: the H200 run of sage_attn2 (sageattention 1.0.6) beside
    sage_emul_thuml's default, per shape: rel L1 within 2 %, fitted scale within 0.005."""
    p = VARIANT_PROVENANCE["sageattn1_triton"]
    data = json.loads((REPO / p.fidelity.evidence).read_text())
    by: dict[str, dict] = {}
    for r in data["rows"]:
        if r["accuracy"] and r["label"] in ("sage_attn2", "sage_emul_thuml"):
            by.setdefault(r["shape"], {})[r["label"]] = r
    pairs = [(s, b["sage_attn2"], b["sage_emul_thuml"]) for s, b in by.items() if len(b) == 2]
    assert len(pairs) == 10
    for shape, kernel, emul in pairs:
        assert kernel["params"]["package_version"] == "1.0.6" and emul["params"]["variant"] == "sageattn1_triton"
        assert abs(emul["accuracy"]["rel_l1"] / kernel["accuracy"]["rel_l1"] - 1) <= 0.02, shape
        assert abs(emul["accuracy"]["scale"] - kernel["accuracy"]["scale"]) <= 0.005, shape
