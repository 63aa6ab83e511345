"""Bring your own runs: mp4s, LightX2V logs and config JSON become a campaign's run folders as a real
run writes them (run.json marked ``ingested`` with its sources' sha256). Every input is checked
first: a bad one is one line naming the file or field (exit 2), the campaign unchanged."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.collect.lightx2v_log import parse_lightx2v_logs
from harness.compare.cache import refuse_audio_lengths
from harness.errors import HarnessError
from harness.input_files import MAX_JSON_BYTES, MAX_LOG_BYTES, MAX_YAML_BYTES, read_input_text
from harness.media import MediaInfo, check_file, probe
from harness.records import Record, Role, RunRecord, RunSpec, RunStatus, TimingRecord, role_rank
from harness.safe_write import check_writable_dir
from harness.scenario.model import ATTN_TYPE_PATTERN, ATTN_TYPE_RULE, SafeName, Seed, check_seed
from harness.store import (
    OUTPUT_MP4,
    TIMING_JSON,
    ArmStatus,
    CampaignDir,
    CampaignRecord,
    sha256_file,
    utcnow,
    write_record,
)

RUNNER = "ingested"
CONFIG_JSON_NAME = "config.json"
LIGHTX2V_DEFAULT_SEED = 42  # LightX2V's infer.py --seed default
LOGS_DIR = "logs"


def bad(msg: str) -> HarnessError:
    return HarnessError(msg, exit_code=2)


def check_attn_type(value: Any, what: str) -> str:
    """``value`` if an identifier (reports show it as a name), else one line naming ``what``: exit 2."""
    if isinstance(value, str) and re.fullmatch(ATTN_TYPE_PATTERN, value):
        return value
    raise bad(f"{what}: {repr(value)[:60]} is not a valid attention type ({ATTN_TYPE_RULE})")


class IngestArm(BaseModel):
    """One arm to ingest (a manifest's ``arms`` entry, or the command-line flags)."""

    model_config = ConfigDict(extra="forbid")

    name: SafeName  # becomes a folder name
    mp4: Path
    logs: list[Path] = Field(default_factory=list)
    config: Path | None = None
    role: Role = Role.candidate
    seed: Seed | None = None  # default: the config's "seed", else LightX2V's default (42)
    repeat: int | None = Field(None, ge=1)  # default: numbered in the order given, per arm and seed
    attn_type: str | None = None  # default: the config's "attn_type"
    gpu: str | None = None  # where it ran, free text (shown in history)


class IngestManifest(BaseModel):
    """``harness ingest manifest.yaml``: a campaign folder and its arms; paths relative to the manifest."""

    model_config = ConfigDict(extra="forbid")

    campaign: Path  # reports/<scenario>/<campaign-id>
    scenario: SafeName | None = None  # default: the campaign's parent folder name
    gpu: str | None = None  # default for every arm
    arms: list[IngestArm]


class SourceFile(Record):
    path: str  # as given (absolute)
    sha256: str
    copied_to: str | None = None  # relative to the run folder


class Ingested(Record):
    """run.json's ``ingested`` block: where the run came from."""

    at: str
    mp4: SourceFile
    logs: list[SourceFile] = Field(default_factory=list)
    config: SourceFile | None = None
    seed_from: str = "given"  # given | config | lightx2v default
    attn_type_from: str = "given"  # given | config
    frames: int | None = None
    width: int | None = None
    height: int | None = None


class IngestedRunRecord(RunRecord):
    """run.json of an ingested run: a RunRecord with the ``ingested`` block (older readers ignore it)."""

    ingested: Ingested


@dataclass
class Prepared:  # an arm checked and ready to write
    arm: IngestArm
    spec: RunSpec
    timing: TimingRecord | None
    info: MediaInfo


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_input_text(path, "config JSON", max_bytes=MAX_JSON_BYTES))
    except json.JSONDecodeError as err:
        raise bad(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None
    if not isinstance(data, dict):
        raise bad(f"{path}: config JSON must be an object, got {type(data).__name__}")
    return data


def _world_size(config: dict[str, Any] | None) -> int | None:
    """Ranks of the run by its config's ``parallel`` sizes (None: not said)."""
    par = (config or {}).get("parallel")
    if not isinstance(par, dict):
        return None
    sizes = [v for k, v in par.items() if k.endswith("_p_size") and isinstance(v, int) and v > 0]
    return math.prod(sizes) if sizes else None


def _timing(arm: IngestArm, config: dict[str, Any] | None = None) -> TimingRecord | None:
    if not arm.logs:
        return None
    texts: dict[str, str] = {}
    for log in arm.logs:
        if str(log) in texts:
            raise bad(f"{log}: log given twice for arm {arm.name!r}")
        texts[str(log)] = read_input_text(log, "log", max_bytes=MAX_LOG_BYTES)
    # Implausible values (a stray rank, a cost of 1e400 s) and a step count other than the
    # config's are one line naming the file (and line): exit 2, nothing written.
    timing = parse_lightx2v_logs(
        texts, world_size=_world_size(config), infer_steps=(config or {}).get("infer_steps")
    )
    if not timing.steps:
        names = ", ".join(str(p) for p in arm.logs)
        raise bad(
            f"{names}: no DiT step times (no '[Profile] ... Run Dit every step cost' line; "
            "LightX2V logs them with PROFILING_DEBUG_LEVEL >= 1)"
        )
    return timing


def prepare_arm(arm: IngestArm, scenario: str) -> Prepared:
    """Check one arm's inputs (files, config, logs, video) without writing anything."""
    mp4 = check_file(arm.mp4, "mp4")
    try:
        info = probe(mp4)
    except HarnessError as err:
        raise bad(str(err)) from None
    config = _read_config(arm.config) if arm.config is not None else None
    seed, seed_from = arm.seed, "given"
    cfg_seed = (config or {}).get("seed")
    if cfg_seed is not None:  # the same rule as --seed and the manifest's seed
        check_seed(cfg_seed, str(arm.config))
    if seed is not None and cfg_seed is not None and int(cfg_seed) != seed:
        raise bad(f"{arm.config}: seed {cfg_seed} in the config, but {seed} given for arm {arm.name!r}")
    if seed is None and cfg_seed is not None:
        seed, seed_from = int(cfg_seed), "config"
    elif seed is None:
        seed, seed_from = LIGHTX2V_DEFAULT_SEED, "lightx2v default"
    attn_type, attn_from = arm.attn_type, "given"
    if attn_type is None:
        attn_type, attn_from = (config or {}).get("attn_type"), "config"
    if attn_type in (None, ""):
        where = f"{arm.config} has no attn_type" if arm.config else "no config JSON given"
        raise bad(f"arm {arm.name!r}: attention type not given (--attn-type) and {where}")
    attn_type = check_attn_type(  # a manifest's: checked where it is read (its file and line)
        attn_type, "--attn-type" if attn_from == "given" else f"{arm.config}: attn_type"
    )
    timing = _timing(arm, config)
    spec = RunSpec(
        scenario=scenario,
        runner=RUNNER,
        arm=arm.name,
        seed=seed,
        attn_type=str(attn_type),
        role=arm.role,
        repeat=arm.repeat or 1,
        params={"ingested": True, "seed_from": seed_from, "attn_type_from": attn_from},
    )
    return Prepared(arm, spec, timing, info)


def _number_repeats(prepared: list[Prepared]) -> None:
    """Repeats not given: 1, 2, ... per (arm, seed) in the order given."""
    count: dict[tuple[str, int], int] = {}
    for p in prepared:
        k = (p.arm.name, p.spec.seed)
        if p.arm.repeat is None:
            p.spec.repeat = count.get(k, 0) + 1
        count[k] = max(count.get(k, 0), p.spec.repeat)


def _check_campaign(
    camp: CampaignDir, prepared: list[Prepared], existing: list[ArmStatus], force: bool
) -> list[ArmStatus]:
    """Runs unique, no silent overwrite, a reference per seed, videos of one size and length; returns
    the runs of ``existing`` that stay."""
    ids = [(p.arm.name, p.spec.seed, p.spec.repeat) for p in prepared]
    dup = next((p for p, i in zip(prepared, ids, strict=True) if ids.count(i) > 1), None)
    if dup is not None:
        raise bad(f"arm {dup.arm.name!r} seed {dup.spec.seed} repeat {dup.spec.repeat} is given twice")
    roles: dict[str, Role] = {}
    for p in prepared:
        if roles.setdefault(p.arm.name, p.spec.role) != p.spec.role:
            raise bad(
                f"arm {p.arm.name!r}: role {p.spec.role.value} in one entry, {roles[p.arm.name].value} in another"
            )
    mine = set(ids)
    a = next((a for a in existing if (a.arm, a.seed, a.repeat) in mine), None)
    if a is not None and not force:
        raise bad(
            f"arm {a.arm!r} seed {a.seed} repeat {a.repeat} is already in the campaign (--force replaces it)"
        )
    kept = [a for a in existing if (a.arm, a.seed, a.repeat) not in mine]
    refs = [(a.arm, a.seed) for a in kept if a.role == "reference"]
    refs += [(p.arm.name, p.spec.seed) for p in prepared if p.spec.role == Role.reference]
    if len({n for n, _ in refs}) > 1:
        raise bad(f"two reference arms: {', '.join(sorted({n for n, _ in refs}))} (a campaign has one)")
    ref_seeds = {s for _, s in refs}
    if refs:
        for p in prepared:
            if p.spec.seed not in ref_seeds:
                raise bad(
                    f"arm {p.arm.name!r}: seed {p.spec.seed} but the reference ran seed "
                    f"{', '.join(map(str, sorted(ref_seeds)))} (outputs of different seeds are not comparable)"
                )
        for a in kept:
            if a.seed not in ref_seeds:
                raise bad(
                    f"arm {a.arm!r} already in the campaign has seed {a.seed}, the new reference {sorted(ref_seeds)}"
                )
    refs = {p.spec.seed: (str(p.arm.mp4), p.info) for p in prepared if p.spec.role == Role.reference}
    for p in (p for p in prepared if p.spec.role != Role.reference):
        if p.spec.seed not in refs:
            refs[p.spec.seed] = _existing_reference(camp, kept, p.spec.seed)
        ref_name, ref_info = refs[p.spec.seed]
        if ref_info is not None:
            _check_like_reference(p.arm.mp4, p.info, ref_name, ref_info)
    return kept


def _check_like_reference(mp4: Path, b: MediaInfo, ref_name: str, a: MediaInfo) -> None:
    """A run's video and audio as its seed's reference has them: what a report compares."""
    if (a.width, a.height) != (b.width, b.height):
        raise bad(f"{mp4}: {b.width}x{b.height}, the reference {ref_name} is {a.width}x{a.height}")
    if a.frames != b.frames:
        raise bad(
            f"{mp4}: {b.frames} frames, the reference {ref_name} has {a.frames} "
            "(a report compares equal lengths; `harness compare --truncate` compares the files)"
        )
    if a.has_audio != b.has_audio:
        has = ("an audio track", "none") if b.has_audio else ("no audio track", "one")
        raise bad(f"{mp4}: {has[0]}, the reference {ref_name} has {has[1]}")
    if not a.has_audio:
        return
    if a.audio_channels != b.audio_channels:
        raise bad(
            f"{mp4}: {b.audio_channels} audio channel(s), the reference {ref_name} has {a.audio_channels}"
        )
    if a.audio_samples and b.audio_samples and a.audio_rate and b.audio_rate:
        try:  # the rule a report applies: within one video frame's samples
            refuse_audio_lengths(
                ref_name, mp4, (a.audio_samples, b.audio_samples), (a.audio_rate, b.audio_rate), a.fps
            )
        except HarnessError:
            raise bad(
                f"{mp4}: {b.audio_samples / b.audio_rate:.3f} s of audio, the reference {ref_name} has "
                f"{a.audio_samples / a.audio_rate:.3f} s (a report compares equal lengths)"
            ) from None


def _existing_reference(camp: CampaignDir, kept: list[ArmStatus], seed: int):
    """(name, media info) of the seed's reference run already in the campaign, or (None, None)."""
    for a in kept:
        if a.role == "reference" and a.seed == seed:
            out = camp.run(a.key).output
            if out.is_file():
                try:
                    return str(out), probe(out)
                except HarnessError:
                    return None, None
    return None, None


def _copy(src: Path, folder: Path, rel: str) -> SourceFile:
    dest = folder / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    sha = sha256_file(dest)
    if sha != sha256_file(src):
        raise HarnessError(f"{src}: changed while being copied")
    return SourceFile(path=str(Path(src).resolve()), sha256=sha, copied_to=rel)


def _write_run(p: Prepared, folder: Path) -> IngestedRunRecord:
    """Write one run folder (output.mp4, logs, config.json, timing.json, run.json) into ``folder``."""
    mp4 = _copy(p.arm.mp4, folder, OUTPUT_MP4)
    logs, used = [], set()
    for i, log in enumerate(p.arm.logs):
        name = Path(log).name if Path(log).name not in used else f"{i}_{Path(log).name}"
        used.add(name)
        logs.append(_copy(log, folder, f"{LOGS_DIR}/{name}"))
    config = _copy(p.arm.config, folder, CONFIG_JSON_NAME) if p.arm.config is not None else None
    if p.timing is not None:
        write_record(folder / TIMING_JSON, p.timing)
    rec = IngestedRunRecord(
        spec=p.spec,
        spec_hash=p.spec.spec_hash(),
        status=RunStatus.ok,
        outputs={OUTPUT_MP4: mp4.sha256},
        gpu=p.arm.gpu,
        executor=RUNNER,
        ingested=Ingested(
            at=utcnow(),
            mp4=mp4,
            logs=logs,
            config=config,
            **{k: p.spec.params[k] for k in ("seed_from", "attn_type_from")},
            **{k: getattr(p.info, k) for k in ("frames", "width", "height")},
        ),
    )
    write_record(folder / "run.json", rec)
    return rec


def _campaign_record(camp: CampaignDir, scenario: str) -> CampaignRecord:
    if camp.exists():
        return camp.record()
    return CampaignRecord(
        campaign_id=camp.path.name,
        scenario_name=scenario,
        scenario={"name": scenario, "runner": RUNNER},
        runner=RUNNER,
        executor=RUNNER,
        created_at=utcnow(),
    )


class IngestResult(Record):
    campaign: str
    runs: list[str] = Field(default_factory=list)  # run folders written
    lines: list[str] = Field(default_factory=list)  # one per run: what was read from its sources


def ingest(
    campaign: Path, arms: list[IngestArm], *, scenario: str | None = None, force: bool = False
) -> IngestResult:
    """Check every arm, then write each run folder (temp folder + rename) and campaign.json."""
    camp = CampaignDir(Path(campaign))
    if camp.path.exists() and not camp.path.is_dir():
        raise bad(f"{camp.path}: not a folder")
    if not camp.exists() and camp.path.is_dir() and any(camp.path.iterdir()):
        raise bad(f"{camp.path}: folder exists, is not empty and is not a campaign (no campaign.json)")
    rec = _campaign_record(camp, scenario or camp.path.parent.name or "ingested")
    if scenario and camp.exists() and scenario != rec.scenario_name:
        raise bad(f"{camp.path}: campaign of scenario {rec.scenario_name!r}, not {scenario!r}")
    if not arms:
        raise bad("no arm to ingest")
    inputs = sorted({a.input for a in rec.arms if a.input is not None})
    if inputs:  # an outside run names no input: which input's reference it pairs with is unknown
        raise bad(
            f"{camp.path}: a campaign of several inputs ({', '.join(inputs)}): ingest adds runs to campaigns of one input only"
        )
    prepared = [prepare_arm(a, rec.scenario_name) for a in arms]
    _number_repeats(prepared)
    kept = _check_campaign(camp, prepared, rec.arms, force)
    multi = len({a.seed for a in kept} | {p.spec.seed for p in prepared}) > 1
    single = next((a.key for a in kept if multi and "@" not in a.key), None)
    if single is not None:
        raise bad(
            f"{camp.path}: run {single} was ingested as the only seed; a second seed needs every run named "
            "by its seed (ingest the campaign again with all its seeds, or --force them)"
        )
    result = IngestResult(campaign=str(camp.path))
    check_writable_dir(camp.path, "campaign")  # read-only or not ours: exit 2, nothing written
    camp.runs_dir.mkdir(parents=True, exist_ok=True)
    for p in prepared:
        p.spec.multi_seed = multi
        final = camp.run(p.spec.key).path
        tmp = Path(tempfile.mkdtemp(prefix=f".{p.spec.key}.", dir=camp.runs_dir))
        try:
            written = _write_run(p, tmp)
            old = final.with_name(f".{final.name}.old")
            if final.exists():
                shutil.rmtree(old, ignore_errors=True)
                final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        rec.arms = [a for a in rec.arms if a.key != p.spec.key]
        rec.arms.append(ArmStatus.of(written))
        result.runs.append(str(final))
        src, t = written.ingested, p.timing
        if t is None:
            result.lines.append(f"{final}: no log given: no timing")
        else:
            result.lines.append(
                f"{final}: {len(t.steps)} DiT steps on {len(t.ranks)} rank(s), "
                f"s/step {t.s_per_step:.4g}, pipeline total "
                + (f"{t.pipeline_total_s:.4g} s" if t.pipeline_total_s is not None else "not logged")
                + f"; seed {p.spec.seed} ({src.seed_from}), attention {p.spec.attn_type} ({src.attn_type_from})"
            )
    rec.arms.sort(key=lambda a: (a.repeat, role_rank(a.role), a.seed))
    arm_names = list(dict.fromkeys(a.arm for a in rec.arms))
    rec.scenario = {**rec.scenario, "arms": arm_names, "seeds": sorted({a.seed for a in rec.arms})}
    camp.write(rec)
    return result


def _resolve(base: Path, p: Path | None) -> Path | None:
    return p if p is None or p.is_absolute() else Path(os.path.normpath(base / p))


def load_manifest(path: Path) -> IngestManifest:
    """A manifest from YAML; a problem is one line with the file, the line and the field."""
    from harness.strict_yaml import YamlProblem, format_loc, line_for, line_map, load_yaml

    p = Path(path)
    text = read_input_text(p, "manifest", max_bytes=MAX_YAML_BYTES, allow_empty=True)
    try:
        data, node = load_yaml(text)
    except YamlProblem as err:
        raise bad(f"{p}:{err.line or 1}: {err.message}") from None
    if not isinstance(data, dict):
        raise bad(f"{p}: a manifest is a mapping with 'campaign' and 'arms'")
    lines = line_map(node) if node is not None else {}
    try:
        man = IngestManifest.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = tuple(first["loc"])
        raise bad(f"{p}:{line_for(lines, loc)}: {format_loc(loc)}: {first['msg']}") from None
    for i, a in enumerate(man.arms):
        if a.attn_type is not None:
            check_attn_type(
                a.attn_type, f"{p}:{line_for(lines, ('arms', i, 'attn_type'))}: arms[{i}].attn_type"
            )
    base = p.parent
    man.campaign = _resolve(base, man.campaign)  # type: ignore[assignment]
    here = Path.cwd().resolve()
    target = man.campaign.resolve()
    if target != here and here not in target.parents:
        raise bad(
            f"{p}:{line_for(lines, ('campaign',))}: campaign: {man.campaign} is outside the current folder {here} (a manifest writes "
            "only below where harness runs; run it from a folder above the campaign)"
        )
    for arm in man.arms:
        arm.mp4 = _resolve(base, arm.mp4)  # type: ignore[assignment]
        arm.logs = [_resolve(base, x) for x in arm.logs]  # type: ignore[misc]
        arm.config = _resolve(base, arm.config)
        arm.gpu = arm.gpu or man.gpu
    return man
