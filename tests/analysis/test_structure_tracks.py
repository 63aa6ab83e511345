"""Colour and time order in judge_structure (the runs' per-frame FrameTrack): a video played backwards,
one with U and V swapped and one with its hue turned 90 degrees are outside under a chaotic floor, named;
floor-like runs are not. On real mp4s measured by the suite, and as a pure function of the tracks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.analysis.energy import PairErrors
from harness.analysis.structure import FrameCounts, judge_structure, track_terms
from harness.collect.layout import TRACK, FrameTrack
from harness.collect.suite import measure_pair
from harness.compare.pairwise import Comparison
from harness.compare.summary import RunSummary
from harness.media import write_av

N, H, W = 16, 48, 64
TO_YCC = np.array([[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]])


def _scene(seed: int, noise: float) -> np.ndarray:
    """A coloured scene whose light rises over time and whose block moves right, plus strong independent
    noise per run (PSNR between runs under 20 dB: a chaotic floor)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float64)
    out = np.empty((N, H, W, 3), np.uint8)
    for t in range(N):
        f = np.stack([60 + 120 * xx / W, 90 + 40 * yy / H, 150 - 60 * xx / W], axis=-1) + 4.0 * t
        f[8:24, 2 + 2 * t : 18 + 2 * t] = (230, 200, 60)
        out[t] = np.clip(np.rint(f + rng.normal(0, noise, f.shape)), 0, 255).astype(np.uint8)
    return out


def _chroma(frames: np.ndarray, turn) -> np.ndarray:
    """Frames with their (Cb, Cr) replaced by ``turn(cb, cr)``, luma kept."""
    ycc = frames.astype(np.float64) @ TO_YCC.T
    y, cb, cr = ycc[..., 0], *turn(ycc[..., 1], ycc[..., 2])
    rgb = np.stack([y, cb, cr], axis=-1) @ np.linalg.inv(TO_YCC).T
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


def _run(key: str, stats) -> RunSummary:
    return RunSummary(key=key, path=".", arm=key.split("/")[0], seed=1, stats=stats)


@pytest.fixture(scope="module")
def chaotic(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[PairErrors, FrameCounts, FrameCounts]]:
    d = tmp_path_factory.mktemp("tracks")
    ref = _scene(10, 45.0)
    videos = {
        "ref": ref,
        **{f"floor{i}": _scene(11 + i, 45.0) for i in range(3)},
        "reversed": ref[::-1],
        "uv": _chroma(ref, lambda cb, cr: (cr, cb)),
        "hue": _chroma(ref, lambda cb, cr: (-cr, cb)),
    }
    got = {}
    for name, frames in videos.items():
        write_av(d / f"{name}.mp4", frames)
    for name in videos:
        if name != "ref":
            res = measure_pair(d / "ref.mp4", d / f"{name}.mp4", device="cpu")
            c = Comparison(a=_run("ref/1", res.stats_a), b=_run(f"{name}/1", res.stats_b), video=res.video)
            c = Comparison.model_validate_json(c.model_dump_json())  # as the analysis reads compare.json
            got[name] = (PairErrors.from_comparison(c), FrameCounts.of(c.b), FrameCounts.of(c.a))
    return got


def _judge(got, name: str, floors: tuple[str, ...] = ("floor0", "floor1")):
    exact = [got[floors[0]][2], *(got[f][1] for f in floors)]
    return judge_structure([got[name][0]], [got[f][0] for f in floors], [got[name][1]], exact)


def test_reversed_uv_swapped_and_hue_turned_are_outside_under_a_chaotic_floor(chaotic) -> None:
    assert all(10 * math.log10(255**2 / chaotic[f][0].value("video_mse")) < 20 for f in ("floor0", "floor1"))
    rev = _judge(chaotic, "reversed")
    assert (
        rev.word == "outside"
        and "reversed/1 time order reversed: B plays the reference backwards" in rev.text
    )
    assert [c.mirror for c in rev.checks if c.check == "time"] == ["reversed"]
    assert "mirrored" not in rev.text  # a mirror is named only where B is the mirrored reference
    uv = _judge(chaotic, "uv")
    assert uv.word == "outside" and "uv/1 colour outside, U and V swapped" in uv.text, uv.text
    hue = _judge(chaotic, "hue")
    assert hue.word == "outside" and "hue/1 colour outside: 1x1 chroma (Cb, Cr) distance" in hue.text, (
        hue.text
    )
    # colour and time are told apart: the reversed run's colour and the swapped run's time course hold
    assert {c.check: c.word for c in rev.checks if c.check in ("colour", "time")} == {
        "colour": "within", "time": "outside"}  # fmt: skip
    assert [c.word for c in uv.checks if c.check == "time"] == ["within"]


def test_every_floor_run_judged_against_the_others_is_not_outside(chaotic) -> None:
    floors = ("floor0", "floor1", "floor2")
    for k, name in enumerate(floors):
        others = tuple(f for i, f in enumerate(floors) if i != k)
        r = _judge(chaotic, name, others)
        assert r.word == "within", r.text
        assert "colour within at 1x1" in r.text and "time order within at" in r.text


# --- the rules on tracks --------------------------------------------------------------------


def _track(y: np.ndarray, cb: np.ndarray, cr: np.ndarray) -> FrameTrack:
    """From [frames, TRACK * TRACK] arrays."""
    return FrameTrack(y=y.tolist(), cb=cb.tolist(), cr=cr.tolist())


def _ref(n: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.arange(n, dtype=np.float64)[:, None]
    cells = np.arange(TRACK * TRACK, dtype=np.float64)[None, :]
    return 50 + 10 * t + cells, 128 + 20 + 0 * t + cells, 128 - 15 + 0 * t - cells


def _counts(key: str, track: FrameTrack | None) -> FrameCounts:
    return FrameCounts(key=key, seed=1, frozen=0, black=0, flat=0, track=track)


def _judge_tracks(cand: FrameTrack | None, ref: FrameTrack, floors: list[FrameTrack]):
    exact = [_counts("ref", ref), *(_counts(f"f{i}", f) for i, f in enumerate(floors))]
    floor_pairs = [PairErrors(key=f"f{i}", seed=1) for i in range(len(floors))]
    return judge_structure([], floor_pairs, [_counts("c", cand)], exact)


def test_bounds_come_from_the_floor_runs_and_the_least_bound() -> None:
    y, cb, cr = _ref()
    ref = _track(y, cb, cr)
    exact_floor = _track(y, cb, cr)  # deterministic runs: a floor distance of 0
    small = _judge_tracks(_track(y + 1.5, cb + 1.5, cr - 1.5), ref, [exact_floor])
    assert small.word == "within", small.text  # 2.25 units^2, under the least bound 4
    big = _judge_tracks(_track(y, cb + 3, cr + 3), ref, [exact_floor])
    (c,) = [c for c in big.checks if c.check == "colour"]
    assert big.word == "outside" and (c.scale, c.value, c.limit, c.floor) == (1, 9.0, 4.0, 0.0)
    wide = _track(y, cb + 2, cr - 2)  # a floor run 4 units^2 off: the bound is 4 x that
    assert _judge_tracks(_track(y, cb + 3, cr + 3), ref, [wide]).word == "within"


def test_no_colour_no_course_and_no_track_are_not_judged() -> None:
    y, cb, cr = _ref()
    grey = _track(y, 0 * cb + 128, 0 * cr + 128)
    r = _judge_tracks(grey, grey, [grey])
    assert "colour not judged (1x1: the reference has no colour (off grey 0 < 4)" in r.text, r.text
    still = _track(0 * y + 80, cb, cr)
    assert "time order not judged" in _judge_tracks(still, still, [still]).text
    missing = _judge_tracks(None, _track(y, cb, cr), [_track(y, cb, cr)])
    assert missing.word == "inconclusive" and "c time order: not measured" in missing.text
    old = judge_structure([], [PairErrors(key="f", seed=1)], [_counts("c", None)], [_counts("ref", None)])
    assert "colour and time order not judged (no per-frame track in these records)" in old.text


def test_a_course_only_the_cells_have_is_judged_at_4x4() -> None:
    _, cb, cr = _ref()
    # cells in anti-phase: the whole frame's and each 2x2 block's mean stand still, the 4x4 cells move
    y = np.full((10, TRACK * TRACK), 80.0)
    y[:, ::2] += 40 * np.sin(np.arange(10))[:, None]
    y[:, 1::2] -= 40 * np.sin(np.arange(10))[:, None]
    rng = np.random.default_rng(0)
    floor, cand = (_track(y + rng.normal(0, 1, y.shape), cb, cr) for _ in range(2))
    r = _judge_tracks(cand, _track(y, cb, cr), [floor])
    (c,) = [c for c in r.checks if c.check == "time"]
    assert c.scale == 4 and c.word == "within", r.text
    back = _judge_tracks(_track(y[::-1], cb, cr), _track(y, cb, cr), [floor])
    assert back.word == "outside" and "time order reversed" in back.text, back.text


# --- properties -----------------------------------------------------------------------------

PROPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CELL = st.floats(-1e6, 1e6, allow_nan=False)


@st.composite
def tracks(draw, frames: int | None = None) -> FrameTrack:
    n = frames if frames is not None else draw(st.integers(1, 5))
    rows = st.lists(st.lists(CELL, min_size=TRACK * TRACK, max_size=TRACK * TRACK), min_size=n, max_size=n)
    return FrameTrack(y=draw(rows), cb=draw(rows), cr=draw(rows))


@PROPS
@given(a=tracks(4), b=tracks(4), scale=st.sampled_from([1, 2, 4]))
def test_track_terms_are_distances_that_transforms_swap(a: FrameTrack, b: FrameTrack, scale: int) -> None:
    t = track_terms(a, b, scale)
    assert all(v >= 0 for v in t.values())
    self_terms = track_terms(a, a, scale)
    assert self_terms["colour"] == 0.0 and self_terms["time"] == 0.0
    # B reversed against A reversed: the same time distance; B swapped: its swapped distance is A's colour
    back = track_terms(a.model_copy(update={"y": a.y[::-1]}), b.model_copy(update={"y": b.y[::-1]}), scale)
    assert back["time"] == pytest.approx(t["time"], rel=1e-9, abs=1e-6)
    swapped = track_terms(a, b.model_copy(update={"cb": b.cr, "cr": b.cb}), scale)
    assert swapped["swapped"] == pytest.approx(t["colour"], rel=1e-9, abs=1e-6)


@PROPS
@given(ref=tracks(4), floors=st.lists(tracks(4), max_size=3), other=tracks())
def test_a_candidate_equal_to_the_reference_is_never_outside(ref, floors, other) -> None:
    r = _judge_tracks(ref, ref, [*floors, other])
    assert r.word != "outside", r.text
    assert track_terms(ref, FrameTrack(y=[], cb=[], cr=[]), 1) == {}


@PROPS
@given(ref=tracks(3), floors=st.lists(tracks(3), min_size=1, max_size=3), cand=tracks(), order=st.randoms())
def test_any_tracks_read_and_floor_order_does_not_matter(ref, floors, cand, order) -> None:
    r = _judge_tracks(cand, ref, floors)
    assert r.word in ("within", "outside", "inconclusive", "") and r.text
    shuffled = list(floors)
    order.shuffle(shuffled)
    again = _judge_tracks(cand, ref, shuffled)
    assert [(c.word, c.value, c.scale) for c in again.checks] == [
        (c.word, c.value, c.scale) for c in r.checks
    ]


def test_the_builtin_pipelines_runs_are_not_outside_in_colour_or_time(shadowed_campaign) -> None:
    """The real builtin pipeline (tests/insitu_testutil.py): its K/V-reversed floor bounds colour and time
    order, and neither its exact copies nor its emulated quantised kernel read outside there."""
    from harness.analysis.model import read_results

    res = read_results(shadowed_campaign / "results.json")
    checks = [
        c for v in res.verdicts if v.structure for c in v.structure.checks if c.check in ("colour", "time")
    ]
    assert {c.check for c in checks if c.word == "within"} == {"colour", "time"}, [c.text for c in checks]
    assert not [c.text for c in checks if c.word == "outside"]
