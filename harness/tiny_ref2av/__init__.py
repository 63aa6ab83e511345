"""The embedded tiny ref2av pipeline that the ``builtin`` runner drives.

A small diffusion transformer structured after MiniMax-H3 Ref2AV: one packed
[text | audio | video] sequence, AdaLN timestep modulation, rotary positions, full
self-attention through a caller-supplied callable, a flow-matching Euler sampler with
shifted sigmas, and decoders to H.264 video and 32 kHz stereo AAC audio. Nothing is
downloaded: the reference photograph ships with scikit-image and the weights are drawn
from a fixed seed.
"""

from harness.tiny_ref2av.config import PRESETS, PipelineConfig, get_preset, load_config
from harness.tiny_ref2av.run import run_pipeline

__all__ = ["PRESETS", "PipelineConfig", "get_preset", "load_config", "run_pipeline"]
