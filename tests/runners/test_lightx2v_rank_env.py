"""What the harness sets up inside a LightX2V process: relaxed checks only for a synthetic checkpoint."""

from __future__ import annotations

import pytest

from harness.runners.lightx2v.rank_env import SyntheticCheckpointError, relax_synthetic_checks


def test_relaxed_checks_are_refused_without_the_synthetic_marker(tmp_path):
    (tmp_path / "text_encoder").mkdir()
    with pytest.raises(SyntheticCheckpointError, match="no synthetic-checkpoint marker; refusing"):
        relax_synthetic_checks(tmp_path)
