"""Generated campaigns as the verdict sees them (hypothesis strategies): energies of every kind a run
can give (0, NaN, inf, subnormal, 1e308, missing), one to four seeds, zero to four floor runs a seed
and an optional in-situ reading; for the verdict's and the report's property tests."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from harness.analysis.energy import PairErrors
from harness.analysis.verdict import InsituReading

energy = st.one_of(
    st.just(0.0),
    st.floats(min_value=1e-300, max_value=1e300, allow_nan=False, allow_infinity=False),
    st.sampled_from([math.nan, math.inf, 5e-324, 1e308]),
    st.none(),
)
positive = st.floats(min_value=1e-12, max_value=1e12, allow_nan=False, allow_infinity=False)


@st.composite
def pairs(draw, seed: int, key: str, value=energy) -> PairErrors:
    snr = draw(st.one_of(st.none(), st.floats(-50, 120), st.just(math.inf), st.just(math.nan)))
    frames = draw(st.integers(1, 400))
    values = {"video_mse": draw(value), "ssim_mean": draw(st.one_of(st.none(), st.floats(-1, 1), st.just(math.nan))),
              "audio_snr": snr, "audio_spectral": draw(value)}  # fmt: skip
    return PairErrors(
        key=key, seed=seed, frames=frames, values={k: x for k, x in values.items() if x is not None},
        audio_residual_lag=draw(st.one_of(st.none(), st.integers(-2000, 2000))),
        audio_rate=draw(st.sampled_from([None, 16000, 32000])),
    )  # fmt: skip


@st.composite
def campaigns(draw, value=energy):
    seeds = draw(st.lists(st.integers(0, 2**31), min_size=1, max_size=4, unique=True))
    cands = [draw(pairs(s, f"c@{s}", value)) for s in seeds]
    floors = [draw(pairs(s, f"f{i}@{s}", value)) for s in seeds for i in range(draw(st.integers(0, 4)))]
    insitu = draw(st.one_of(st.none(), st.builds(
        InsituReading, word=st.sampled_from(["within", "outside", "inconclusive", ""]),
        ratio=st.one_of(st.none(), positive), text=st.just("in situ"))))  # fmt: skip
    return cands, floors, insitu
