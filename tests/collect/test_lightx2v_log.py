"""LightX2V log parsing on log text in LightX2V's format (fixtures in tests/fixtures/lightx2v_logs)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.collect.lightx2v_log import LogProblem, parse_lightx2v_logs

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


def _with_line(text: str, line: str, after: str = "Run Dit every step") -> str:
    """``text`` with ``line`` inserted after the first line that contains ``after``."""
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if after in ln)
    return "\n".join([*lines[: i + 1], line, *lines[i + 1 :]]) + "\n"


STRAY = "2026-09-14 09:30:20.000 | INFO | lightx2v.utils.profiler:__exit__:165 - [Profile] Rank {rank} - Level1_Log {name} cost {sec} seconds"


@pytest.mark.parametrize(
    "rank, name, sec, why",
    [
        (7, "Run Dit every step", "1.5", "rank 7 in a profile line, but the logs are of rank(s) 0, 1"),
        (0, "Run Dit every step", "1e400", "'Run Dit every step' cost 1e400 seconds: not a finite number"),
        (
            0,
            "Run Dit every step",
            "0.000000",
            "'Run Dit every step' cost 0.000000 seconds: zero is no measurement",
        ),
        (1, "RUN pipeline", "-2.5", "'RUN pipeline' cost -2.5 seconds: negative"),
        (0, "Run VAE Decoder", "nan", "'Run VAE Decoder' cost nan seconds: not a finite number"),
        (
            0,
            "Run Dit every step",
            "1000001.0",
            "'Run Dit every step' cost 1000001.0 seconds: above 1e+06 s, no run lasts that long",
        ),
    ],
)
def test_an_implausible_value_is_refused_naming_file_and_line(rank, name, sec, why):
    texts = _texts("h3_tp2_rank0.log", "h3_tp2_rank1.log")
    texts["h3_tp2_rank0"] = _with_line(texts["h3_tp2_rank0"], STRAY.format(rank=rank, name=name, sec=sec))
    line = texts["h3_tp2_rank0"].splitlines().index(STRAY.format(rank=rank, name=name, sec=sec)) + 1
    with pytest.raises(LogProblem) as err:
        parse_lightx2v_logs(texts)
    assert str(err.value) == f"h3_tp2_rank0:{line}: {why}"  # main: accepted (s/step 25x off, inf, 0)
    lenient = parse_lightx2v_logs(texts, strict=False)  # a run's own logs: the value is left out, and said
    assert lenient.missing.pop() == f"rejected h3_tp2_rank0:{line}: {why}"
    _assert_tp2_complete(lenient)  # and the rest is as if the line were not there


def test_plausible_lines_whose_sum_is_not_are_one_line_not_a_traceback():
    """Each stage line under timing.json's bound, their sum over it: the record would refuse it."""
    texts = _texts("h3_tp2_rank0.log", "h3_tp2_rank1.log")
    for _ in range(3):
        texts["h3_tp2_rank0"] = _with_line(texts["h3_tp2_rank0"], STRAY.format(rank=0, name="Run VAE Decoder",
                                                                               sec="900000"))  # fmt: skip
    with pytest.raises(LogProblem, match=r"^h3_tp2_rank0(, h3_tp2_rank1)?: stages\.\w+: .*above 1e\+06 s"):
        parse_lightx2v_logs(texts)
    lenient = parse_lightx2v_logs(texts, strict=False)
    assert not lenient.steps and lenient.missing[0].startswith("timing not taken: ")


def test_a_stray_rank_in_one_unnamed_log_is_not_a_rank():
    text = (LOGS / "h3_single_warmup.log").read_text()
    stray = STRAY.format(rank=3, name="Run Dit every step", sec="1.0")
    with pytest.raises(LogProblem, match="rank 3 in a profile line, but the logs are of rank"):
        parse_lightx2v_logs({"run.log": _with_line(text, stray)})
    with pytest.raises(LogProblem, match="outside the world size 1"):
        parse_lightx2v_logs({"run.log": _with_line(text, STRAY.format(rank=1, name="Run Dit every step",
                                                                      sec="1.0"))}, world_size=1)  # fmt: skip


def test_a_step_count_other_than_the_configs_is_reported():
    texts = _texts("h3_tp2_rank0.log", "h3_tp2_rank1.log")  # 3 DiT steps: MiniMax-H3 with infer_steps 4
    assert len(parse_lightx2v_logs(texts, infer_steps=4).steps) == 3
    with pytest.raises(
        LogProblem, match=r"3 DiT step\(s\) timed, but the config's infer_steps 6 means 5 DiT steps"
    ):
        parse_lightx2v_logs(texts, infer_steps=6)
    assert "infer_steps 6 means 5" in parse_lightx2v_logs(texts, infer_steps=6, strict=False).missing[-1]
