"""Latent PSNR per sampler step: where two runs' trajectories part (run_dir/latents/step_XXX.*)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from harness.errors import HarnessError
from harness.metrics.metric import psnr_from_mse
from harness.records import Record

if TYPE_CHECKING:  # numpy is imported where arrays are read: reading results needs no numpy
    import numpy as np

LATENT_CONVENTION = (
    "latent psnr=10log10(R^2/mse) on float64, R=max(ref)-min(ref) of the reference step latent, "
    "mse over all elements; per named array of step_XXX.npz and over all of them concatenated; "
    "scalars (sigmas) ignored; +inf when equal"
)


class LatentPoint(Record):
    step: int
    psnr: float  # over every latent of the step together
    max_abs_diff: float
    parts: dict[str, float] = Field(default_factory=dict)  # PSNR per named latent (npz: video, audio)


class LatentComparison(Record):
    points: list[LatentPoint] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


LATENT_SUFFIXES = (".npz", ".npy", ".pt")


def latent_files(run_dir: Path) -> dict[int, Path]:
    """run_dir/latents/step_XXX.npz|.npy|.pt -> {step: path} (empty when the run saved none)."""
    folder = Path(run_dir) / "latents"
    found: dict[int, Path] = {}
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        stem, suffix = p.stem, p.suffix.lower()
        if suffix in LATENT_SUFFIXES and stem.startswith("step_") and stem[5:].isdigit():
            found.setdefault(int(stem[5:]), p)
    return dict(sorted(found.items()))


def _arrays(obj: Any, path: Path) -> dict[str, np.ndarray]:
    """Named non-scalar arrays of a loaded latent file (scalars such as the sigma reached are skipped)."""
    import numpy as np

    items = obj.items() if isinstance(obj, dict) else [("latent", obj)]
    out: dict[str, np.ndarray] = {}
    for name, value in items:
        if hasattr(value, "detach"):  # a torch tensor
            value = value.detach().float().cpu().numpy()
        arr = np.asarray(value)
        if arr.ndim > 0 and arr.dtype.kind in "fiu":
            out[str(name)] = arr.astype(np.float64, copy=False)
    if not out:
        raise HarnessError(f"{path}: no latent array inside")
    return out


def load_latent(path: Path) -> dict[str, np.ndarray]:
    """{name: array} from step_XXX.npz (one entry per array), .npy or .pt (a tensor or a dict of them)."""
    import numpy as np

    path = Path(path)
    if path.suffix.lower() in (".npy", ".npz"):
        try:
            loaded = np.load(path, allow_pickle=False)
            if isinstance(loaded, np.ndarray):
                return _arrays(loaded, path)
            with loaded as z:
                return _arrays({k: z[k] for k in z.files}, path)
        except (OSError, ValueError, EOFError) as err:
            raise HarnessError(f"{path}: cannot read latent ({err})") from None
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several kinds for a bad file
        raise HarnessError(f"{path}: cannot read latent ({' '.join(str(err).split())[:200]})") from None
    return _arrays(obj, path)


def latent_psnr(ref: np.ndarray, test: np.ndarray) -> tuple[float, float]:
    """(PSNR in dB with the reference's range as peak, max |diff|); see LATENT_CONVENTION."""
    import numpy as np

    ref = np.asarray(ref, dtype=np.float64)
    test = np.asarray(test, dtype=np.float64)
    if ref.shape != test.shape:
        raise HarnessError(f"latent shapes differ: {ref.shape} vs {test.shape}")
    diff = ref - test
    mse = float(np.mean(diff * diff))
    max_abs = float(np.max(np.abs(diff))) if diff.size else 0.0
    peak = float(np.max(ref) - np.min(ref)) or 1.0
    return psnr_from_mse(mse, peak), max_abs


def latent_point(step: int, ref: dict[str, np.ndarray], test: dict[str, np.ndarray]) -> LatentPoint:
    """PSNR per named latent and over all of them together (flattened and concatenated)."""
    import numpy as np

    names = [n for n in ref if n in test]
    if not names:
        raise HarnessError(f"no latent in common (A has {sorted(ref)}, B has {sorted(test)})")
    parts = {n: latent_psnr(ref[n], test[n])[0] for n in names}
    if len(names) == 1:
        psnr, mad = latent_psnr(ref[names[0]], test[names[0]])
    else:
        psnr, mad = latent_psnr(
            np.concatenate([ref[n].ravel() for n in names]), np.concatenate([test[n].ravel() for n in names])
        )
    return LatentPoint(step=step, psnr=psnr, max_abs_diff=mad, parts=parts if len(names) > 1 else {})


def compare_latent_files(la: dict[int, Path], lb: dict[int, Path]) -> LatentComparison:
    """Latent PSNR of B against A at every step both runs saved (``latent_files``; each has one)."""
    out = LatentComparison()
    points, notes = out.points, out.notes
    for step in sorted(set(la) & set(lb)):
        try:
            points.append(latent_point(step, load_latent(la[step]), load_latent(lb[step])))
        except HarnessError as err:
            notes.append(f"latent step {step}: {err}")
    if set(la) != set(lb):
        notes.append(f"latent steps differ: A has {len(la)}, B has {len(lb)}; compared {len(points)} common")
    return out
