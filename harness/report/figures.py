"""The report's figures, from results.json and its assets, redrawn only when what they show changed (its
inputs hashed into assets/figures.json: an unchanged results.json draws nothing, imports no matplotlib)."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

from harness.analysis.model import INSITU_WHAT, AudioView, FrameSeries, ReportResults, SpectrogramDiff
from harness.errors import HarnessError
from harness.records import canonical_hash
from harness.report.accuracy import role_text, run_label
from harness.report.cells import drawn_points
from harness.report.tables import STEPS_FIGURE, dose_figure
from harness.safe_write import UnsafePathError, atomic_write_json, is_plain_name, resolve_under
from harness.store import sha256_file

# 3: the speed-against-accuracy and spectrogram-difference figures; 4: legends, palette PNGs
FIGURES_VERSION = 4
MANIFEST = "figures.json"
Draw = Callable[[], Any]  # the figure (a matplotlib Figure), or None: nothing to draw


class AssetReader:
    """Assets of a results.json by the relative paths it names (never outside its folder); ``missing``: what
    report.md shows and is not there (the page's own, ``page=True``, are named missing in the page)."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.missing: list[str] = []

    def path(self, rel: str, *, page: bool = False) -> Path | None:
        p = (self.root / rel).resolve()
        if self.root not in p.parents or not p.is_file():
            if rel not in self.missing and not page:
                self.missing.append(rel)
            return None
        return p

    def digest(self, rel: str) -> str | None:
        p = self.path(rel)
        return None if p is None else sha256_file(p)

    def read(self, rel: str, model: Any) -> Any:
        return model.model_validate_json((self.root / rel).read_bytes())


def grey_image(png: Path) -> Any:
    """An 8-bit grey PNG as floats 0..1."""
    from matplotlib.image import imread

    grey = imread(str(png))
    return grey[..., 0] if grey.ndim == 3 else grey


def plots() -> Any:
    """``report.plots``, imported by the first figure drawn (matplotlib takes a second to load)."""
    return import_module("harness.report.plots")


def triple(t: Any) -> tuple[float | None, float | None, float | None]:
    """(value, lo, hi) of a ``review.Terms``."""
    lo, hi = t.ci if t.ci is not None else (None, None)
    return t.value, lo, hi


# arm, word, (speed-up, lo, hi), (ratio, lo, hi), accepted baseline
Point = tuple[str, str, tuple, tuple, bool]
FloorPoint = tuple[str, tuple, float]  # arm, (speed-up, lo, hi), its own ratio
EMULATOR_TAG = " [emulator]"  # after an emulator's name in the legend: its x is no kernel's time


def speed_accuracy_inputs(res: ReportResults) -> tuple[list[Point], list[FloorPoint], float, str] | None:
    """(points, floors, tolerance, y label) of the figure; None when no candidate has a speed-up and a ratio."""
    cands = res.review
    # one point per candidate, at the ratio of the reading that decides; identical output on the bottom edge
    points = [(r.arm + (EMULATOR_TAG if r.emulator else ""), r.word, triple(r.step),
               (0.0, None, None) if r.word == "identical" else triple(r.ratio), r.baseline) for r in cands]  # fmt: skip
    floors = [(f.arm, triple(f.speedup), f.ratio) for f in res.floor_points]
    if not drawn_points(points, floors)[0]:
        return None
    tol = cands[0].tolerance if cands else res.rules.tolerance
    insitu = any(r.ratio_what == INSITU_WHAT for r in cands)
    ylabel = "error / the noise floor's" + (" (in situ where it decides)" if insitu else " (error energy)")
    return points, floors, tol, ylabel


def speed_accuracy_caption(points: list[Point], floors: list[FloorPoint], tolerance: float) -> str:
    """What the figure shows, naming only marks it draws (``drawn_points``, as the plot)."""
    pts, fl = drawn_points(points, floors)
    bars = any(p[2][1] is not None or (p[3][1] is not None and p[3][0] > 0) for p in pts)
    bars = bars or any(f[1][1] is not None for f in fl)
    parts = [
        "Speed against accuracy (log scales): x the DiT s/step speed-up against the reference, y the error "
        "relative to the noise floor's"
        + (", the bars their intervals (each badge says which)" if bars else ""),
        f"the dashed line is the tolerance ({tolerance:g}x), the band under it within tolerance",
        "each candidate its own marker, coloured by its verdict word, named in the legend",
    ]
    if any(p[4] for p in pts):
        parts.append("a star marks the accepted baseline")
    if any(p[0].endswith(EMULATOR_TAG) for p in pts):
        parts.append("an [emulator]'s x is its PyTorch model's time, not a kernel's")
    if any(p[3][0] <= 0 for p in pts):
        parts.append("identical output sits on the bottom edge")
    if fl:
        parts.append("hollow grey markers are the exact noise-floor runs (no timing baseline)")
    return "; ".join(parts) + "."


def figure_captions(res: ReportResults) -> dict[str, str]:
    """Captions that depend on what a figure draws, by figure name (without drawing it)."""
    shown = speed_accuracy_inputs(res)
    return {} if shown is None else {"speed_accuracy": speed_accuracy_caption(*shown[:3])}


def insitu_figure_jobs(res: ReportResults) -> list[tuple[str, Any, Any]]:
    """(figure name, what it shows, how to draw it) for the in-situ figures."""
    ins = res.insitu
    if ins is None or not ins.readings:
        return []
    for i, r in enumerate(ins.readings):  # the name becomes assets/<name>.png: one plain file name
        if r.heatmap and not is_plain_name(r.heatmap):
            raise UnsafePathError(
                f"results.json: insitu.readings[{i}].heatmap {r.heatmap!r} is not a plain file name (letters, "
                "digits, '_', '.' and '-', no leading dot: it names assets/<name>.png): refused, nothing written"
            )
    shown = [r.model_dump(mode="json", include={"candidate", "per_step"}) for r in ins.readings]
    jobs: list[tuple[str, Any, Any]] = [(STEPS_FIGURE, shown, lambda: plots().steps_figure(ins.readings))]
    for r in (r for r in ins.readings if r.heatmap):
        cells = [c.model_dump(mode="json") for c in r.cells]
        jobs.append((r.heatmap, [r.candidate, cells], lambda r=r: plots().heatmap_figure(r)))
    return jobs


def figure_jobs(res: ReportResults, assets: AssetReader) -> list[tuple[str, Any, Draw]]:
    """(name, what it shows, how to draw it) for every figure the results can give."""
    seed = res.primary_seed
    jobs: list[tuple[str, Any, Draw]] = []
    if (top := speed_accuracy_inputs(res)) is not None:  # the figure at the top of the page
        jobs.append(("speed_accuracy", list(top), lambda: plots().speed_accuracy_figure(*top)))

    rows = []  # each run's spectrogram minus the reference's (the first seed's runs)
    for r in res.primary_runs:
        rel = res.assets.get(f"specdiff:{r.key}")
        if r.seed != res.primary_seed or not rel or assets.path(rel, page=True) is None:
            continue
        view = assets.read(rel, SpectrogramDiff)
        if assets.path(view.png, page=True) is not None:
            rows.append((run_label(res, r.key, r.arm, r.role), view))
    if rows:

        def specdiff(rows=rows) -> Any:
            drawn = [
                (lab, v, -v.db_range + grey_image(assets.root / v.png) * 2 * v.db_range) for lab, v in rows
            ]
            return plots().spectrogram_diff_figure(drawn)

        shown = [(lab, view.model_dump(mode="json"), assets.digest(view.png)) for lab, view in rows]
        jobs.append(("spectrogram_diff", shown, specdiff))

    series = []
    for c in res.comparisons:
        rel = res.assets.get(f"series:{c.b.key}")
        if c.b.seed == seed and rel and assets.path(rel) is not None:
            series.append((run_label(res, c.b.key, c.b.arm, c.b.role), rel))
    if series:

        def per_frame(series=series) -> Any:
            return plots().per_frame_figure([(lab, assets.read(rel, FrameSeries)) for lab, rel in series])

        jobs.append(("per_frame", [(lab, assets.digest(rel)) for lab, rel in series], per_frame))

    tracks = []
    for r in res.first_seed_runs:
        rel = res.assets.get(f"audio:{r.key}")
        if rel and assets.path(rel) is not None:
            tracks.append((run_label(res, r.key, r.arm, r.role), rel, res.assets.get(f"spectrogram:{r.key}")))
    if tracks:

        def audio(tracks=tracks) -> Any:
            drawn = []
            for lab, rel, spec in tracks:
                view = assets.read(rel, AudioView)
                png = assets.path(spec) if spec else None
                lo, hi = view.spectrogram_db
                drawn.append((lab, view, lo + grey_image(png) * (hi - lo) if png is not None else None))
            return plots().audio_figure(drawn)

        shown = [
            (lab, assets.digest(rel), assets.digest(spec) if spec else None) for lab, rel, spec in tracks
        ]
        jobs.append(("audio", shown, audio))

    steps = [(r.key, r.step_seconds) for r in res.primary_runs if r.seed == seed and r.step_seconds]
    if steps:
        jobs.append(("step_times", steps, lambda: plots().step_times_figure(steps)))

    latent_series = []
    for s in (s for s in res.latents if s.seed == seed):
        label, names = run_label(res, s.key, s.arm, s.role), sorted({n for pt in s.points for n in pt.parts})
        for n in names:  # one line per named latent (video, audio): they part at different rates
            latent_series.append(
                (f"{label}: {n}", [(pt.step, pt.parts[n]) for pt in s.points if n in pt.parts])
            )
        if not names:
            latent_series.append((label, [(pt.step, pt.psnr) for pt in s.points]))
    if any(pts for _, pts in latent_series):
        jobs.append(("latents", latent_series, lambda: plots().latent_figure(latent_series)))

    if res.multi_seed:
        psnr = res.floor.band.get("psnr") if res.floor is not None else None
        band = (psnr[0], psnr[2]) if psnr is not None else None
        measured = [c for c in res.comparisons if c.video]
        per_seed = [
            (a.arm, [(c.b.seed, c.video.psnr_pooled) for c in measured if c.b.arm == a.arm])
            for a in res.arms
            if role_text(res, a.arm, a.role) == "candidate"  # floors are the band; a shadowed copy is none
        ]
        if band is not None or any(pts for _, pts in per_seed):
            jobs.append(("seeds", [per_seed, band], lambda: plots().seeds_figure(per_seed, band)))
    jobs += insitu_figure_jobs(res)
    return jobs + dose_response_jobs(res)


def dose_response_jobs(res: ReportResults) -> list[tuple[str, Any, Draw]]:
    """One figure per reading of the dose-response that has a curve with an interval."""
    dr = res.dose_response
    jobs: list[tuple[str, Any, Draw]] = []
    for metric in dict.fromkeys(c.metric for c in (dr.curves if dr else []) if c.usable()[0]):
        curves = [c for c in dr.curves if c.metric == metric]
        # one x each
        preds = [p for p in dr.predictions if p.metric == metric and p.predicted and not p.kinds]
        shown = [x.model_dump(mode="json") for x in (*curves, *preds)]
        jobs.append(
            (dose_figure(metric), shown, lambda c=curves, p=preds: plots().dose_response_figure(c, p))
        )
    return jobs


def draw_figures(res: ReportResults, assets: AssetReader, out_dir: Path, notes: list[str]) -> dict[str, Path]:
    """{figure name: PNG under ``out_dir``/assets/} for every figure there is data for (one whose inputs are
    unchanged is reused); a figure that fails is named in ``notes``, its missing assets in ``assets.missing``."""
    jobs = figure_jobs(res, assets)
    # Every figure's file is checked before any is drawn: a name that would leave assets/ (or an
    # assets/ that is a symbolic link) is refused whole, with nothing written.
    paths = {name: resolve_under(out_dir, f"assets/{name}.png", f"figure {name!r}") for name, _, _ in jobs}
    manifest_path = resolve_under(out_dir, f"assets/{MANIFEST}", "the figures' manifest")
    try:
        manifest = json.loads(manifest_path.read_text())
        manifest = manifest if isinstance(manifest, dict) else {}
    except (OSError, ValueError):
        manifest = {}
    out: dict[str, Path] = {}
    changed = False
    for name, shown, draw in jobs:
        path = paths[name]
        digest = canonical_hash({"figures": FIGURES_VERSION, "name": name, "data": shown})
        if manifest.get(name) == digest and path.is_file():
            out[name] = path
            continue
        try:
            drawn = plots().save_png(draw(), path)
        except HarnessError as err:
            notes.append(f"figure {name}: {err}")
            continue
        if drawn is not None:
            out[name] = drawn
            manifest[name] = digest
            changed = True
    if changed:
        atomic_write_json(manifest_path, manifest)
    return out
