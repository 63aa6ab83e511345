"""harness.analysis.aggregate: spreads over seeds and runs."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analysis.aggregate import spread


def test_spread():
    s = spread([1.0, 3.0, None])
    assert (s.n, s.mean, s.min, s.max) == (2, 2.0, 1.0, 3.0)
    assert s.std == pytest.approx(np.std([1.0, 3.0], ddof=1))
    inf = spread([float("inf"), 40.0])
    assert inf.mean == float("inf") and inf.std is None and inf.min == 40.0
    assert spread([None]).n == 0
