"""judge_structure: broken frames and the coarse layout, on real mp4s measured by the suite (64x48,
12 frames) and as a pure function of the numbers (rules and properties)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.analysis.energy import PairErrors
from harness.analysis.structure import (
    AGREE_FRACTION,
    LAYOUT_MULTIPLE,
    FrameCounts,
    judge_structure,
)
from harness.collect.layout import SCALES
from harness.collect.models import RunStats
from harness.collect.suite import measure_pair
from harness.compare.pairwise import Comparison
from harness.compare.summary import RunSummary
from harness.media import write_av

N, H, W = 12, 48, 64
MIRROR_LR = "layout mirrored left-right: B matches the mirror of the reference"


def _layout(n: int = N, *, noise: float = 0.0, seed: int = 0) -> np.ndarray:
    """An asymmetric smooth layout (a ramp left to right, a little top to bottom, a moving bright
    block on the left half), plus independent Gaussian noise of sd ``noise``."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float64)
    out = np.empty((n, H, W, 3), np.uint8)
    for t in range(n):
        base = 40 + 150 * xx / W + 30 * yy / H
        f = np.stack([base, base * 0.9 + 10, base * 0.8 + 20], axis=-1)
        f[8:24, 4 + t : 20 + t] = (235, 220, 120)
        f = f + rng.normal(0, noise, f.shape) if noise else f
        out[t] = np.clip(np.rint(f), 0, 255).astype(np.uint8)
    return out


def _run(key: str, seed: int = 1, stats: RunStats | None = None) -> RunSummary:
    return RunSummary(key=key, path=".", arm=key.split("/")[0], seed=seed, stats=stats)


def _measure(ref: Path, other: Path, key: str, seed: int = 1) -> tuple[PairErrors, FrameCounts, FrameCounts]:
    """(B's errors, B's frame counts, A's frame counts), through Comparison as the analysis gets them."""
    res = measure_pair(ref, other, device="cpu")
    c = Comparison(a=_run("ref", seed, res.stats_a), b=_run(key, seed, res.stats_b), video=res.video)
    c = Comparison.model_validate_json(c.model_dump_json())  # as the analysis reads compare.json
    return PairErrors.from_comparison(c), FrameCounts.of(c.b), FrameCounts.of(c.a)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[PairErrors, FrameCounts, FrameCounts]]:
    d = tmp_path_factory.mktemp("structure")
    ref = _layout()
    frozen = _layout(noise=3.0, seed=3)
    frozen[6] = frozen[5]
    videos = {
        "ref": ref,
        "floor": _layout(noise=3.0, seed=1),
        "noisy": _layout(noise=3.0, seed=2),
        "mirror": ref[:, :, ::-1],
        "frozen": frozen,
    }
    paths = {}
    for name, frames in videos.items():
        paths[name] = d / f"{name}.mp4"
        write_av(paths[name], frames, crf=0)  # lossless: the frozen frame stays bitwise frozen
    return {k: _measure(paths["ref"], paths[k], f"{k}/1") for k in videos if k != "ref"}


def test_mirrored_candidate_is_outside_and_a_noisy_one_within(plain) -> None:
    floor, floor_frames, ref_frames = plain["floor"]
    exact = [ref_frames, floor_frames]
    mirror, mirror_frames, _ = plain["mirror"]
    r = judge_structure([mirror], [floor], [mirror_frames], exact)
    assert r.word == "outside" and MIRROR_LR in r.text, r.text
    (layout,) = [c for c in r.checks if c.check == "layout"]
    assert layout.mirror == "left-right" and layout.scale == 4 and layout.key == "mirror/1"
    assert not [c for c in r.checks if c.check != "layout" and c.word != "within"]  # no broken frame
    noisy, noisy_frames, _ = plain["noisy"]
    ok = judge_structure([noisy], [floor], [noisy_frames], exact)
    assert ok.word == "within", ok.text
    assert ok.text.startswith("structure within:") and "layout within at 4x4" in ok.text


def test_one_frozen_frame_is_outside_with_its_index(plain) -> None:
    floor, floor_frames, ref_frames = plain["floor"]
    frozen, frozen_frames, _ = plain["frozen"]
    assert (frozen_frames.frozen, frozen_frames.frozen_first) == (1, [6])
    r = judge_structure([frozen], [floor], [frozen_frames], [ref_frames, floor_frames])
    assert r.word == "outside"
    (c,) = [c for c in r.checks if c.word == "outside"]
    assert c.check == "frozen" and c.frames == [6] and c.limit == 0
    assert "1 (frame 6) where the exact runs have at most 0" in r.text, r.text
    # the same frozen frame in an exact run of the seed: within
    again = judge_structure([frozen], [floor], [frozen_frames], [ref_frames, frozen_frames])
    assert again.word == "within"


def test_chaotic_floor_still_catches_the_mirror(tmp_path: Path) -> None:
    """Reference and floor share only the coarse layout (independent strong noise: PSNR < 20 dB),
    yet the mirrored candidate is caught and a floor-like candidate is not."""
    ref = _layout(noise=45.0, seed=10)
    videos = {"ref": ref, "floor": _layout(noise=45.0, seed=11), "floor2": _layout(noise=45.0, seed=12),
              "like": _layout(noise=45.0, seed=13), "mirror": ref[:, :, ::-1]}  # fmt: skip
    paths = {}
    for name, frames in videos.items():
        paths[name] = tmp_path / f"{name}.mp4"
        write_av(paths[name], frames)
    got = {k: _measure(paths["ref"], paths[k], f"{k}/1") for k in videos if k != "ref"}
    floors = [got["floor"][0], got["floor2"][0]]
    assert all(10 * math.log10(255**2 / f.value("video_mse")) < 20 for f in floors)  # chaotic pixels
    exact = [got["floor"][2], got["floor"][1], got["floor2"][1]]
    r = judge_structure([got["mirror"][0]], floors, [got["mirror"][1]], exact)
    assert r.word == "outside" and MIRROR_LR in r.text, r.text
    like = judge_structure([got["like"][0]], floors, [got["like"][1]], exact)
    assert like.word == "within", like.text


# --- the rules on numbers -------------------------------------------------------------------


def _pair(key: str, d: dict[int, float], var: float = 400.0, lr: float | None = None, seed: int | None = 1):
    lr_d = {s: (x if lr is None else lr) for s, x in d.items()}
    return PairErrors(key=key, seed=seed, layout_mse=d, layout_mirror_lr_mse=lr_d,
                      layout_mirror_ud_mse=dict(d), layout_var_a=dict.fromkeys(d, var))  # fmt: skip


def test_the_coarsest_agreeing_scale_is_judged() -> None:
    floors = [_pair("f1", {4: 500.0, 8: 20.0, 16: 30.0}), _pair("f2", {4: 10.0, 8: 25.0, 16: 300.0})]
    cand = _pair("c", {4: 500.0, 8: 150.0, 16: 10.0})
    r = judge_structure([cand], floors)
    (c,) = r.checks
    assert c.scale == 8 and c.floor == 25.0 and c.limit == max(LAYOUT_MULTIPLE * 25.0, AGREE_FRACTION * 400)
    assert c.word == "outside" and "layout outside: 8x8 luma grid distance 150" in c.text
    assert judge_structure([_pair("c", {4: 1.0, 8: 100.0, 16: 1.0})], floors).word == "within"


def test_layout_outside_needs_more_than_the_agreement_bound() -> None:
    """A floor that agrees almost exactly (deterministic runs) does not make every small layout
    difference outside: the candidate must also miss the agreement bound itself."""
    floors = [_pair("f", {4: 0.01})]
    assert judge_structure([_pair("c", {4: 50.0})], floors).word == "within"  # 5000 x floor, < 0.25 var
    assert judge_structure([_pair("c", {4: 150.0})], floors).word == "outside"
    assert judge_structure([_pair("c", {4: 150.0}, lr=1.0)], floors).checks[0].mirror == "left-right"
    # nearer the mirror than the reference, yet beyond the bound from it too (a reversed video): not named
    assert judge_structure([_pair("c", {4: 150.0}, lr=120.0)], floors).checks[0].mirror is None


def test_not_judged_and_inconclusive_layouts() -> None:
    far = [_pair("f", {4: 200.0, 8: 300.0, 16: 350.0})]
    r = judge_structure([_pair("c", {4: 1e6})], far)
    assert (
        r.word == "" and "not judged" in r.text and "4x4: floor distance 200 >= 0.25 x variance 400" in r.text
    )
    flat = [_pair("f", {4: 0.0}, var=1.0)]
    assert "the reference has no layout" in judge_structure([_pair("c", {4: 1e6})], flat).text
    assert "no noise-floor run" in judge_structure([_pair("c", {4: 1e6})], []).text
    missing = judge_structure([PairErrors(key="c", seed=1)], [_pair("f", {4: 1.0})])
    assert missing.word == "inconclusive" and "not measured at 4x4" in missing.text
    assert judge_structure([_pair("c", {4: math.nan})], [_pair("f", {4: 1.0})]).word == "outside"
    assert judge_structure([], []).word == ""


def test_frame_counts_of_older_records_are_not_measured() -> None:
    stats = RunStats(file="x", frames=3, width=8, height=8, fps=24, luma_mean=1, luma_std=0, sharpness=0,
                     motion=0, black_frames=3, frozen_frames=2, nan_like_frames=3, video_hash="h",
                     convention="older convention")  # fmt: skip
    old = FrameCounts.of(_run("c", 1, stats))
    assert (old.frozen, old.black, old.flat) == (2, None, None)
    exact = FrameCounts(key="r", seed=1, frozen=0, black=0, flat=0)
    r = judge_structure([], [], [old], [exact])
    assert r.word == "outside" and [c.word for c in r.checks] == [
        "outside",
        "inconclusive",
        "inconclusive",
        "",
        "",
    ]
    assert [c.check for c in r.checks[3:]] == ["colour", "time"]  # no track: colour and time order not judged
    within = judge_structure([], [], [FrameCounts(key="c", seed=1, frozen=0, black=0, flat=0)], [exact])
    assert "colour and time order not judged (no per-frame track in these records)" in within.text
    assert FrameCounts.of(_run("c")).frozen is None
    assert judge_structure([], [], [FrameCounts(key="c", seed=2, frozen=5)], [exact]).word == ""


# --- properties -----------------------------------------------------------------------------

VALUES = st.one_of(
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 1e308, -1.0, 4.0, 1e-300]),
    st.floats(allow_nan=True, allow_infinity=True),
)
LAYOUT = st.dictionaries(st.sampled_from(SCALES), VALUES, max_size=3)
SEEDS = st.sampled_from([None, 1, 2])
COUNTS = st.one_of(st.none(), st.integers(0, 3), st.integers(0, 10**30))


@st.composite
def pairs(draw, key: str) -> PairErrors:
    return PairErrors(key=key, seed=draw(SEEDS), layout_mse=draw(LAYOUT), layout_mirror_lr_mse=draw(LAYOUT),
                      layout_mirror_ud_mse=draw(LAYOUT), layout_var_a=draw(LAYOUT))  # fmt: skip


@st.composite
def counts(draw, key: str) -> FrameCounts:
    first = st.lists(st.integers(0, 10**6), max_size=8)
    return FrameCounts(key=key, seed=draw(SEEDS), frozen=draw(COUNTS), black=draw(COUNTS), flat=draw(COUNTS),
                       frozen_first=draw(first), black_first=draw(first))  # fmt: skip


PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(
    cands=st.lists(pairs("c"), max_size=3),
    floors=st.lists(pairs("f"), max_size=4),
    cand_frames=st.lists(counts("c"), max_size=3),
    exact_frames=st.lists(counts("e"), max_size=4),
    order=st.randoms(use_true_random=False),
)
def test_any_numbers_read_and_floor_order_does_not_matter(
    cands, floors, cand_frames, exact_frames, order: random.Random
) -> None:
    r = judge_structure(cands, floors, cand_frames, exact_frames)
    assert r.word in ("within", "outside", "inconclusive", "") and r.text
    floors2, exact2 = list(floors), list(exact_frames)
    order.shuffle(floors2)
    order.shuffle(exact2)
    assert judge_structure(cands, floors2, cand_frames, exact2).model_dump_json() == r.model_dump_json()


@PROPS
@given(
    floors=st.lists(pairs("f"), max_size=4),
    exact_frames=st.lists(counts("e"), max_size=4),
    seed=SEEDS,
    mirrors=LAYOUT,
    var=LAYOUT,
)
def test_a_candidate_identical_to_the_reference_is_never_outside(
    floors, exact_frames, seed, mirrors, var
) -> None:
    zero = dict.fromkeys(SCALES, 0.0)
    cand = PairErrors(key="c", seed=seed, layout_mse=zero, layout_mirror_lr_mse=mirrors,
                      layout_mirror_ud_mse=dict(zero), layout_var_a=var)  # fmt: skip
    frames = FrameCounts(key="c", seed=seed, frozen=0, black=0, flat=0)
    assert judge_structure([cand], floors, [frames], exact_frames).word != "outside"
