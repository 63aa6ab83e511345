"""harness.report.plots: the figures, drawn from the numbers of results.json and its assets: no text
drawn over another, captions that name what is drawn, palette PNGs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from PIL import Image

from harness.analysis.model import AudioView, Envelope, FrameSeries
from harness.report.figures import speed_accuracy_caption
from harness.report.plots import (
    audio_figure,
    dose_response_figure,
    latent_figure,
    per_frame_figure,
    save_png,
    seeds_figure,
    speed_accuracy_figure,
)


def test_per_frame_figure(tmp_path: Path):
    series = FrameSeries(key="cand", reference="ref", frame=[0, 1, 2], psnr=[float("inf"), 40.5, 38.0],
                         ssim=[1.0, 0.99, 0.98])  # fmt: skip
    out = save_png(per_frame_figure([("cand", series)]), tmp_path / "pf.png")
    assert out is not None and out.read_bytes()[:4] == b"\x89PNG"
    assert (
        save_png(per_frame_figure([("none", FrameSeries(key="x", reference="r"))]), tmp_path / "none.png")
        is None
    )
    assert not (tmp_path / "none.png").exists()


def test_audio_latent_seed_plots(tmp_path: Path):
    t = list(np.linspace(0, 1, 50))
    env = Envelope(t=t, lo=[-0.5] * 50, hi=[0.5] * 50)
    ref = AudioView(key="ref", rate=16000, seconds=1.0, signal=env, spectrogram_hz=[0, 8000],
                    spectrogram_db=[-140, -20])  # fmt: skip
    cand = ref.model_copy(
        update={"key": "cand", "minus_reference": Envelope(t=t, lo=[-0.01] * 50, hi=[0.01] * 50)}
    )
    spec = np.linspace(-140, -20, 64 * 80).reshape(64, 80)
    out = save_png(audio_figure([("ref", ref, spec), ("cand", cand, None)]), tmp_path / "a.png")
    assert out is not None and out.stat().st_size > 1000
    assert audio_figure([]) is None
    assert latent_figure([("c", [(1, 30.0), (2, float("inf"))])]) is not None
    assert seeds_figure([("c", [(42, 30.0), (43, 31.0)])], (35.0, 36.0)) is not None


def overlapping_texts(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of texts the figure draws over each other (titles, axis and tick labels, legend entries),
    measured on the drawn figure by matplotlib's own renderer."""
    canvas = FigureCanvasAgg(fig)  # the renderer the PNGs are drawn with
    canvas.draw()  # the layout (constrained) settles when drawn
    renderer = canvas.get_renderer()
    undrawn = _undrawn_tick_labels(fig)
    boxes = [
        (t.get_text(), t.get_window_extent(renderer))
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and id(t) not in undrawn
    ]
    return [
        (a, b)
        for i, (a, box_a) in enumerate(boxes)
        for b, box_b in boxes[i + 1 :]
        if box_a.x0 < box_b.x1 - 1
        and box_b.x0 < box_a.x1 - 1
        and box_a.y0 < box_b.y1 - 1
        and box_b.y0 < box_a.y1 - 1
    ]


def _undrawn_tick_labels(fig: Figure) -> set[int]:
    """Labels of ticks outside their axes' view: matplotlib keeps them, but does not draw them."""
    out = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo <= tick.get_loc() <= hi:
                    out |= {id(tick.label1), id(tick.label2)}
    return out


def _many_arms(n: int) -> tuple[list, list]:
    """``n`` candidates at nearly the same place (their names would collide), and three floors."""
    points = [(f"sage_candidate_{i}_with_a_long_name", "outside", (0.8 + 0.01 * i, 0.5, 1.2),
               (6.0 + 0.1 * i, 3.0, 12.0), i == 2) for i in range(n)]  # fmt: skip
    floors = [(f"torch_sdpa_floor_{i}", (1.0 + 0.01 * i, 0.9, 1.1), 1.0 + 0.02 * i) for i in range(3)]
    return points, floors


def test_speed_accuracy_figure_with_many_arms_draws_no_text_over_text():
    points, floors = _many_arms(10)
    fig = speed_accuracy_figure(points, floors, 2.0)
    assert overlapping_texts(fig) == []
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert all(any(t.startswith(p[0]) for t in legend) for p in points)  # every arm named once
    assert sum("(noise floor)" in t for t in legend) == 3
    # the detector is not blind: names written beside their points, as before, collide
    ax = fig.axes[0]
    for arm, _, (x, *_), (y, *_), _ in points:
        ax.annotate(arm, (x, y), xytext=(7, 5), textcoords="offset points", fontsize=8)
    assert overlapping_texts(fig)


def test_per_frame_and_audio_figures_draw_no_text_over_text():
    frames = list(range(60))
    series = [(f"run_with_a_long_name_{i}@42 (noise floor)", FrameSeries(key=f"r{i}", reference="ref", frame=frames,
               psnr=[40.0 + i + 0.1 * f for f in frames], ssim=[0.99 - 0.001 * i] * 60)) for i in range(10)]  # fmt: skip
    fig = per_frame_figure(series)
    assert overlapping_texts(fig) == []
    assert len(fig.legends[0].get_texts()) == 10  # each run once, though drawn on both axes
    t = list(np.linspace(0, 1, 50))
    env = Envelope(t=t, lo=[-0.5] * 50, hi=[0.5] * 50)
    view = AudioView(key="r", rate=16000, seconds=1.0, signal=env, spectrogram_hz=[0, 8000], spectrogram_db=[-140, -20],
                     minus_reference=Envelope(t=t, lo=[-0.01] * 50, hi=[0.01] * 50))  # fmt: skip
    tracks = [(f"torch_sdpa_kv_reversed_{i}@42 (noise floor)", view, None) for i in range(8)]
    assert overlapping_texts(audio_figure(tracks)) == []


@pytest.mark.parametrize(
    "baseline, floors, identical", [(False, False, False), (True, True, False), (True, False, True)]
)
def test_the_caption_names_the_marks_the_figure_draws_and_no_other(baseline, floors, identical):
    points, floor_points = _many_arms(3)
    points = [(*p[:3], (0.0, None, None) if identical and i == 0 else p[3], baseline and i == 1)
              for i, p in enumerate(points)]  # fmt: skip
    floor_points = floor_points if floors else []
    caption = speed_accuracy_caption(points, floor_points, 2.0)
    fig = speed_accuracy_figure(points, floor_points, 2.0)
    markers = [ln.get_marker() for ln in fig.axes[0].lines if ln.get_linestyle() == "None"]
    hollow = [ln for ln in fig.axes[0].lines if ln.get_markerfacecolor() == "white"]
    assert ("star" in caption) == ("*" in markers) == baseline
    assert ("hollow grey" in caption) == bool(hollow) == floors
    assert ("bottom edge" in caption) == identical
    assert "tolerance (2x)" in caption and "legend" in caption


def test_figures_are_palette_pngs(tmp_path: Path):
    points, floors = _many_arms(3)
    out = save_png(speed_accuracy_figure(points, floors, 2.0), tmp_path / "sa.png")
    with Image.open(out) as im:
        assert im.format == "PNG" and im.mode == "P"  # 8-bit palette: a third of RGBA's bytes


EXAMPLES = Path(__file__).resolve().parents[2] / "reports/examples/cpu"


def test_the_dose_response_figure_draws_each_curve_and_candidate_it_is_given():
    """From the committed CPU examples: the video MSE curves of every site, and the e2e example's
    in-situ candidates predicted and measured on the curves it read; the legend names each once and
    no text is drawn over another; a curve with no interval draws nothing."""
    from harness.analysis.model import read_results

    dr = read_results(EXAMPLES / "dose_response/results.json").dose_response
    curves = [c for c in dr.curves if c.metric == "video_mse"]
    fig = dose_response_figure(curves, [])
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[2:] == [c.name for c in curves] and len(curves) >= 4
    assert overlapping_texts(fig) == []
    e2e = read_results(EXAMPLES / "e2e_3step/results.json").dose_response
    preds = [p for p in e2e.predictions if p.metric == "video_mse" and p.predicted]
    assert preds and all(p.measured for p in preds)
    legend = [t.get_text() for t in dose_response_figure(curves[:1], preds).legends[0].get_texts()]
    assert all(f"{p.candidate}: {what}" in legend for p in preds for what in ("predicted", "measured"))
    bare = curves[0].model_copy(
        update={"points": [q.model_copy(update={"ratio_ci": None}) for q in curves[0].points]}
    )
    assert dose_response_figure([bare], preds) is None
