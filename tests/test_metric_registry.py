"""The metric registry (harness.metrics): every metric has what its readers need; each error energy
is its independent formula (SNR dB -> 10^(-dB/10), 1 - similarity, the MSE itself; NaN stays NaN);
the energy the verdict reads off a pair is the one the review reads off a comparison; and a metric
registered from outside (a lower-is-closer LPIPS-like distance, in this file alone) becomes a column
of the accuracy tables and an upper bound of the gate."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.analysis.energy import KINDS, PairErrors, is_identical
from harness.analysis.model import read_results
from harness.collect.models import AudioPairMetrics, VideoPairMetrics
from harness.compare.gates import Gate, check_gate, gate_model, gate_schema, parse_gate
from harness.metrics.metric import (
    METRICS,
    Headline,
    Metric,
    PrColumn,
    accuracy_metrics,
    energy_metrics,
    history_metrics,
    in_order,
    judged_energies,
)
from harness.report.accuracy import acc_headers, accuracy_section
from harness.report.comparison import comparison_headlines
from harness.report.pr import accuracy_table
from harness.scenario.verdict import VerdictRules

CPU_EXAMPLE = (
    Path(__file__).resolve().parents[1] / "reports" / "examples" / "cpu" / "e2e_3step" / "results.json"
)
RECORDS = {"video": VideoPairMetrics, "audio": AudioPairMetrics}


def test_every_metric_has_its_fields():
    metrics = in_order()
    assert [m.key for m in metrics] == [
        "video_mse", "psnr", "psnr_mean", "psnr_min", "ssim_mean", "ssim_min",
        "audio_snr", "audio_cosine", "audio_spectral", "audio_logmel_cosine",
    ]  # fmt: skip
    for m in metrics:
        assert METRICS.get(m.key) is m and m.label and m.unit in ("", "dB") and m.digits >= 0
        assert m.field in RECORDS[m.modality].model_fields, m.key  # read off the comparison's record
        if m.worst_frame:
            assert m.worst_frame in RECORDS[m.modality].model_fields and m.worst_label
        if m.gate:  # the bound follows the direction
            assert m.gate.startswith("min_" if m.higher_is_closer else "max_") and m.gate_doc
        if m.energy is not None:
            assert m.energy.key and m.energy.label
    assert len({m.order for m in metrics}) == len(metrics)
    assert len({m.gate for m in accuracy_metrics()}) == len(accuracy_metrics())
    # The names results.json and history.csv have always used.
    assert list(energy_metrics()) == [
        "video_mse",
        "video_1_ssim",
        "audio_error",
        "audio_spectral",
        "audio_logmel",
    ]
    assert judged_energies() == ("video_mse", "video_1_ssim", "audio_error", "audio_spectral")
    assert [m.history.column for m in history_metrics()] == [
        "psnr_pooled", "psnr_mean", "ssim_mean", "audio_snr", "audio_cosine",
    ]  # fmt: skip
    assert [m.gate for m in accuracy_metrics()] == [
        "min_psnr", "min_psnr_frame", "min_ssim", "min_ssim_frame", "min_audio_snr", "min_audio_cosine",
        "min_audio_logmel_cosine",
    ]  # fmt: skip


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)


def _db_energy(db: float) -> float:
    if math.isnan(db):
        return math.nan
    if db == math.inf:
        return 0.0
    if db == -math.inf:
        return math.inf
    return math.exp(-db * math.log(10) / 10)


def _one_minus(x: float) -> float:
    return max(1.0 - x, 0.0) if math.isfinite(x) else math.nan


INDEPENDENT = {  # energy key -> (metric key, the formula written apart from the registry)
    "video_mse": ("video_mse", lambda x: x),
    "video_1_ssim": ("ssim_mean", _one_minus),
    "audio_error": ("audio_snr", _db_energy),
    "audio_spectral": ("audio_spectral", lambda x: x),
    "audio_logmel": ("audio_logmel_cosine", _one_minus),
}
VALUES = st.one_of(
    st.floats(min_value=-300, max_value=300),  # dB and similarities alike (10^30 is still a float)
    st.floats(min_value=0, max_value=1e300),  # MSEs and spectral errors
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 1.0, -1.0]),
)


@pytest.mark.parametrize("energy", list(INDEPENDENT))
@given(value=VALUES)
def test_each_energy_is_its_formula_off_a_pair_and_off_a_comparison(energy, value):
    key, formula = INDEPENDENT[energy]
    m = METRICS.get(key)
    assert m.energy is not None and m.energy.key == energy
    want = formula(value)
    assert _same(m.energy.of(value), want)
    # The verdict reads it off a PairErrors, the review off a comparison: the same number.
    pair = PairErrors(values={m.key: value}, frames=7)
    assert _same(KINDS[energy].get(pair), want)
    if math.isfinite(want) and want < 1e300:  # the energy's value is the metric's value again
        assert math.isclose(m.energy.of(m.energy.value(want)), want, rel_tol=1e-9, abs_tol=1e-12)
    cmp = SimpleNamespace(
        **{"video": None, "audio": None, m.modality: SimpleNamespace(**{m.field: value}, frames=7)}
    )
    assert _same(m.energy_value(cmp), want)
    assert m.weight(cmp) == KINDS[energy].weight(pair) == (7 if m.modality == "video" else 1)


def test_a_pair_equal_to_the_reference_has_every_energy_zero_and_every_figure_at_its_best():
    for m in in_order():
        assert m.equal is not None, m.key  # every registered metric knows its value for equal output
        if m.energy is not None:
            assert m.energy.of(m.equal) == 0.0 and m.energy.value(0.0) == m.equal
    equal = PairErrors(values={m.key: m.equal for m in in_order()})
    assert is_identical(equal) and all(KINDS[k].get(equal) == 0.0 for k in KINDS)
    assert not is_identical(equal.model_copy(update={"values": {**equal.values, "video_mse": 1e-9}}))
    measured = PairErrors.measured("x", 1, None, None)
    assert measured.values == {}  # nothing measured: no value, never a perfect one


def test_snr_energy_ends():
    snr = METRICS.get("audio_snr").energy
    assert snr.of(math.inf) == 0.0 and snr.of(-math.inf) == math.inf and math.isnan(snr.of(math.nan))
    assert snr.of(10.0) == pytest.approx(0.1) and snr.of(0.0) == 1.0
    assert snr.of(-4000.0) == math.inf and snr.of(4000.0) == 0.0  # past the floats: no OverflowError
    assert math.isnan(METRICS.get("ssim_mean").energy.of(math.nan))  # never read as perfect
    assert METRICS.get("audio_snr").energy_value(SimpleNamespace(audio=None)) is None


def test_a_scenario_states_the_spread_of_judged_energies_only():
    assert VerdictRules(floor_log_sd={"video_1_ssim": 0.02}).floor_log_sd == {"video_1_ssim": 0.02}
    with pytest.raises(ValueError, match="unknown kind 'audio_logmel'"):
        VerdictRules(floor_log_sd={"audio_logmel": 0.1})


class LpipsVideo(VideoPairMetrics):
    """A video record as a collector that measures LPIPS would write it."""

    lpips: float | None = None


LPIPS = Metric("lpips", "video LPIPS", "video", "lpips", 35, higher_is_closer=False, digits=4, column="LPIPS",
               gate="max_lpips", gate_doc="LPIPS distance of B to A, mean over frames.", gate_range=(0, None))  # fmt: skip


@pytest.fixture
def lpips():
    """LPIPS registered for one test, as its own module would register it, and taken back after."""
    METRICS.register(LPIPS.key, LPIPS)
    try:
        yield LPIPS
    finally:
        METRICS.unregister(LPIPS.key)


def test_a_new_metric_is_a_column_of_the_accuracy_tables_and_an_upper_bound_of_the_gate(lpips):
    res = read_results(CPU_EXAMPLE)
    shown = [res.comparison_for(r.key) for r in res.primary_runs]
    c = next(c for c in shown if c is not None and c.video is not None and c.a.ok and c.b.ok)
    far = c.model_copy(update={"video": LpipsVideo(**c.video.model_dump(), lpips=0.25)})
    res.comparisons[res.comparisons.index(c)] = far

    headers = acc_headers()
    assert headers.index("LPIPS") == headers.index("SSIM mean") + 1  # its order, between the SSIM columns
    sec = accuracy_section(res)
    per_run = next(t for t in sec.tables if t.title == "Per run")
    row = next(r for r in per_run.rows if r[0] == far.b.key)
    assert row[per_run.headers.index("LPIPS")] == "0.2500"
    assert all(len(r) == len(per_run.headers) for r in per_run.rows)  # the codec row too
    for title in ("Noise floor band", "Per arm over seeds"):
        table = next(t for t in sec.tables if t.title.startswith(title))
        assert "video LPIPS" in table.headers and all(len(r) == len(table.headers) for r in table.rows)

    gate = parse_gate("max_lpips: 0.1\n", "g.yaml")
    assert check_gate(far, gate) == ["max_lpips: video LPIPS 0.2500 > 0.1000"]
    assert check_gate(far, parse_gate("max_lpips: 0.3\n", "g.yaml")) == []
    assert check_gate(c, gate) == ["max_lpips: video LPIPS unavailable (not measured)"]  # a record without it
    nan = c.model_copy(update={"video": LpipsVideo(**c.video.model_dump(), lpips=math.nan)})
    assert check_gate(nan, gate) == ["max_lpips: video LPIPS nan > 0.1000"]
    schema = gate_schema()["properties"]["max_lpips"]
    assert schema["description"] == LPIPS.gate_doc and {"type": "number", "minimum": 0} in schema["anyOf"]
    with pytest.raises(Exception, match="greater than or equal to 0"):
        parse_gate("max_lpips: -1\n", "g.yaml")


def test_a_new_metric_with_a_headline_and_a_pr_column_is_in_harness_compare_and_pr_md():
    m = dataclasses.replace(LPIPS, order=45, headline=Headline("LPIPS {}", opens=True),
                            pr=PrColumn("LPIPS (SSIM min)", "ssim_min"))  # fmt: skip
    res = read_results(CPU_EXAMPLE)
    c = next(c for c in res.comparisons if c.video is not None and not c.bitwise.identical)
    far = c.model_copy(update={"video": LpipsVideo(**c.video.model_dump(), lpips=0.25)})
    before = accuracy_table(res)
    METRICS.register(m.key, m)
    try:
        line = next(x for x in comparison_headlines(far) if x.startswith(("accuracy", "noise floor")))
        assert f"(frame {c.video.ssim_min_frame}); LPIPS 0.2500" in line  # after the SSIM clause, its order
        assert "LPIPS" not in next(
            x for x in comparison_headlines(c) if x.startswith(("accuracy", "noise floor"))
        )
        table = [row.split(" | ") for row in accuracy_table(res)]  # no arm aggregates it: its cells say so
        old = [row.split(" | ") for row in before]
        at = table[0].index("LPIPS (SSIM min)")
        assert table[0][at - 1] == "SSIM (min frame)"  # in its order, after the SSIM column
        assert [r[:at] + r[at + 1 :] for r in (table[0], *table[2:])] == [old[0], *old[2:]]
        assert {r[at] for r in table[2:]} == {"n/a"} and len(table) > 2
    finally:
        METRICS.unregister(m.key)
    assert accuracy_table(res) == before


def test_a_metric_taken_back_leaves_the_harness_as_it_was(lpips):
    assert "max_lpips" in gate_model().model_fields and "LPIPS" in acc_headers()
    METRICS.unregister(lpips.key)
    assert gate_model() is Gate and "max_lpips" not in Gate.model_fields and "LPIPS" not in acc_headers()
    METRICS.register(lpips.key, lpips)  # the fixture takes it back again
