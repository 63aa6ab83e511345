"""harness.rule: the one interval-to-word rule, the one way words combine, and the statistics every
judgement shares, each against its definition written out independently here."""

from __future__ import annotations

import ast
import math
from itertools import permutations
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from harness.rule import (
    DETECTABLE_HELP,
    IDENTICAL,
    INCOMPLETE,
    INCONCLUSIVE,
    INVALID,
    MEANINGS,
    NOT_RUN,
    OUTSIDE,
    SEVERITY,
    TOLERANCE_HELP,
    WITHIN,
    WORDS,
    combine,
    known,
    pooled_sd,
    ratio_rule_text,
    severity,
    t_quantile,
    t_two_sided_p,
    verdict_rule_text,
    word,
)

finite = st.floats(-1e6, 1e6, allow_nan=False)


@given(finite, finite, finite)
def test_the_word_is_where_the_interval_lies(a, b, bound):
    lo, hi = min(a, b), max(a, b)
    w = word(lo, hi, bound)
    assert w == ("within" if hi <= bound else "outside" if lo > bound else "inconclusive")
    # A similarity with a lower bound is the same rule mirrored.
    assert word(lo, hi, bound, higher_is_worse=False) == word(-hi, -lo, -bound)


def test_the_edges_and_nan():
    assert word(1.0, 2.0, 2.0) == "within"  # at the bound: "at most 2x"
    assert word(2.0, 3.0, 2.0) == "inconclusive"  # reaching down to the bound decides nothing
    assert word(math.nextafter(2.0, 3.0), 3.0, 2.0) == "outside"
    assert word(0.99, 1.0, 0.99, higher_is_worse=False) == "within"  # cosine at least 0.99
    assert word(math.nan, 1.0, 2.0) == "inconclusive"
    assert word(1.0, 1.5, math.nan) == "inconclusive"


@given(st.lists(st.sampled_from([*SEVERITY, "shown", ""]), max_size=8))
def test_words_combine_to_the_most_severe_in_any_order(words):
    got = combine(words)
    parts = [w for w in words if w in SEVERITY]
    if not parts:
        assert got == "incomplete"  # the default when nothing judged
    else:
        assert got == min(parts, key=SEVERITY.index)
    assert got == combine(list(reversed(words)))
    assert combine(words, empty="x") == (got if parts else "x")


def test_within_needs_every_part():
    assert combine(["within", "within"]) == "within"
    assert combine(["within", "inconclusive"]) == "inconclusive"
    assert combine(["inconclusive", "incomplete"]) == "incomplete"
    assert all(combine(p) == "outside" for p in permutations(["within", "outside", "incomplete"]))
    assert set(SEVERITY) <= set(WORDS)


@given(st.lists(st.lists(st.floats(-1e3, 1e3, allow_nan=False), max_size=5), max_size=5))
def test_pooled_sd_is_the_within_group_spread(groups):
    sd, df = pooled_sd(groups)
    big = [np.asarray(g) for g in groups if len(g) >= 2]
    if not big:
        assert (sd, df) == (None, 0.0)
        return
    ss = sum(float(np.var(g, ddof=1)) * (len(g) - 1) for g in big)
    want_df = sum(len(g) - 1 for g in big)
    assert df == want_df
    assert sd == pytest.approx(math.sqrt(ss / want_df), rel=1e-9, abs=1e-9)


@given(st.floats(0.001, 0.999), st.one_of(st.floats(1.0, 1e4), st.just(math.inf)))
def test_t_helpers_agree_with_scipy_stats(p, df):
    want = stats.norm.ppf(p) if math.isinf(df) else stats.t.ppf(p, df)
    assert t_quantile(p, df) == pytest.approx(want, rel=1e-7, abs=1e-9)
    t = abs(t_quantile(p, df))
    tail = stats.norm.sf(t) if math.isinf(df) else stats.t.sf(t, df)
    assert t_two_sided_p(-t, df) == pytest.approx(2 * tail, rel=1e-7, abs=1e-12)


def test_the_words_are_the_strings_results_json_stores():
    assert WORDS == ("identical", "within", "outside", "inconclusive", "incomplete", "invalid", "not run")
    assert (IDENTICAL, WITHIN, OUTSIDE, INCONCLUSIVE, INCOMPLETE, INVALID, NOT_RUN) == WORDS
    assert SEVERITY == ("outside", "incomplete", "inconclusive", "within")
    assert set(MEANINGS) == set(WORDS) and all(MEANINGS.values())


def test_severity_ranks_within_lowest_and_a_non_part_as_undecided():
    ranks = [severity(w) for w in ("within", "inconclusive", "incomplete", "outside")]
    assert ranks == sorted(ranks) and len(set(ranks)) == 4
    assert severity("") == severity("shown") == severity("inconclusive")
    # the most severe part is the one combine picks
    parts = ["within", "incomplete", "inconclusive"]
    assert max(parts, key=severity) == combine(parts)


def test_known_keeps_a_word_and_reads_anything_else_as_undecided():
    assert [known(w) for w in WORDS] == list(WORDS)
    assert known("") == known("pass") == known("Within") == "inconclusive"


def test_the_rule_sentences_say_each_word_they_name():
    for text in (TOLERANCE_HELP, ratio_rule_text(2.0), verdict_rule_text(2.0)):
        assert "within" in text.lower() and "inconclusive" in text
    assert "2x" in ratio_rule_text(2.0) and "(3.01 dB of PSNR)" in verdict_rule_text(2.0)
    assert "3x" in verdict_rule_text(3.0) and "incomplete" in verdict_rule_text(3.0)
    assert "inconclusive" in DETECTABLE_HELP


# The modules that judge or word a verdict: each names the words by harness.rule's constants.
JUDGING = (
    "analysis/intervals.py", "analysis/structure.py", "analysis/stat_rule.py", "analysis/insitu.py",
    "analysis/insitu_model.py", "analysis/verdict.py", "analysis/verdict_model.py",
    "analysis/sentences.py", "analysis/analyze.py",
    "report/cells.py", "report/accuracy.py", "scenario/verdict.py",
)  # fmt: skip


def _spelled_words(tree: ast.AST) -> list[str]:
    """The verdict words a module spells as a string literal (an f-string's pieces aside: prose)."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.JoinedStr):
            continue
        if isinstance(node, ast.Constant) and node.value in WORDS:
            found.append(node.value)
        stack.extend(ast.iter_child_nodes(node))
    return found


def test_only_the_rule_spells_a_verdict_word():
    root = Path(__file__).resolve().parents[1] / "harness"
    spelled = {m: _spelled_words(ast.parse((root / m).read_text())) for m in JUDGING}
    assert {m: w for m, w in spelled.items() if w} == {}
    assert _spelled_words(ast.parse('x = "within"; y = f"{1} outside"')) == ["within"]
