"""What ``harness compare`` refuses before it measures or prints anything: two media files that
cannot be compared as given, in one line naming both files, what differs and, where one exists,
the flag that compares them anyway (``--truncate``, ``--resample-audio``). The measurement checks
the same again (``collect.suite``, ``cache.check_audio_length``) for the library's other callers.
"""

from __future__ import annotations

from pathlib import Path

from harness.compare.cache import refuse_audio_lengths
from harness.records import RunStatus
from harness.store import OUTPUT_LOSSLESS, RunDir


def _nonempty(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def measured_files(run_a: RunDir, run_b: RunDir) -> tuple[Path, Path] | None:
    """The files a pair of runs is measured on (their lossless twins when both wrote one, as
    ``cache.use_lossless``); None when a run did not end ok or has no output: that is reported
    as not measured (exit 3), not refused here."""
    runs = (run_a, run_b)
    if not all((rec := r.record_or_none()) is not None and rec.status == RunStatus.ok for r in runs):
        return None
    if not all(_nonempty(r.output) for r in runs):
        return None
    twins = (run_a.file(OUTPUT_LOSSLESS), run_b.file(OUTPUT_LOSSLESS))
    return twins if all(_nonempty(t) for t in twins) else (run_a.output, run_b.output)


def audio_samples(path: Path) -> int:
    """Samples per channel of a file's audio track, decoded (container durations are not exact)."""
    from harness.media import iter_audio

    return sum(block.shape[1] for block in iter_audio(path))


def refuse_incomparable(a: Path, b: Path, *, truncate: bool = False, resample_audio: bool = False) -> None:
    """Raise one line (exit 2) when ``b`` cannot be compared against ``a`` with these options;
    an unreadable file is named by ``media.probe``."""
    from harness.collect.suite import check_compatible
    from harness.media import probe

    ia, ib = probe(a), probe(b)
    check_compatible(a, b, ia, ib, truncate, resample_audio, cli=True)
    rates = (int(ia.audio_rate or 0), int(ib.audio_rate or 0))
    if ia.has_audio and not truncate and min(rates) > 0:
        refuse_audio_lengths(a, b, (audio_samples(a), audio_samples(b)), rates, ia.fps, cli=True)
