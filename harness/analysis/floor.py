"""The noise floor as a band over perturbations x seeds, and the codec floor of the reference (the only
media this module reads, cached under the reference's sha256 and codec settings)."""

from __future__ import annotations

import contextlib
import math
import statistics
from typing import Any

from harness.analysis.energy import PairErrors, mse_from_psnr, pooled_psnr
from harness.analysis.frames import Progress
from harness.analysis.model import CodecFloorRow, FloorSummary, ReportResults
from harness.analysis.verdict import video_regime
from harness.collect.models import CodecSettings, PairResult
from harness.compare.cache import MetricsCache
from harness.compare.pairwise import Comparison
from harness.compare.summary import RunSummary
from harness.errors import HarnessError
from harness.metrics.metric import accuracy_metrics, in_order
from harness.number_format import fmt_db, ratio_text
from harness.records import Record
from harness.scenario.verdict import VerdictRules
from harness.store import CampaignDir

CODEC_FLOOR_VERSION = 2  # 2: a re-encode's video against its lossless twin
DECODE_VERSION = 2  # 2: the one conversion of pixel_formats (range tag honoured, no chroma interpolation)


class CodecFloor(Record):
    """The cached codec floor of one run's output (``collect.codec_floor``)."""

    method: str  # lossless | re-encode
    settings: CodecSettings
    decode: str = ""  # how the mp4's frames became RGB
    result: PairResult


class DecodeConvention(Record):
    text: str


def floor_kind(c: Comparison) -> str:
    """What a floor run changes: its perturbation, or the exact kernel it runs instead."""
    if c.b.perturbation:
        return c.b.perturbation
    if c.b.attn_type != c.a.attn_type:
        return f"another exact kernel: {c.b.attn_type}"
    return "the reference's backend again (no perturbation)"


def floor_summary(floors: list[Comparison], rules: VerdictRules) -> FloorSummary | None:
    measured = [c for c in floors if c.measured]
    if not measured:
        return None
    f = FloorSummary(
        arms=list(dict.fromkeys(c.b.arm for c in measured)),
        keys=[c.b.key for c in measured],
        perturbations={c.b.arm: floor_kind(c) for c in measured},
    )
    f.psnr_pooled = pooled_psnr([PairErrors.from_comparison(c) for c in measured])
    for metric in accuracy_metrics():
        vals = sorted(x for x in (metric.get(c) for c in measured) if x is not None and not math.isnan(x))
        if vals:
            f.band[metric.key] = [vals[0], statistics.median(vals), vals[-1]]
    for seed in dict.fromkeys(c.b.seed for c in measured):
        psnr = pooled_psnr([PairErrors.from_comparison(c) for c in measured if c.b.seed == seed])
        f.per_seed_psnr[str(seed)] = psnr
        f.regimes[str(seed)] = video_regime(psnr, rules)
    f.chaotic = any(r == "chaotic" for r in f.regimes.values())
    n_arms, n_seeds = len(f.arms), len({c.b.seed for c in measured})
    runs = f"{len(measured)} floor run(s) ({n_arms} perturbation(s) x {n_seeds} seed(s))"
    f.text = f"{runs}: pooled video PSNR {fmt_db(f.psnr_pooled)}"
    if n_seeds > 1:
        f.text += "; per seed " + ", ".join(
            f"{s}: {fmt_db(p)} ({f.regimes[s]})" for s, p in f.per_seed_psnr.items()
        )
    if f.chaotic:
        f.text += (
            f"; a seed below {rules.chaotic_below_db - rules.chaotic_band_db / 2:g} dB is chaotic: exact attention "
            "alone gives a different video, so pixel metrics against one reference do not measure attention "
            "accuracy there"
        )
    return f


def decode_convention(run: RunSummary, cache: MetricsCache) -> str:
    """How a run's output.mp4 frames become RGB, from the cache while the file is unchanged."""
    assert run.output is not None and run.output_sha256 is not None
    name, key = f"{run.key}.decode", {"sha256": run.output_sha256}
    hit = cache.get(name, "decode", DECODE_VERSION, key, DecodeConvention)
    if hit is not None:
        return hit.text
    from harness.collect.codec_floor import decode_convention as read_convention

    text = read_convention(run.output)
    cache.put(name, "decode", DECODE_VERSION, key, DecodeConvention(text=text))
    return text


def pixel_source(comparisons: list[Comparison], primary: list[RunSummary], cache: MetricsCache) -> str:
    """What the pixel metrics were taken on: the lossless copies, or the mp4 as it is decoded."""
    from harness.media import LOSSLESS_CONVENTION

    if all(c.options.get("lossless") for c in comparisons):
        return f"lossless copies (output_lossless.mkv: {LOSSLESS_CONVENTION}): before compression"
    first = next((r for r in primary if r.output), None)
    decode = ""
    if first is not None:
        try:
            decode = decode_convention(first, cache)
        except HarnessError:
            decode = "decode convention unreadable"
    return f"output.mp4 as decoded: {decode}"


def codec_floor_cached(ref: RunSummary, campaign: CampaignDir, cache: MetricsCache) -> CodecFloor | None:
    """The codec floor of the reference's output, cached under its hashes and its run's codec settings."""
    if ref.output is None or ref.output_sha256 is None:
        return None
    crf = preset = None
    with contextlib.suppress(HarnessError):  # no readable run record: read off the file instead
        pipeline = campaign.run(ref.key).record().spec.params.get("pipeline") or {}
        crf, preset = pipeline.get("crf"), pipeline.get("x264_preset")
    method = "lossless" if ref.lossless else "re-encode"
    name = f"{ref.key}.codec_floor"
    key = {
        "sha256": ref.output_sha256,
        "lossless_sha256": ref.lossless_sha256 if ref.lossless else None,
        "crf": crf,
        "preset": preset,
    }
    entry = cache.get(name, "codec_floor", CODEC_FLOOR_VERSION, key, CodecFloor)
    if entry is not None and entry.method == method:
        return entry
    from harness.collect.codec_floor import encoder_settings, measure_codec_floor

    settings = encoder_settings(ref.output, crf=crf, preset=preset)
    result, method = measure_codec_floor(ref.output, settings, lossless=ref.lossless)
    entry = CodecFloor(method=method, settings=settings, decode=decode_convention(ref, cache), result=result)
    cache.put(name, "codec_floor", CODEC_FLOOR_VERSION, key, entry)
    return entry


def _codec_values(video: Any, audio: Any) -> dict[str, Any]:
    """The codec floor's figures as ``CodecFloorRow`` holds them: video under its field, audio its key."""
    out: dict[str, Any] = {}
    for m in in_order():
        if m.modality == "video":
            out[m.field] = m.read(video)
            if m.worst_frame:
                out[m.worst_frame] = getattr(video, m.worst_frame)
        else:
            out[m.key] = m.read(audio)
    return {k: x for k, x in out.items() if k in CodecFloorRow.model_fields}


def codec_floor_row(res: ReportResults, campaign: CampaignDir, cache: MetricsCache, say: Progress) -> None:
    """``res.codec_floor``: the reference's codec floor (primary seed) with its share of the floor."""
    refs = [r for r in res.primary_runs if r.arm == res.reference_arm and r.seed == res.primary_seed]
    ref = next((r for r in refs if r.output), None)
    if ref is None or not ref.ok:
        return
    say(f"codec floor of {ref.key}")
    try:
        entry = codec_floor_cached(ref, campaign, cache)
    except HarnessError as err:
        res.notes.append(f"codec floor of {ref.key} not measured: {err}")
        return
    if entry is None:
        return
    v, a = entry.result.video, entry.result.audio
    row = CodecFloorRow(
        key=ref.key,
        method=entry.method,
        settings=entry.settings,
        decode=entry.decode,
        **_codec_values(v, a),
        mse=v.mse_mean,
    )
    how = (
        "the decoded output.mp4 against the run's lossless copy: the error of the encode the run made"
        if entry.method == "lossless"
        else "the reference's decoded frames and audio encoded again with the run's codec settings (video against "
        "the lossless twin of that encode, so the colour conversion both share is not counted; audio against the "
        "decoded reference): a second-generation estimate, usually smaller than the first encode's error"
    )
    row.text = f"codec floor ({entry.settings.text()}): {how}; {fmt_db(v.psnr_pooled)} pooled"
    floor_psnr = res.floor.psnr_pooled if res.floor is not None else None
    floor_mse = mse_from_psnr(floor_psnr) if floor_psnr is not None and not math.isinf(floor_psnr) else None
    if floor_mse and v.mse_mean is not None:
        row.share_of_floor = share = v.mse_mean / floor_mse
        if res.pixel_source.startswith("lossless"):
            limits = (
                "pixel metrics are taken on the lossless copies, before compression: the codec is not in them"
            )
        elif share >= 0.5:
            limits = (
                "the codec's error is of the floor's order or larger, so the pixel figures mix compression "
                "with attention (two encodes of nearly equal frames err alike: their difference is not codec "
                "error plus attention error); lossless copies (builtin: {lossless: true}) take them before "
                "compression"
            )
        elif share >= 0.1:
            limits = "the codec's error is a visible part of the pixel figures"
        else:
            limits = "the floor's pixel error is well above the codec's"
        row.text += f"; its error energy is {ratio_text(share)} the noise floor's: {limits}"
    res.codec_floor = row
