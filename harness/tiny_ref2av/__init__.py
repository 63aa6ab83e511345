"""The embedded tiny ref2av pipeline (a small DiT after MiniMax-H3 Ref2AV, its sampler and
decoders) that the ``builtin`` runner drives. Nothing is downloaded: the reference photograph
ships with scikit-image and the weights are drawn from a fixed seed."""

from harness.tiny_ref2av.config import PRESETS, PipelineConfig, load_config
from harness.tiny_ref2av.run import run_pipeline

__all__ = ["PRESETS", "PipelineConfig", "load_config", "run_pipeline"]
