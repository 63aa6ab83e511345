"""harness.report.plots: the figures, drawn from the numbers of results.json and its assets."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.analysis.model import AudioView, Envelope, FrameSeries
from harness.report.plots import audio_plot, latent_plot, per_frame_plot, seeds_plot


def test_per_frame_plot(tmp_path: Path):
    series = FrameSeries(key="cand", reference="ref", frame=[0, 1, 2], psnr=[float("inf"), 40.5, 38.0],
                         ssim=[1.0, 0.99, 0.98])  # fmt: skip
    out = per_frame_plot([("cand", series)], tmp_path / "pf.png")
    assert out is not None and out.read_bytes()[:4] == b"\x89PNG"
    assert per_frame_plot([("none", FrameSeries(key="x", reference="r"))], tmp_path / "none.png") is None


def test_audio_latent_seed_plots(tmp_path: Path):
    t = list(np.linspace(0, 1, 50))
    env = Envelope(t=t, lo=[-0.5] * 50, hi=[0.5] * 50)
    ref = AudioView(key="ref", rate=16000, seconds=1.0, signal=env, spectrogram_hz=[0, 8000],
                    spectrogram_db=[-140, -20])  # fmt: skip
    cand = ref.model_copy(
        update={"key": "cand", "minus_reference": Envelope(t=t, lo=[-0.01] * 50, hi=[0.01] * 50)}
    )
    spec = np.linspace(-140, -20, 64 * 80).reshape(64, 80)
    out = audio_plot([("ref", ref, spec), ("cand", cand, None)], tmp_path / "a.png")
    assert out is not None and out.stat().st_size > 1000
    assert audio_plot([], tmp_path / "none.png") is None
    assert latent_plot([("c", [(1, 30.0), (2, float("inf"))])], tmp_path / "l.png") is not None
    assert seeds_plot([("c", [(42, 30.0), (43, 31.0)])], (35.0, 36.0), tmp_path / "s.png") is not None
