"""One arm of the diffusers runner, in its own process (``python -m harness.runners.diffusers.launch
RUN_DIR``): output.mp4, timing.json, diffusers_env.json and attn_calls.json (also when it fails). A DiT
step runs from its first transformer forward to its step-end callback, whose own work is outside it."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import Field

from harness.attention.wrappers import make_attention
from harness.envinfo import package_versions, resolve_device
from harness.records import AttnCallsRecord, RankCalls, Record, RunSpec, StepTiming, TimingRecord
from harness.runners.common import LATENTS_DIR, SPEC_JSON, print_step, run_dir_main, write_step_latents
from harness.runners.diffusers.dispatch import CallBook, Instrument
from harness.runners.diffusers.schema import CALL_KEYS, DIFFUSERS_ENV_JSON, PIPELINES
from harness.scenario.plugins import load_recorded
from harness.store import ATTN_CALLS_JSON, OUTPUT_LOSSLESS, OUTPUT_MP4, TIMING_JSON, read_record, write_record
from harness.tiny_ref2av.model import synchronize
from harness.tiny_ref2av.run import exact_matmul

ENV_PACKAGES = ("diffusers", "transformers", "tokenizers", "torch", "sageattention", "flash-attn", "xformers")

DIT_COMPONENTS = ("transformer", "transformer_2")
TOKEN_ARGS = {"video": "hidden_states", "audio": "audio_hidden_states", "text": "encoder_hidden_states"}
# Components timed as stages: (component, method) -> stage name.
STAGES = {
    ("text_encoder", "forward"): "text_encoder",
    ("connectors", "forward"): "text_encoder",
    ("image_encoder", "forward"): "image_encoder",
    ("vae", "encode"): "vae_encode",
    ("vae", "decode"): "vae_decode",
    ("audio_vae", "decode"): "audio_decode",
    ("vocoder", "forward"): "audio_decode",
}


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def dit_modules(pipe: Any) -> list[tuple[str, torch.nn.Module]]:
    return [(n, getattr(pipe, n)) for n in DIT_COMPONENTS if getattr(pipe, n, None) is not None]


def call_arguments(params: dict[str, Any], seed: int) -> dict[str, Any]:
    """One run's pipeline call (``params``: the spec's ``pipeline``), less the callback."""
    kind = PIPELINES[params["name"]]
    kwargs: dict[str, Any] = {
        **{key: params[key] for key in CALL_KEYS},
        # A CPU generator: the same initial noise on every device.
        "generator": torch.Generator("cpu").manual_seed(seed),
        "output_type": "np",
        **params["call_kwargs"],
    }
    if params.get("max_sequence_length"):
        kwargs["max_sequence_length"] = params["max_sequence_length"]
    if kind.family == "ltx2":
        kwargs["frame_rate"] = params["frame_rate"]
    if kind.needs_image:
        from PIL import Image

        with Image.open(params["image_path"]) as img:
            kwargs["image"] = img.convert("RGB")
    return kwargs


class Clock:
    """Synchronised stage times and DiT steps, fed by hooks on the pipeline's components."""

    def __init__(self, device: torch.device):
        self.device = device
        self.stages: dict[str, float] = {}
        self.steps: list[StepTiming] = []
        self.step_start: float | None = None
        self.layout: dict[str, int] | None = None
        self._hooks: list[Any] = []
        self._restore: list[tuple[Any, str, Any]] = []

    def now(self) -> float:
        synchronize(self.device)
        return time.perf_counter()

    def watch_dit(self, module: torch.nn.Module, patch: tuple[int, ...] | None) -> None:
        def before(_module, _args, kwargs):
            if self.step_start is None:
                self.step_start = self.now()
            if self.layout is None:
                self.layout = token_layout(kwargs, patch)

        self._hooks.append(module.register_forward_pre_hook(before, with_kwargs=True))

    def watch_stage(self, owner: Any, method: str, stage: str) -> None:
        """Time ``owner.method`` (a module's forward too: wrapped on the instance, restored by ``close``)."""
        original = getattr(owner, method)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = self.now()
            try:
                return original(*args, **kwargs)
            finally:
                self.stages[stage] = self.stages.get(stage, 0.0) + self.now() - t0

        self._restore.append((owner, method, owner.__dict__.get(method)))
        setattr(owner, method, timed)

    def step_done(self, index: int) -> None:
        end = self.now()
        start = self.step_start if self.step_start is not None else end
        self.steps.append(StepTiming(index=index, seconds=end - start, per_rank={"0": end - start}))
        self.step_start = None

    def close(self) -> None:
        for handle in self._hooks:
            handle.remove()
        for owner, method, before in self._restore:
            if before is None:
                delattr(owner, method)
            else:
                setattr(owner, method, before)
        self._hooks, self._restore = [], []


def token_layout(kwargs: dict[str, Any], patch: tuple[int, ...] | None) -> dict[str, int]:
    """Token counts of one DiT call: video (and audio) tokens, text tokens."""
    video = kwargs.get("hidden_states")
    out: dict[str, int] = {}
    if isinstance(video, torch.Tensor) and video.ndim == 5 and patch:  # Wan: [B, C, F, H, W], patchified
        f, h, w = video.shape[2:]
        out["video"] = (f // patch[0]) * (h // patch[1]) * (w // patch[2])
    for key, arg in TOKEN_ARGS.items():  # LTX-2's video, any audio and text: packed [B, N, C]
        tensor = kwargs.get(arg)
        if isinstance(tensor, torch.Tensor) and tensor.ndim == 3:
            out[key] = int(tensor.shape[1])
    if out:
        out["total"] = sum(out.values())
    return out


def generate(
    pipe: Any,
    params: dict[str, Any],
    *,
    seed: int,
    device: torch.device,
    out_path: Path,
    latents_dir: Path | None = None,
    on_step: Callable[[int, int], None] | None = None,
    lossless_path: Path | None = None,
) -> TimingRecord:
    """Run the pipeline once (``params``: the spec's ``pipeline`` parameters) and write ``out_path``;
    ``lossless_path`` gets the same media losslessly, its time kept out of the total."""
    from harness.media import write_av

    kind = PIPELINES[params["name"]]
    clock = Clock(device)
    for _, module in dit_modules(pipe):
        patch = getattr(module.config, "patch_size", None)
        clock.watch_dit(module, tuple(patch) if isinstance(patch, (list, tuple)) else None)
    for (component, method), stage in STAGES.items():
        owner = getattr(pipe, component, None)
        if owner is not None:
            clock.watch_stage(owner, method, stage)
    inputs = ["latents", *(["audio_latents"] if kind.audio else [])]
    if kind.audio:  # LTX-2 names its audio latents in the loop but does not list them for callbacks
        pipe._callback_tensor_inputs = [*type(pipe)._callback_tensor_inputs, "audio_latents"]
    total_steps = params["num_inference_steps"]
    saved = 0.0

    def step_end(_pipe: Any, i: int, _t: Any, tensors: dict[str, Any]) -> dict[str, Any]:
        nonlocal saved
        clock.step_done(i + 1)
        t0 = time.perf_counter()
        if latents_dir is not None:
            names = {"latents": "video", "audio_latents": "audio"}
            latents_dir.mkdir(parents=True, exist_ok=True)
            arrays = {names[k]: v.detach().float().cpu().numpy() for k, v in tensors.items() if k in names}
            write_step_latents(latents_dir, i + 1, arrays)
        saved += time.perf_counter() - t0
        if on_step is not None:
            on_step(i + 1, total_steps)
        return {}

    kwargs = call_arguments(params, seed)
    try:
        t0 = clock.now()
        out = pipe(**kwargs, callback_on_step_end=step_end, callback_on_step_end_tensor_inputs=inputs)
        generated = clock.now()
        frames = (np.round(np.clip(f, 0.0, 1.0) * 255.0).astype(np.uint8) for f in np.asarray(out.frames[0]))
        audio = out.audio[0].float().cpu().numpy() if kind.audio else None
        rate = int(pipe.vocoder.config.output_sampling_rate) if kind.audio else 16000
        codec = {"crf": params["crf"], "preset": params["x264_preset"], "lossless_copy": lossless_path}
        copy_s = write_av(out_path, frames, audio, fps=params["frame_rate"], sample_rate=rate, **codec)
        written = clock.now() - copy_s
    finally:
        clock.close()
    stages = dict(clock.stages)
    stages["dit"] = sum(s.seconds for s in clock.steps)
    stages["save"] = written - generated
    if latents_dir is not None:
        stages["latents_save"] = saved
    layout = clock.layout or {}
    return TimingRecord(
        source="diffusers",
        steps=clock.steps,
        stages={k: round(v, 6) for k, v in stages.items()},
        pipeline_total_s=written - t0 - saved,
        seq_len=layout.get("video"),
        packed_layout=layout or None,
        ranks=["0"],
        missing=[]
        if len(clock.steps) == total_steps
        else [f"expected {total_steps} DiT steps, the step-end callback saw {len(clock.steps)}"],
    )


class DiffusersRankCalls(RankCalls):
    """The run's counts. ``calls`` and ``fallbacks`` cover the DiT (the pipeline's transformers): a
    call there served by another backend than the requested one is a fallback. ``errors`` hold the
    other reasons the run is invalid (a bypass, a kernel never reached, a floor never perturbed)."""

    outside_scope: dict[str, int] = Field(default_factory=dict)  # text encoder, connectors, VAE
    bypassed: int = 0  # attention in the DiT that called torch SDPA without the dispatcher
    ops: dict[str, int] = Field(default_factory=dict)  # "backend -> kernel op" -> calls under it
    masks_dropped: dict[str, int] = Field(default_factory=dict)  # backend -> calls given without a no-op mask
    kv_reversed_calls: int = 0
    scope: list[str] = Field(default_factory=list)  # the pipeline components counted as the DiT
    finished: bool = False


class DiffusersAttnCalls(AttnCallsRecord):
    source: str = "diffusers-dispatcher"
    backend_kind: str = ""  # "dispatcher" (diffusers' own) | "harness" (registered by the harness)
    ranks: dict[str, DiffusersRankCalls] = Field(default_factory=dict)  # type: ignore[assignment]


class DiffusersEnv(Record):
    """diffusers_env.json: what the run's interpreter had (the fingerprint names the harness's)."""

    schema_version: str = Field("harness.diffusers_env/1", alias="schema")
    python: str
    packages: dict[str, str] = Field(default_factory=dict)  # diffusers, transformers, torch, ...
    pipeline_class: str
    model_path: str
    device: str
    dtype: str
    gpu: str | None = None
    dispatcher_backends: list[str] = Field(default_factory=list)  # the run's, harness ones included
    components: dict[str, str] = Field(default_factory=dict)  # component -> class
    notes: list[str] = Field(default_factory=list)


def load_pipeline(params: dict[str, Any], device: torch.device, dtype: torch.dtype) -> Any:
    import diffusers

    cls = getattr(diffusers, PIPELINES[params["pipeline"]["name"]].cls)
    pipe = cls.from_pretrained(params["model_path"], dtype=dtype)
    pipe.set_progress_bar_config(disable=True)
    return pipe.to(device)


def calls_record(spec: RunSpec, book: CallBook, chain: Any, finished: bool) -> DiffusersAttnCalls:
    errors = book.problems()
    check = None
    if chain is not None:  # the harness chain's own refusals and its bitwise check
        rc = chain.rank_calls()
        errors += [e for e in rc.errors if e not in errors]
        check = rc.direct_check
    if not finished:
        errors.append("the run did not finish (see stderr.log)")
    rank = DiffusersRankCalls(
        **{key: dict(getattr(book, key)) for key in ("calls", "fallbacks", "ops", "masks_dropped")},
        **{key: getattr(book, key) for key in ("bypassed", "kv_reversed_calls", "scope")},
        errors=errors,
        direct_check=check,
        outside_scope=dict(book.outside),
        finished=finished,
    )
    return DiffusersAttnCalls(
        requested=spec.attn_type, kv_reversed=spec.kv_reversed, backend_kind=book.kind, ranks={"0": rank}
    )


def run_generation(
    pipe: Any, spec: RunSpec, run_dir: Path, device: torch.device, book: CallBook
) -> tuple[Any, Any, list[str]]:
    """Instrument, select the arm's backend on the DiT, generate: (timing, harness chain, backend names)."""
    p = spec.params
    chain = make_attention(spec) if book.kind == "harness" else None  # perturbation, counts, check
    with Instrument(book, drop_trivial_masks=p["drop_trivial_masks"]) as inst:
        if chain is not None:
            inst.register_harness(spec.attn_type, chain)
        dit = dit_modules(pipe)
        for name, module in dit:
            inst.scope(name, module)
        if not inst.select(spec.attn_type, [m for _, m in dit]):
            book.error(f"no attention processor of the DiT took backend {spec.attn_type!r}")
        names = inst.backend_names()
        timing = generate(
            pipe,
            p["pipeline"],
            seed=spec.seed,
            device=device,
            out_path=run_dir / OUTPUT_MP4,
            latents_dir=run_dir / LATENTS_DIR if p["save_latents"] else None,
            on_step=print_step,
            lossless_path=run_dir / OUTPUT_LOSSLESS if p.get("lossless") else None,
        )
    return timing, chain, names


def run_in_process(run_dir: Path) -> Any:
    wall0 = time.perf_counter()
    spec = read_record(run_dir / SPEC_JSON, RunSpec)
    load_recorded(spec.plugins)  # a plugin's backends are harness backends like the harness's own
    p = spec.params
    device = torch.device(resolve_device(p["device"], context="diffusers.device"))
    dtype = resolve_dtype(p["dtype"], device)
    book = CallBook(spec.attn_type, p["backend_kind"], spec.kv_reversed)
    chain, finished, names = None, False, []
    with exact_matmul():
        t0 = time.perf_counter()
        pipe = load_pipeline(p, device, dtype)
        load_s = time.perf_counter() - t0
        try:
            timing, chain, names = run_generation(pipe, spec, run_dir, device, book)
            finished = True
        finally:
            write_record(run_dir / ATTN_CALLS_JSON, calls_record(spec, book, chain, finished))
            env = DiffusersEnv(
                python=sys.executable,
                packages=package_versions(ENV_PACKAGES),
                pipeline_class=type(pipe).__name__,
                model_path=p["model_path"],
                device=str(device),
                dtype=str(dtype).removeprefix("torch."),
                gpu=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                dispatcher_backends=names,
                components={
                    n: type(part).__name__ for n, part in pipe.components.items() if part is not None
                },
            )
            write_record(run_dir / DIFFUSERS_ENV_JSON, env)
    timing.stages["load"] = round(load_s, 6)
    timing.wall_total_s = time.perf_counter() - wall0
    write_record(run_dir / TIMING_JSON, timing)
    return timing


if __name__ == "__main__":
    sys.exit(run_dir_main(None, "harness.runners.diffusers.launch", run_in_process))
