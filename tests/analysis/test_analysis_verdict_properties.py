"""Properties of the verdict on generated campaigns (hypothesis): zeros, identical seeds, NaN, inf, one
seed, one run, huge and tiny energies. It never raises; identical output reads identical; more error
never reads better; the order of seeds and floor runs changes nothing; a planted defect is never
within."""

from __future__ import annotations

import math
import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verdict_testutil import campaigns, positive

from harness.analysis.energy import PairErrors
from harness.analysis.verdict import judge_numbers
from harness.rule import WORDS
from harness.scenario.verdict import VerdictRules

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The order of worth: a word further right never comes from less error.
RANK = {"identical": 0, "within": 1, "inconclusive": 2, "outside": 3}


@FAST
@given(campaigns())
def test_never_raises_and_always_has_a_word_and_a_line(c):
    cands, floors, insitu = c
    v = judge_numbers("c", cands, floors, insitu=insitu)
    assert v.word in WORDS and v.text.startswith(v.word)
    for r in v.energy:  # every bound a number, never an overflow
        assert r.ratio_ci is None or all(not math.isnan(x) for x in r.ratio_ci)


@FAST
@given(campaigns())
def test_bitwise_identical_reads_identical(c):
    cands, floors, _ = c
    same = [x.model_copy(update={"identical": True}) for x in cands]
    v = judge_numbers("c", same, floors)
    assert v.word == "identical" and v.text.startswith(f"identical ({len(same)} of {len(same)} seed(s))")


@FAST
@given(campaigns(value=st.one_of(st.just(0.0), positive)), st.floats(1.0, 1e6))
def test_more_error_never_reads_better(c, k):
    cands, floors, _ = c
    worse = [
        x.model_copy(
            update={"values": {**x.values, **{m: x.values[m] * k for m in ("video_mse", "audio_spectral")}}}
        )
        for x in cands
    ]
    a, b = judge_numbers("c", cands, floors), judge_numbers("c", worse, floors)
    if a.word in RANK and b.word in RANK:
        assert RANK[b.word] >= RANK[a.word], (a.text, b.text)


@FAST
@given(campaigns(), st.randoms())
def test_the_order_of_seeds_and_floor_runs_changes_nothing(c, rnd: random.Random):
    cands, floors, insitu = c
    a = judge_numbers("c", cands, floors, insitu=insitu)
    sc, sf = list(cands), list(floors)
    rnd.shuffle(sc)
    rnd.shuffle(sf)
    b = judge_numbers("c", sc, sf, insitu=insitu)
    assert a.word == b.word and a.decided_by == b.decided_by
    same = a.ratio == b.ratio or (
        a.ratio is not None and b.ratio is not None and math.isclose(a.ratio, b.ratio)
    )
    assert same or (a.ratio is not None and math.isnan(a.ratio) and math.isnan(b.ratio))


@FAST
@given(
    st.integers(3, 5),
    st.floats(0.05, 0.3),  # the run-to-run sd of the log energy
    st.floats(3.0, 50.0),  # the defect, in multiples of the tolerance
    st.integers(0, 2**32 - 1),
)
def test_a_planted_defect_is_never_within(n_seeds, sd, k, seed):
    rules, rng = VerdictRules(), np.random.default_rng(seed)
    floors, cands = [], []
    for s in range(n_seeds):
        base = float(np.exp(rng.normal(0, 1)))
        floors += [PairErrors(key=f"f{i}@{s}", seed=s, values={"video_mse": base * float(np.exp(rng.normal(0, sd))),
                              "ssim_mean": 0.99}) for i in range(3)]  # fmt: skip
        cands.append(PairErrors(key=f"c@{s}", seed=s, values={"ssim_mean": 0.99,
                                "video_mse": k * rules.tolerance * base * float(np.exp(rng.normal(0, sd)))}))  # fmt: skip
    v = judge_numbers("c", cands, floors, rules=rules)
    assert v.word != "within", v.text
