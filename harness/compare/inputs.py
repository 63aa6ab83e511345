"""What ``harness compare`` accepts on each side: a run directory, ``CAMPAIGN:ARM``, or a bare mp4.

A bare mp4 becomes a ``RunSummary`` with its file and hash and nothing else: no timing (the
speed section says "no timing"), no attention calls, role unknown. Anything else goes through
``store.resolve_run_dir`` as before.
"""

from __future__ import annotations

from pathlib import Path

from harness.compare.hashes import file_sha256
from harness.compare.summary import RunSummary, summarize_run
from harness.store import resolve_run_dir

MEDIA_SUFFIXES = (".mp4", ".mov", ".mkv", ".m4v", ".webm")
NO_TIMING = "no timing: a bare media file carries no step times"


def is_media_file(ref: str) -> bool:
    """True when ``ref`` names a media file (by suffix) rather than a run directory or CAMPAIGN:ARM."""
    return Path(ref).suffix.lower() in MEDIA_SUFFIXES and not Path(ref).is_dir()


def summarize_file(path: Path, key: str | None = None) -> RunSummary:
    """A bare mp4 as a run that ended ok: its output and hash, no timing, no attention calls."""
    from harness.media import check_file

    p = check_file(path)
    name = key or p.stem
    return RunSummary(
        key=name,
        path=str(p),
        arm=name,
        role="file",
        attn_type="unknown",
        status="ok",
        output=str(p),
        output_sha256=file_sha256(p),
        notes=[NO_TIMING],
    )


def _keys(refs: tuple[str, str]) -> tuple[str | None, str | None]:
    """Labels for two files: their stems, or parent/stem when the stems are equal."""
    paths = [Path(r) for r in refs]
    if paths[0].stem != paths[1].stem:
        return None, None
    return tuple(f"{p.parent.name}/{p.stem}" if p.parent.name else str(p) for p in paths)  # type: ignore[return-value]


def summarize_inputs(ref_a: str, ref_b: str) -> tuple[RunSummary, RunSummary]:
    """Both sides of a comparison; a file and a run directory may be mixed."""
    key_a, key_b = _keys((ref_a, ref_b)) if is_media_file(ref_a) and is_media_file(ref_b) else (None, None)
    out = []
    for ref, key in ((ref_a, key_a), (ref_b, key_b)):
        if is_media_file(ref):
            out.append(summarize_file(Path(ref), key))
        else:
            out.append(summarize_run(resolve_run_dir(ref)))
    return out[0], out[1]


def compare_inputs(ref_a: str, ref_b: str, *, truncate: bool = False, resample_audio: bool = False):
    """``harness compare A B``: runs through ``compare_runs`` (cached in their campaign), files directly."""
    from harness.compare.pairwise import compare_runs, compare_summaries

    if not (is_media_file(ref_a) or is_media_file(ref_b)):
        return compare_runs(
            resolve_run_dir(ref_a), resolve_run_dir(ref_b), truncate=truncate, resample_audio=resample_audio
        )
    a, b = summarize_inputs(ref_a, ref_b)
    cmp = compare_summaries(a, b, truncate=truncate, resample_audio=resample_audio)
    untimed = [f"{side} ({s.key})" for side, s in (("A", a), ("B", b)) if s.timing_source is None]
    if untimed:
        cmp.notes.insert(0, f"no timing for {' and '.join(untimed)}: speed not compared")
    return cmp
