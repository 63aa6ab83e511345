"""A layer's seconds per step from timed blocks, and the released depth extrapolated (``~``)."""

from __future__ import annotations

import json

import pytest

from harness.records import StepTiming, TimingRecord
from harness.runners.lightx2v.runner import layer_timing


def test_layers_split_a_step_and_the_released_step_is_marked_extrapolated(tmp_path):
    timing = TimingRecord(
        source="lightx2v-log",
        steps=[StepTiming(index=i, seconds=s) for i, s in ((1, 4.6), (2, 1.9), (3, 1.8))],
        seq_len=120_016,
    )
    ranks = []
    for rank, blocks in (
        ("0", {"1": [2.0, 2.0], "2": [0.8, 0.8], "3": [0.7, 0.7]}),
        ("1", {"2": [0.85, 0.8], "3": [0.7, 0.7]}),
    ):
        path = tmp_path / f"attn_calls.rank{rank}.json"
        path.write_text(json.dumps({"rank": rank, "block_seconds": blocks}))
        ranks.append(path)
    got = layer_timing(ranks, timing)
    # Steps 2..N; each step's layers are the slowest rank's: 1.65 and 1.4 s over 2 layers.
    assert got.steps == [2, 3] and got.layers == 2
    assert got.layer_s == pytest.approx((1.65 + 1.4) / 4)
    assert got.outside_layers_s == pytest.approx(((1.9 - 1.65) + (1.8 - 1.4)) / 2)
    assert got.released_step_s == pytest.approx(got.outside_layers_s + 50 * got.layer_s)
    assert got.text == (
        "one DiT layer 0.762 s per step at 120,016 packed rows (2 layers timed, steps 2, 3; the rest of a "
        "step 0.325 s); a step of 50 layers 38.450 s~ (~: extrapolated from 2 layers)"
    )
    assert layer_timing([tmp_path / "missing.json"], timing) is None
