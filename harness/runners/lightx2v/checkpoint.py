"""A synthetic MiniMax-H3 checkpoint: every folder ref2av loads, random weights at tiny sizes.
Checks the whole chain in minutes, before hours on the released weights; deterministic from the
seed. The launcher relaxes LightX2V's size checks for a folder with the marker only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.runners import common
from harness.runners.common import HARNESS_IMPORT_ROOT, NOT_A_MODEL, byte_level_bpe, search_path, write_json
from harness.runners.lightx2v.rank_env import (
    CPU_PLATFORM,
    MARKER_SCHEMA,
    SYNTHETIC_MARKER,
    read_marker,
    register_cpu_platform,
)

MODULE = "harness.runners.lightx2v.checkpoint"

# DiT sizes; head_dim 128 everywhere (GPU kernels want it; H3's rotary width 96 fits). ``prod``: the released
# width with 2 of its 50 layers, production-shape attention on one GPU (4.4 GB); layer times scale to 50.
PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 64, "num_attention_heads": 2, "num_layers": 2, "ffn_hidden_size": 128},
    "small": {"hidden_size": 512, "num_attention_heads": 8, "num_layers": 4, "ffn_hidden_size": 1024},
    "prod": {"hidden_size": 5376, "num_attention_heads": 56, "num_layers": 2, "ffn_hidden_size": 14336},
}
RELEASED_LAYERS = 50  # DiT layers of the released MiniMax-H3 (LightX2V's num_layers default)
HEAD_DIM = 128
VIDEO_LATENT_CHANNELS = 24  # H3's packing: 24 video latent channels, 32 audio
AUDIO_LATENT_CHANNELS = 32
SAMPLING_RATE = 32000

# Text encoder (Qwen3-VL layout), every preset: all even (TP2 splits it); mrope_section sums to head_dim / 2.
TEXT_CONFIG: dict[str, Any] = {
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
    "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512, "hidden_act": "silu", "attention_bias": False,
    "rms_norm_eps": 1e-6, "rope_theta": 5000000.0,
    "rope_scaling": {"rope_type": "default", "mrope_section": [6, 5, 5], "mrope_interleaved": True},
}  # fmt: skip
VISION_CONFIG: dict[str, Any] = {
    "depth": 1, "hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "patch_size": 16,
    "temporal_patch_size": 2, "in_channels": 3, "spatial_merge_size": 2, "out_hidden_size": TEXT_CONFIG["hidden_size"],
    "num_position_embeddings": 64, "deepstack_visual_indexes": [0],
}  # fmt: skip
# The video VAE keeps H3's 16x spatial / 4x temporal factors (the runner hard-codes them); the rest is small.
VIDEO_VAE_CONFIG: dict[str, Any] = {
    "in_channels": 3, "out_channels": 3, "latent_channels": VIDEO_LATENT_CHANNELS,
    "block_out_channels": [16, 16, 16, 16, 16, 16], "layers_per_block": 1,
    "spatial_downsample_factors": [2, 2, 2, 2, 1, 1], "temporal_downsample_factors": [1, 2, 2, 1, 1, 1],
    "norm_num_groups": 8, "decoder_num_layers": 1, "decoder_num_attention_heads": 2,
    "decoder_attention_head_dim": 32, "decoder_num_register_tokens": 4, "decoder_ffn_mult": 2,
}  # fmt: skip
# Audio VAE: the released hop (800 samples at 32 kHz = 40 latents per second), small channels.
AUDIO_VAE_CONFIG: dict[str, Any] = {
    "sampling_rate": SAMPLING_RATE, "encoder_rates": [2, 4, 4, 5, 5], "decoder_rates": [5, 5, 2, 2, 2, 2, 2],
    "decoder_kernel_sizes": [9, 9, 4, 4, 4, 4, 4], "encoder_dim": 4, "latent_dim": 64,
    "latent_channels": AUDIO_LATENT_CHANNELS, "num_attention_heads": 2,
    "decoder_dim": 256,  # halved by each of the 7 upsamplers
    "resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1]],
}  # fmt: skip
SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
    "<|video_pad|>",
)  # fmt: skip
# A small fixed corpus for the byte-level BPE: enough merges for ordinary English prompts.
_CORPUS = (
    "A young woman dances hip-hop on a city street at dusk, fast footwork and arm waves in time "
    "with a heavy drum beat, bass music and a cheering crowd, handheld camera following her moves. "
    "A sunrise over distant mountains reflected across a calm lake beneath drifting clouds. "
    "A cinematic fox walking through a snowy forest. <Picture 1>: <Picture 2>: <Video 1>: <Audio 1>: "
    "the quick brown fox jumps over the lazy dog 0123456789"
)


def _normal(gen, shape, dtype, std=0.02):
    import torch

    return (torch.randn(shape, generator=gen, dtype=torch.float32) * std).to(dtype)


def dit_tensors(config: dict[str, Any], gen) -> dict[str, Any]:
    """The DiT's tensors in the released layout: FP32 projections and time MLP, BF16 elsewhere."""
    import torch

    hidden, ffn = config["hidden_size"], config["ffn_hidden_size"]
    inner = config["num_attention_heads"] * config["attention_head_dim"]
    head_dim, text = config["attention_head_dim"], config["text_hidden_size"]
    patch = math.prod(config["patch_size"])
    bf16, fp32 = torch.bfloat16, torch.float32
    out: dict[str, Any] = {}

    def linear(name, rows, cols, dtype, bias=True):
        out[f"{name}.weight"] = _normal(gen, (rows, cols), dtype)
        if bias:
            out[f"{name}.bias"] = torch.zeros(rows, dtype=dtype)

    def norm(name, size):
        out[name] = torch.ones(size, dtype=bf16)

    def attention_block(prefix):
        for proj in ("to_q", "to_k", "to_v"):
            linear(f"{prefix}.attn.{proj}", inner, hidden, bf16, bias=False)
        norm(f"{prefix}.attn.norm_q.weight", head_dim)
        norm(f"{prefix}.attn.norm_k.weight", head_dim)
        linear(f"{prefix}.attn.to_out.0", hidden, inner, bf16, bias=False)
        norm(f"{prefix}.norm1.weight", hidden)
        norm(f"{prefix}.norm2.weight", hidden)
        linear(f"{prefix}.ff.net.0.proj", 2 * ffn, hidden, bf16, bias=False)  # value and gate, fused
        linear(f"{prefix}.ff.net.2", hidden, ffn, bf16, bias=False)

    linear("proj_in", hidden, config["in_channels"] * patch, fp32)
    linear("audio_proj_in", hidden, config["audio_in_channels"], fp32)
    linear("context_embedder", hidden, text, bf16)
    linear("time_embedder.linear_1", hidden, config["freq_dim"], fp32)
    linear("time_embedder.linear_2", hidden, hidden, fp32)
    for i in range(config["num_refiner_layers"]):
        attention_block(f"token_refiner.refiner_blocks.{i}")
    norm("token_refiner.final_norm.weight", hidden)
    for i in range(config["num_layers"]):
        prefix = f"transformer_blocks.{i}"
        attention_block(prefix)
        linear(f"{prefix}.adaln_proj.linear", 18 * hidden, hidden, bf16)
    norm("norm_out.norm.weight", hidden)
    linear("norm_out.linear", 2 * hidden, hidden, bf16)
    linear("proj_out", config["in_channels"] * patch, hidden, fp32)
    linear("audio_proj_out", config["audio_in_channels"], hidden, fp32)
    return out


def text_tensors(gen) -> dict[str, Any]:
    """Qwen3-VL language-model tensors (one dtype, as LightX2V requires)."""
    import torch

    c = TEXT_CONFIG
    hidden, inter = c["hidden_size"], c["intermediate_size"]
    q_size, kv_size = c["num_attention_heads"] * c["head_dim"], c["num_key_value_heads"] * c["head_dim"]
    dtype = torch.bfloat16
    out = {"model.language_model.embed_tokens.weight": _normal(gen, (c["vocab_size"], hidden), dtype, 1.0)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.language_model.layers.{i}"
        for norm, size in (("input_layernorm", hidden), ("post_attention_layernorm", hidden),
                           ("self_attn.q_norm", c["head_dim"]), ("self_attn.k_norm", c["head_dim"])):  # fmt: skip
            out[f"{p}.{norm}.weight"] = torch.ones(size, dtype=dtype)
        for proj, shape in (  # drawn in this order: the same seed, the same weights
            ("self_attn.q_proj", (q_size, hidden)), ("self_attn.k_proj", (kv_size, hidden)),
            ("self_attn.v_proj", (kv_size, hidden)), ("self_attn.o_proj", (hidden, q_size)),
            ("mlp.gate_proj", (inter, hidden)), ("mlp.up_proj", (inter, hidden)), ("mlp.down_proj", (hidden, inter)),
        ):  # fmt: skip
            out[f"{p}.{proj}.weight"] = _normal(gen, shape, dtype)
    return out


def _module_state(module, gen) -> dict[str, Any]:
    """A LightX2V module's state dict, re-drawn from ``gen`` (its own init uses the global RNG)."""
    import torch

    state = {}
    for name, tensor in module.state_dict().items():
        tensor = tensor.detach()
        if tensor.is_floating_point() and tensor.ndim >= 2:
            fan_in = max(1, tensor[0].numel())
            value = _normal(gen, tuple(tensor.shape), tensor.dtype, std=fan_in**-0.5)
        elif tensor.is_floating_point() and name.endswith("bias"):
            value = torch.zeros_like(tensor, device="cpu")
        elif tensor.is_floating_point():
            value = torch.ones_like(tensor, device="cpu")
        else:
            value = tensor.cpu().clone()
        state[name] = value.contiguous()
    return state


def _save(tensors: dict[str, Any], path: Path) -> None:
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in sorted(tensors.items())}, str(path), metadata={"format": "pt"})


def write_text_tools(out: Path) -> None:
    """tokenizer/ (a byte-level BPE trained on a fixed corpus) and processor/ (Qwen3-VL's, small budgets)."""
    import transformers

    bpe = byte_level_bpe(_CORPUS, TEXT_CONFIG["vocab_size"] - 64, SPECIAL_TOKENS)
    tokenizer = transformers.Qwen2TokenizerFast(
        tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>", unk_token=None,
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t != "<|endoftext|>"],
    )  # fmt: skip
    if len(tokenizer) > TEXT_CONFIG["vocab_size"]:
        raise RuntimeError(f"tokenizer has {len(tokenizer)} tokens, more than the embedding's rows")
    tokenizer.save_pretrained(str(out / "tokenizer"))
    pixels = 64 * 64
    patches = {
        "patch_size": VISION_CONFIG["patch_size"],
        "temporal_patch_size": VISION_CONFIG["temporal_patch_size"],
        "merge_size": VISION_CONFIG["spatial_merge_size"],
    }
    image = transformers.Qwen2VLImageProcessor(**patches, min_pixels=pixels, max_pixels=pixels)
    frames = {"shortest_edge": pixels, "longest_edge": 4 * pixels}
    video = transformers.Qwen3VLVideoProcessor(**patches, size=frames)
    processor = transformers.Qwen3VLProcessor(
        image_processor=image, tokenizer=tokenizer, video_processor=video
    )
    processor.save_pretrained(str(out / "processor"))


def write_checkpoint(out: Path, preset: str = "tiny", seed: int = 0) -> dict[str, Any]:
    """Write every component under ``out`` (``preset`` one of PRESETS: ``main`` parses it so); returns
    the marker record (also written as a file)."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)  # LightX2V modules initialise from the global RNG; re-drawn below anyway
    gen = torch.Generator().manual_seed(seed)

    dit = {
        **PRESETS[preset], "attention_head_dim": HEAD_DIM, "num_refiner_layers": 1,
        "in_channels": VIDEO_LATENT_CHANNELS, "audio_in_channels": AUDIO_LATENT_CHANNELS,
        "text_hidden_size": TEXT_CONFIG["hidden_size"], "patch_size": [1, 2, 2], "freq_dim": 256,
        "rope_freq_dim": 16, "rope_theta": 10000.0, "norm_eps": 1e-5, "qk_norm_eps": 1e-5, "final_norm_eps": 1e-5,
    }  # fmt: skip
    write_json(out / "transformer_ref" / "config.json", dit)
    _save(dit_tensors(dit, gen), out / "transformer_ref" / "diffusion_pytorch_model.safetensors")

    from lightx2v.models.audio_encoders.hf.minimax_h3 import MiniMaxH3AudioVAE
    from lightx2v.models.input_encoders.hf.minimax_h3.qwen3vl_vision import MiniMaxH3Qwen3VLVisionTower
    from lightx2v.models.video_encoders.hf.minimax_h3 import MiniMaxH3VideoVAE

    text_dir = out / "text_encoder"
    tensors = text_tensors(gen)
    vision = MiniMaxH3Qwen3VLVisionTower(VISION_CONFIG)
    tensors.update({f"model.visual.{k}": v.to(torch.bfloat16) for k, v in _module_state(vision, gen).items()})
    shard = "model.safetensors"
    _save(tensors, text_dir / shard)
    index = {"metadata": {}, "weight_map": {name: shard for name in sorted(tensors)}}
    write_json(text_dir / "model.safetensors.index.json", index)
    write_json(
        text_dir / "config.json",
        {
            "architectures": ["Qwen3VLForConditionalGeneration"],
            "model_type": "qwen3_vl",
            "text_config": {**TEXT_CONFIG, "model_type": "qwen3_vl_text"},
            "vision_config": {**VISION_CONFIG, "model_type": "qwen3_vl"},
            "image_token_id": None,
        },
    )

    write_text_tools(out)

    video_vae = MiniMaxH3VideoVAE(VIDEO_VAE_CONFIG, device="cpu")
    write_json(out / "vae" / "config.json", VIDEO_VAE_CONFIG)
    _save(_module_state(video_vae, gen), out / "vae" / "diffusion_pytorch_model.safetensors")
    audio_vae = MiniMaxH3AudioVAE(AUDIO_VAE_CONFIG, device="cpu")
    write_json(out / "audio_vae" / "config.json", AUDIO_VAE_CONFIG)
    _save(_module_state(audio_vae, gen), out / "audio_vae" / "model.safetensors")

    marker = {
        "schema": MARKER_SCHEMA, "preset": preset, "seed": seed, "dit": dit, "text_config": TEXT_CONFIG,
        "files": common.file_hashes(out, SYNTHETIC_MARKER), "note": NOT_A_MODEL,
    }  # fmt: skip
    write_json(out / SYNTHETIC_MARKER, marker)
    return marker


def run_writer(out: str | os.PathLike, preset: str = "tiny", seed: int = 0, *, python: str | None = None,
               env: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Run this module in LightX2V's interpreter (``python``, ``env`` carries PYTHONPATH): HarnessError on failure."""
    args = ["--preset", preset, "--seed", str(seed)]
    return common.run_writer(
        MODULE, args, "synthetic checkpoint", out, read_marker, SYNTHETIC_MARKER, python=python, env=env
    )


def create_checkpoint(out: str | os.PathLike, root: str | os.PathLike, preset: str = "tiny", seed: int = 0,
                      python: str | None = None) -> dict[str, Any]:  # fmt: skip
    """``harness lightx2v tiny-checkpoint``: write into an empty or missing folder, with LightX2V from ``root``."""
    out, root = Path(out).absolute(), Path(root).absolute()
    if preset not in PRESETS:
        raise HarnessError(f"--preset {preset}: expected one of {', '.join(PRESETS)}", exit_code=2)
    if not (root / "lightx2v" / "infer.py").is_file():
        raise HarnessError(
            f"--root {root}: lightx2v/infer.py not found (a LightX2V checkout; or set LIGHTX2V_ROOT)",
            exit_code=2,
        )
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and read_marker(out) is None)):
        raise HarnessError(
            f"{out}: exists and is not an empty folder or a synthetic checkpoint; nothing written",
            exit_code=2,
        )
    path = search_path(root, HARNESS_IMPORT_ROOT, os.environ.get("PYTHONPATH"))
    return run_writer(out, preset, seed, python=python, env={"PYTHONPATH": path})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--preset", choices=list(PRESETS), default="tiny")
    p.add_argument("--seed", type=int, default=0)
    ns = p.parse_args(argv)
    os.environ["PLATFORM"] = CPU_PLATFORM  # modules are built and saved on the CPU whatever the machine
    register_cpu_platform()
    marker = write_checkpoint(ns.out, ns.preset, ns.seed)
    print(
        json.dumps({"out": str(ns.out), "preset": ns.preset, "seed": ns.seed, "files": len(marker["files"])})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
