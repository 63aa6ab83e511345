"""LightX2V log parsing on log text in LightX2V's format (fixtures in tests/fixtures/lightx2v_logs)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.collect.lightx2v_log import parse_lightx2v_logs

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "lightx2v_logs"

# The per-rank step seconds written into the TP2 fixtures.
RANK0_STEPS = [31.204112, 20.118540, 20.301277]
RANK1_STEPS = [31.902004, 19.877312, 20.412006]


def _texts(*names: str) -> dict[str, str]:
    return {Path(n).stem: (LOGS / n).read_text() for n in names}


def _assert_tp2_complete(t) -> None:
    assert t.source == "lightx2v-log"
    assert t.ranks == ["0", "1"]
    assert [s.index for s in t.steps] == [1, 2, 3]
    assert t.step_seconds() == pytest.approx(
        [max(a, b) for a, b in zip(RANK0_STEPS, RANK1_STEPS, strict=True)]
    )
    assert t.steps[1].per_rank == pytest.approx({"0": RANK0_STEPS[1], "1": RANK1_STEPS[1]})
    assert t.dit_steps == 3
    assert t.s_per_step == pytest.approx((20.118540 + 20.412006) / 2)
    assert t.pipeline_total_s == pytest.approx(128.904455 + 0.25)  # rank 1 is the slower
    assert t.wall_total_s == pytest.approx(221.733901 + 0.3)
    assert t.seq_len == 89619
    assert t.packed_layout == {"text": 312, "audio": 603, "video": 88704, "total": 89619}
    assert t.stages["load"] == pytest.approx(84.912345)  # line carries a memory suffix
    assert t.stages["text_encoder"] == pytest.approx(3.49122)
    assert t.stages["vae_decode"] == pytest.approx(42.301882 + 0.2)
    assert t.stages["save"] == pytest.approx(6.120334)  # rank 0 only
    assert t.stages["dit"] == pytest.approx(
        sum(max(a, b) for a, b in zip(RANK0_STEPS, RANK1_STEPS, strict=True))
    )
    assert t.missing == []


def test_two_ranks_in_their_own_files():
    _assert_tp2_complete(parse_lightx2v_logs(_texts("h3_tp2_rank0.log", "h3_tp2_rank1.log")))


def test_two_ranks_interleaved_in_one_stream_give_the_same_record():
    t = parse_lightx2v_logs((LOGS / "h3_tp2_interleaved.log").read_text())
    _assert_tp2_complete(t)


def test_torchrun_line_prefixes_attribute_plain_lines():
    text = "\n".join(
        [
            "[rank0]:x | INFO | r:init_run:1 - MiniMax-H3 packed layout: text=1, audio=2, video=3, total=6",
            "[rank1]:x | INFO | r:run_segment:1 - ==> MiniMax-H3 step: 1 / 2",
            "[rank1]:x | INFO | p:__exit__:1 - [Profile] Rank 1 - Level1_Log Run Dit every step cost 2.5 seconds",
        ]
    )
    t = parse_lightx2v_logs(text)
    assert t.seq_len == 6
    assert t.step_seconds() == [2.5]
    assert any("rank 1: DiT steps 2..2 of 2 not logged" in m for m in t.missing)


def test_crash_mid_run_keeps_the_steps_that_finished_and_says_what_is_missing():
    t = parse_lightx2v_logs(_texts("h3_tp2_crash_rank0.log", "h3_tp2_crash_rank1.log"))
    assert t.step_seconds() == pytest.approx([31.902004, 20.118540])
    assert t.pipeline_total_s is None and t.wall_total_s is None
    assert "dit" in t.stages and "vae_decode" not in t.stages
    missing = "\n".join(t.missing)
    for rank in ("0", "1"):
        assert f"rank {rank}: DiT steps 3..3 of 3 not logged, step 3 started" in missing
    for line in ("RUN pipeline: not logged", "Total Cost: not logged", "Run VAE Decoder: not logged"):
        assert line in t.missing
    assert "Save Audio-Video Output: not logged" in t.missing


def test_a_missing_line_is_listed_never_guessed():
    t = parse_lightx2v_logs((LOGS / "h3_single_missing_pipeline.log").read_text())
    assert t.ranks == ["0"]  # Single GPU
    assert t.step_seconds() == [45.5, 30.25, 30.75]
    assert t.pipeline_total_s is None
    assert t.wall_total_s == pytest.approx(221.733901)
    assert t.missing == ["RUN pipeline: not logged"]


def test_warmup_steps_are_not_the_run_steps():
    t = parse_lightx2v_logs((LOGS / "h3_single_warmup.log").read_text())
    assert t.step_seconds() == [45.5, 30.25, 30.75]
    assert t.stages["warmup"] == pytest.approx(61.25)
    assert t.stages["load"] == pytest.approx(84.512345)  # before the warm-up, kept
    assert t.stages["vae_decode"] == pytest.approx(42.301882)  # the warm-up's 9.5 s decode dropped
    assert t.missing == ["note: 2 step time(s) before the Warmup line were warm-up, not counted"]


def test_a_rank_that_lost_a_step_line_drops_that_step():
    rank0 = (LOGS / "h3_tp2_rank0.log").read_text()
    rank1_lines = (LOGS / "h3_tp2_rank1.log").read_text().splitlines()
    step_lines = [i for i, ln in enumerate(rank1_lines) if "Run Dit every step" in ln]
    del rank1_lines[step_lines[-1]]
    t = parse_lightx2v_logs({"rank0": rank0, "rank1": "\n".join(rank1_lines)})
    assert [s.index for s in t.steps] == [1, 2]
    assert "DiT step 3: no time from rank 1 (step dropped)" in t.missing
    assert any(m.startswith("rank 1: DiT steps 3..3 of 3 not logged") for m in t.missing)


def test_empty_log_says_profiling_was_off():
    t = parse_lightx2v_logs({"stderr": "Traceback (most recent call last):\nImportError: no module\n"})
    assert t.steps == [] and t.pipeline_total_s is None and t.seq_len is None
    assert t.missing[0].startswith("no [Profile] lines")


def test_numbers_parse_exactly_and_excluded_profiles_are_ignored():
    line = "| INFO | p:__exit__:1 - [Profile] Single GPU - Level1_Log Run Dit every step cost 1.5e-03 seconds (non-sync)"
    excluded = "[Profile-Excluded] Single GPU - Run Dit every step cost 99.000000 seconds (excluded from outer profiling)"
    t = parse_lightx2v_logs(f"{line}\n{excluded}\n")
    assert t.step_seconds() == [0.0015]
    assert math.isclose(t.stages["dit"], 0.0015)
