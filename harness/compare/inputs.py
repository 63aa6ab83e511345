"""What ``harness compare`` accepts on each side (a run directory, ``CAMPAIGN:RUN``, or a bare mp4) and what
it refuses, one line each, before it measures, writes or prints anything (a RUN naming no run, media that
cannot be compared as given: the measurement checks the same again for the library's other callers)."""

from __future__ import annotations

import re
from pathlib import Path

from harness.compare.cache import refuse_audio_lengths
from harness.compare.hashes import PROCESS_HASHES
from harness.compare.summary import RunSummary, summarize_run
from harness.errors import HarnessError
from harness.records import RunStatus
from harness.run_keys import REPEAT_MARK, Sample, sample_key, sample_label
from harness.store import CAMPAIGN_JSON, OUTPUT_LOSSLESS, RUN_JSON, CampaignDir, RunDir, resolve_run_dir

MEDIA_SUFFIXES = (".mp4", ".mov", ".mkv", ".m4v", ".webm")
NO_TIMING = "no timing: a bare media file carries no step times"
INGEST_HINT = (
    "a verdict against the noise floor: ingest each file, and an exact floor run, into a campaign: harness "
    "ingest CAMPAIGN --arm NAME --role reference|noise_floor|candidate --attn-type TYPE --mp4 FILE, then "
    "harness report CAMPAIGN"
)


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
        output_sha256=PROCESS_HASHES.sha256(p),
        notes=[NO_TIMING],
    )


# A run folder's name, as run_keys.run_key writes it: '@' and '~' are in no arm or input name.
_RUN_KEY = re.compile(
    rf"^(?P<arm>[^@~]+)(?:@(?:(?P<input>[^@~]+)@)?(?P<seed>\d+))?(?:{re.escape(REPEAT_MARK)}(?P<repeat>\d+))?$"
)


def parse_run_key(key: str) -> tuple[str, Sample | None, int] | None:
    """(arm, sample (``records.sample_label``), repeat) of a run folder's name; None: not one."""
    if (m := _RUN_KEY.match(key)) is None:
        return None
    sample = None if m["seed"] is None else sample_label(int(m["seed"]), m["input"])
    return m["arm"], sample, int(m["repeat"] or 1)


def _arm_runs(camp: CampaignDir, arm: str) -> list[tuple[str, Sample | None, int]]:
    """(key, sample, repeat) of the arm's runs in the campaign, by seed, input, then repeat."""
    runs = [(run.key, p[1], p[2]) for run in camp.runs() if (p := parse_run_key(run.key)) and p[0] == arm]
    return sorted(runs, key=lambda r: (sample_key(r[1]) if r[1] is not None else (-1, ""), r[2]))


def _how_to_name(camp: str, arm: str, runs: list[tuple[str, Sample | None, int]]) -> str:
    """'4 runs (seeds 42, 43 x 2 repeats): name one as CAMP:arm@SEED (repeat 1) or ..., e.g. CAMP:arm@42'."""
    if len(runs) == 1:
        return f"1 run: {camp}:{runs[0][0]}"
    seeds = sorted({s for _, s, _ in runs if s is not None}, key=sample_key)
    repeats = max(r for _, _, r in runs)
    parts = [f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"] if seeds else []
    parts += [f"{repeats} repeats"] if repeats > 1 else []
    what = f" ({' x '.join(parts)})" if parts else ""
    at = "@INPUT@SEED" if any(isinstance(s, str) for s in seeds) else "@SEED" if seeds else ""
    base = f"{camp}:{arm}{at}"
    shapes = f"{base} (repeat 1) or {base}{REPEAT_MARK}N (repeat N >= 2)" if repeats > 1 else base
    examples = " or ".join(f"{camp}:{k}" for k in dict.fromkeys([runs[0][0], runs[-1][0]]))
    return f"{len(runs)} runs{what}: name one as {shapes}, e.g. {examples}"


def resolve_run(ref: str) -> RunDir:
    """``store.resolve_run_dir``; CAMPAIGN:RUN naming no run folder is refused with the arm's run names."""
    if ":" not in ref or (Path(ref) / RUN_JSON).exists():
        return resolve_run_dir(ref)
    camp_ref, _, key = ref.rpartition(":")
    camp = CampaignDir(Path(camp_ref))
    if camp.run(key).exists() or not camp.runs_dir.is_dir():
        return resolve_run_dir(ref)
    parsed = parse_run_key(key)
    runs = _arm_runs(camp, parsed[0]) if parsed is not None else []
    if runs:
        arm = parsed[0]
        missing = "" if key == arm else f"no run {key!r}; arm {arm} has "
        raise HarnessError(f"{ref}: {missing}{_how_to_name(camp_ref, arm, runs)}")
    arms = sorted({p[0] for p in (parse_run_key(r.key) for r in camp.runs()) if p is not None})
    if not arms:
        return resolve_run_dir(ref)
    raise HarnessError(f"{ref}: campaign {camp_ref} has no arm {key!r} (its arms: {', '.join(arms)})")


def other_repeats_note(side: str, run: RunDir) -> str | None:
    """A note when the run named is one repeat of several (the others are not compared here)."""
    parsed = parse_run_key(run.key)
    if parsed is None or not (run.path.parent.parent / CAMPAIGN_JSON).exists():
        return None
    arm, seed, repeat = parsed
    same = [r for r in _arm_runs(CampaignDir(run.path.parent.parent), arm) if r[1] == seed]
    if len(same) < 2:
        return None
    others = ", ".join(k for k, _, r in same if r != repeat)
    return f"{side} ({run.key}) is repeat {repeat} of {len(same)} of its arm and seed; not compared here: {others}"


def _nonempty(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def measured_files(run_a: RunDir, run_b: RunDir) -> tuple[Path, Path] | None:
    """The files a pair of runs is measured on (lossless twins when both have one); None when a run did not
    end ok or has no output (reported as not measured, not refused here)."""
    runs = (run_a, run_b)
    if not all((rec := r.record_or_none()) is not None and rec.status == RunStatus.ok for r in runs):
        return None
    if not all(_nonempty(r.output) for r in runs):
        return None
    twins = (run_a.file(OUTPUT_LOSSLESS), run_b.file(OUTPUT_LOSSLESS))
    return twins if all(_nonempty(t) for t in twins) else (run_a.output, run_b.output)


def refuse_incomparable(a: Path, b: Path, *, truncate: bool = False, resample_audio: bool = False) -> None:
    """Raise one line (exit 2) when ``b`` cannot be compared against ``a`` with these options."""
    from harness.collect.suite import check_compatible
    from harness.media import iter_audio, probe

    ia, ib = probe(a), probe(b)
    check_compatible(a, b, ia, ib, truncate, resample_audio, cli=True)
    rates = (int(ia.audio_rate or 0), int(ib.audio_rate or 0))
    if ia.has_audio and not truncate and min(rates) > 0:
        # samples per channel, decoded (container durations are not exact)
        samples = [sum(block.shape[1] for block in iter_audio(p)) for p in (a, b)]
        refuse_audio_lengths(a, b, (samples[0], samples[1]), rates, ia.fps, cli=True)


def compare_inputs(ref_a: str, ref_b: str, *, truncate: bool = False, resample_audio: bool = False):
    """``harness compare A B``: runs through ``compare_runs``, files directly, refusals first."""
    from harness.compare.pairwise import compare_runs, compare_summaries

    if not (is_media_file(ref_a) or is_media_file(ref_b)):
        run_a, run_b = resolve_run(ref_a), resolve_run(ref_b)
        files = measured_files(run_a, run_b)
        if files is not None:
            refuse_incomparable(*files, truncate=truncate, resample_audio=resample_audio)
        cmp = compare_runs(run_a, run_b, truncate=truncate, resample_audio=resample_audio)
        notes = [other_repeats_note(side, run) for side, run in (("A", run_a), ("B", run_b))]
        cmp.notes[:0] = [n for n in notes if n]
        return cmp
    # a file and a run directory may be mixed; two files of one stem are labelled parent/stem
    paths = [Path(ref_a), Path(ref_b)]
    same = all(map(is_media_file, (ref_a, ref_b))) and paths[0].stem == paths[1].stem
    keys = [(f"{p.parent.name}/{p.stem}" if p.parent.name else str(p)) if same else None for p in paths]
    a, b = (
        summarize_file(p, key) if is_media_file(str(p)) else summarize_run(resolve_run(ref))
        for ref, p, key in zip((ref_a, ref_b), paths, keys, strict=True)
    )
    if a.ok and b.ok and a.output and b.output:
        refuse_incomparable(Path(a.output), Path(b.output), truncate=truncate, resample_audio=resample_audio)
    cmp = compare_summaries(a, b, truncate=truncate, resample_audio=resample_audio)
    untimed = [f"{side} ({s.key})" for side, s in (("A", a), ("B", b)) if s.timing_source is None]
    if len(untimed) == 1:  # neither timed: the comparison's headline says so
        cmp.notes.insert(0, f"no timing for {untimed[0]}: speed not compared")
    if a.role == b.role == "file":
        cmp.notes.insert(0, INGEST_HINT)
    return cmp
