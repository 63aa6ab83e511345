"""Synthetic diffusers pipelines: every component of LTX-2 or Wan, random weights at tiny sizes, offline.
Each component is diffusers' or transformers' own class from a small seeded config, saved by
``save_pretrained`` so ``from_pretrained`` loads it as released weights; nothing is fetched. ``tiny``
runs on a CPU in seconds, ``small`` is GPU-sized. Neither is a model: the weights are noise."""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.runners import common
from harness.runners.common import byte_level_bpe
from harness.runners.diffusers.schema import SYNTHETIC_MODELS

MODULE = "harness.runners.diffusers.checkpoint"
MARKER = "harness_synthetic_pipeline.json"
MARKER_SCHEMA = "harness.diffusers.synthetic_pipeline/1"
_CORPUS = (
    "a young woman dances on a city street at dusk, a robot plays the drums, bass music and a "
    "cheering crowd, handheld camera, waves on a beach, a cat walks through tall grass in the rain"
)

read_marker = functools.partial(common.read_marker, name=MARKER, schema=MARKER_SCHEMA)
# Sizes by preset: the DiT, its text encoder, the VAEs.
SIZES: dict[str, dict[str, Any]] = {
    "tiny": {
        "heads": 2, "head_dim": 16, "audio_heads": 2, "audio_head_dim": 8, "layers": 2, "text_dim": 32,
        "text_heads": 2, "text_head_dim": 16, "vocab": 320, "ltx_latent": 8, "ltx_patch": 2,
        "ltx_vae": (8, 16), "ltx_ratios": (8, 4), "mel_bins": 16, "audio_latent": 2, "audio_base": 8,
        "vocoder": 32, "wan_z": 4, "wan_base": 8, "wan_mult": [1, 2, 2], "wan_temporal": [False, True],
        "wan_ratios": (4, 2), "clip": 16,
    },
    "small": {
        "heads": 4, "head_dim": 128, "audio_heads": 4, "audio_head_dim": 64, "layers": 4, "text_dim": 256,
        "text_heads": 2, "text_head_dim": 128, "vocab": 512, "ltx_latent": 32, "ltx_patch": 4,
        "ltx_vae": (32, 64, 128), "ltx_ratios": (32, 8), "mel_bins": 64, "audio_latent": 8, "audio_base": 128,
        "vocoder": 128, "wan_z": 16, "wan_base": 16, "wan_mult": [1, 2, 4, 4],
        "wan_temporal": [False, True, True], "wan_ratios": (8, 4), "clip": 64,
    },
}  # fmt: skip


def _seeded(seed: int, part: int) -> None:
    import torch

    torch.manual_seed(seed * 1000 + part)


def tokenizer(vocab: int) -> Any:
    """A byte-level BPE trained on a fixed text, with pad, eos, bos and unk tokens."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "</s>", "<bos>", "<unk>", "<boi>", "<eoi>", "<image>"]
    bpe = byte_level_bpe(_CORPUS, vocab, specials, unk="<unk>")
    bpe.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe, pad_token="<pad>", eos_token="</s>", bos_token="<bos>", unk_token="<unk>",
        model_max_length=4096,
    )  # fmt: skip
    if len(tok) > vocab:
        raise RuntimeError(f"tokenizer has {len(tok)} tokens, more than the {vocab} embedding rows")
    return tok


def ltx2_components(s: dict[str, Any], seed: int) -> dict[str, Any]:
    from diffusers import (
        AutoencoderKLLTX2Audio,
        AutoencoderKLLTX2Video,
        FlowMatchEulerDiscreteScheduler,
        LTX2VideoTransformer3DModel,
    )
    from diffusers.pipelines.ltx2 import LTX2TextConnectors
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3TextConfig,
        SiglipVisionConfig,
    )

    d = s["text_dim"]
    _seeded(seed, 1)
    text = Gemma3TextConfig(
        vocab_size=s["vocab"], hidden_size=d, intermediate_size=2 * d, num_hidden_layers=2,
        num_attention_heads=s["text_heads"], num_key_value_heads=1, head_dim=s["text_head_dim"],
        query_pre_attn_scalar=s["text_head_dim"], sliding_window=64, max_position_embeddings=4096,
        pad_token_id=0, eos_token_id=1, bos_token_id=2,
    )  # fmt: skip
    vision = SiglipVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=16,
        patch_size=8,
    )
    config = Gemma3Config(
        text_config=text, vision_config=vision, mm_tokens_per_image=4, boi_token_index=4, eoi_token_index=5,
        image_token_index=6,
    )  # fmt: skip
    text_encoder = Gemma3ForConditionalGeneration(config).eval()
    tok = tokenizer(s["vocab"])
    tok.padding_side = "left"
    _seeded(seed, 2)
    connectors = LTX2TextConnectors(
        caption_channels=d, text_proj_in_factor=text.num_hidden_layers + 1,
        video_connector_num_attention_heads=s["text_heads"], video_connector_attention_head_dim=d // s["text_heads"],
        video_connector_num_layers=1, video_connector_num_learnable_registers=8,
        audio_connector_num_attention_heads=s["text_heads"], audio_connector_attention_head_dim=d // s["text_heads"],
        audio_connector_num_layers=1, audio_connector_num_learnable_registers=8, connector_rope_base_seq_len=32,
        rope_double_precision=False, rope_type="split",
    )  # fmt: skip
    _seeded(seed, 3)
    blocks, spatial, temporal = s["ltx_vae"], *s["ltx_ratios"]
    n = len(blocks)
    vae = AutoencoderKLLTX2Video(
        in_channels=3, out_channels=3, latent_channels=s["ltx_latent"], block_out_channels=blocks,
        decoder_block_out_channels=blocks, layers_per_block=(1,) * (n + 1), decoder_layers_per_block=(1,) * (n + 1),
        spatio_temporal_scaling=(True,) * n, decoder_spatio_temporal_scaling=(True,) * n,
        decoder_inject_noise=(False,) * (n + 1), downsample_type=("spatiotemporal",) * n,
        upsample_type=("spatiotemporal",) * n, upsample_residual=(False,) * n, upsample_factor=(1,) * n,
        timestep_conditioning=False, patch_size=s["ltx_patch"], patch_size_t=1, encoder_causal=True,
        decoder_causal=False, spatial_compression_ratio=spatial, temporal_compression_ratio=temporal,
    )  # fmt: skip
    _seeded(seed, 4)
    # The audio VAE normalises the packed latent (latent channels x latent mel bins) with base_channels
    # statistics: the two must be equal, as in the released model (8 x 64 / 4 = 128).
    audio_vae = AutoencoderKLLTX2Audio(
        base_channels=s["audio_base"], output_channels=2, ch_mult=(1, 2, 4), num_res_blocks=1, in_channels=2,
        resolution=32, latent_channels=s["audio_latent"], mel_bins=s["mel_bins"], sample_rate=16000,
        mel_hop_length=160, mid_block_add_attention=False,
    )  # fmt: skip
    _seeded(seed, 5)
    vocoder = LTX2Vocoder(
        in_channels=2 * s["mel_bins"], hidden_channels=s["vocoder"], out_channels=2,
        upsample_kernel_sizes=[8, 8, 10], upsample_factors=[4, 4, 10], resnet_kernel_sizes=[3],
        resnet_dilations=[[1, 3]], output_sampling_rate=16000,
    )  # fmt: skip
    _seeded(seed, 6)
    audio_in = s["audio_latent"] * s["mel_bins"] // audio_vae.mel_compression_ratio
    transformer = LTX2VideoTransformer3DModel(
        in_channels=s["ltx_latent"], out_channels=s["ltx_latent"], patch_size=1, patch_size_t=1,
        num_attention_heads=s["heads"], attention_head_dim=s["head_dim"], cross_attention_dim=s["heads"] * s["head_dim"],
        audio_in_channels=audio_in, audio_out_channels=audio_in, audio_num_attention_heads=s["audio_heads"],
        audio_attention_head_dim=s["audio_head_dim"],
        audio_cross_attention_dim=s["audio_heads"] * s["audio_head_dim"], num_layers=s["layers"],
        caption_channels=d, rope_double_precision=False, rope_type="split", vae_scale_factors=(temporal, spatial, spatial),
    )  # fmt: skip
    return {
        "scheduler": FlowMatchEulerDiscreteScheduler(), "vae": vae, "audio_vae": audio_vae,
        "text_encoder": text_encoder, "tokenizer": tok, "connectors": connectors, "transformer": transformer,
        "vocoder": vocoder,
    }  # fmt: skip


def wan_components(s: dict[str, Any], seed: int, version: str, task: str) -> dict[str, Any]:
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanTransformer3DModel
    from transformers import UMT5Config, UMT5EncoderModel

    d, z = s["text_dim"], s["wan_z"]
    spatial, temporal = s["wan_ratios"]
    _seeded(seed, 1)
    text_encoder = UMT5EncoderModel(
        UMT5Config(
            vocab_size=s["vocab"], d_model=d, d_kv=d // 4, d_ff=2 * d, num_layers=2, num_heads=4,
            relative_attention_num_buckets=8, relative_attention_max_distance=16, pad_token_id=0, eos_token_id=1,
            decoder_start_token_id=0,
        )
    ).eval()  # fmt: skip
    _seeded(seed, 3)
    vae = AutoencoderKLWan(
        base_dim=s["wan_base"], z_dim=z, dim_mult=s["wan_mult"], num_res_blocks=1,
        temperal_downsample=s["wan_temporal"], latents_mean=[0.0] * z, latents_std=[1.0] * z,
        scale_factor_spatial=spatial, scale_factor_temporal=temporal,
    )  # fmt: skip
    parts: dict[str, Any] = {
        "tokenizer": tokenizer(s["vocab"]), "text_encoder": text_encoder, "vae": vae,
        "scheduler": FlowMatchEulerDiscreteScheduler(shift=3.0),
    }  # fmt: skip
    dit: dict[str, Any] = {
        "patch_size": (1, 2, 2), "num_attention_heads": s["heads"], "attention_head_dim": s["head_dim"],
        "in_channels": z, "out_channels": z, "text_dim": d, "freq_dim": 32, "ffn_dim": 2 * s["heads"] * s["head_dim"],
        "num_layers": s["layers"], "rope_max_seq_len": 1024,
    }  # fmt: skip
    if task == "i2v":
        dit["in_channels"] = 2 * z + temporal  # noise, the image's latents, the first-frame mask
    if task == "i2v" and version == "wan2.1":
        from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

        c = s["clip"]
        _seeded(seed, 4)
        parts["image_encoder"] = CLIPVisionModel(
            CLIPVisionConfig(hidden_size=c, intermediate_size=2 * c, num_hidden_layers=2, num_attention_heads=2,
                             image_size=32, patch_size=8, projection_dim=c)
        ).eval()  # fmt: skip
        parts["image_processor"] = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size=32)
        dit["image_dim"] = c
        dit["added_kv_proj_dim"] = s["heads"] * s["head_dim"]
    _seeded(seed, 6)
    parts["transformer"] = WanTransformer3DModel(**dit)
    if version == "wan2.2":  # two experts: high noise (transformer), low noise (transformer_2)
        _seeded(seed, 7)
        parts["transformer_2"] = WanTransformer3DModel(**dit)
        parts["boundary_ratio"] = 0.875 if task == "t2v" else 0.9
    return parts


def refusal(out: Path, model: str, preset: str, seed: int) -> str | None:
    """Why the writer refuses these arguments (one line), None when it writes."""
    if model not in SYNTHETIC_MODELS:
        return f"--model {model}: expected one of {', '.join(SYNTHETIC_MODELS)}"
    if preset not in SIZES:
        return f"--preset {preset}: expected one of {', '.join(SIZES)}"
    if seed < 0:
        return f"--seed {seed}: must be 0 or more"
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        return f"{out}: exists and is not an empty folder (the writer never overwrites)"
    return None


def write_pipeline(out: Path, model: str, preset: str = "tiny", seed: int = 0) -> dict[str, Any]:
    """Write the pipeline folder ``out`` (missing or empty) atomically; returns its marker."""
    out = Path(out).absolute()
    if why := refusal(out, model, preset, seed):
        raise ValueError(why)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        import diffusers

        if model == "ltx2":
            pipe = diffusers.LTX2Pipeline(**ltx2_components(SIZES[preset], seed))
        else:
            version, task = model.split("_")
            cls = diffusers.WanPipeline if task == "t2v" else diffusers.WanImageToVideoPipeline
            pipe = cls(**wan_components(SIZES[preset], seed, version, task))
        pipe.save_pretrained(str(tmp), safe_serialization=True)
        marker = {
            "schema": MARKER_SCHEMA, "model": model, "preset": preset, "seed": seed,
            "sizes": SIZES[preset], "files": common.file_hashes(tmp, MARKER), "note": common.NOT_A_MODEL,
        }  # fmt: skip
        common.write_json(tmp / MARKER, marker)
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return marker


def create_pipeline(
    out: str | os.PathLike,
    model: str,
    preset: str = "tiny",
    seed: int = 0,
    python: str | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Check the arguments (exit 2), then run this module in the run's interpreter (``python``, ``env``
    added); its marker, HarnessError (exit 3) when it fails. ``harness diffusers tiny-checkpoint``."""
    target = Path(out).absolute()
    if why := refusal(target, model, preset, seed):
        raise HarnessError(why, exit_code=2)
    args = ["--model", model, "--preset", preset, "--seed", str(seed)]
    return common.run_writer(
        MODULE, args, "synthetic pipeline", target, read_marker, MARKER, python=python, env=env
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--model", choices=sorted(SYNTHETIC_MODELS), required=True)
    p.add_argument("--preset", choices=sorted(SIZES), default="tiny")
    p.add_argument("--seed", type=int, default=0)
    ns = p.parse_args(argv)
    try:
        marker = write_pipeline(ns.out, ns.model, ns.preset, ns.seed)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    summary = {"out": str(ns.out), "model": ns.model, "preset": ns.preset, "files": len(marker["files"])}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
