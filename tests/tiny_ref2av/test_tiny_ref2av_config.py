from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.tiny_ref2av.config import PRESETS, load_config


def test_presets_sizes():
    cpu, gpu = PRESETS["cpu"], PRESETS["gpu"]
    assert cpu.infer_steps == 4 and cpu.dit_steps == 3
    assert 1000 <= cpu.seq_len <= 2000
    assert cpu.device == "cpu" and cpu.dtype == "float32"
    assert gpu.seq_len >= 32_000
    assert 24 <= gpu.heads <= 56 and gpu.head_dim == 128
    assert (gpu.height, gpu.width) == (768, 1344)
    assert gpu.device == "cuda" and gpu.dtype == "bfloat16" and gpu.infer_steps == 4
    assert PRESETS["tiny"].seq_len < cpu.seq_len
    for cfg in PRESETS.values():
        assert cfg.fps == 24 and cfg.audio_rate == 32000
        assert (cfg.frames - 5) % 17 == 0  # H3 frame counts are 17n+5


def test_packed_layout_adds_up():
    cfg = PRESETS["cpu"]
    layout = cfg.packed_layout
    assert layout["text"] + layout["audio"] + layout["video"] == layout["total"] == cfg.seq_len
    assert layout["video"] == cfg.latent_t * cfg.latent_h * cfg.latent_w


def test_with_overrides_applies_and_validates():
    cfg = PRESETS["cpu"].with_overrides({"infer_steps": 30, "depth": 2})
    assert cfg.infer_steps == 30 and cfg.dit_steps == 29 and cfg.depth == 2
    assert PRESETS["cpu"].infer_steps == 4  # the preset itself is untouched
    assert PRESETS["cpu"].with_overrides({}) == PRESETS["cpu"]


def test_with_overrides_unknown_key_is_named():
    with pytest.raises(HarnessError, match="infer_step'"):
        PRESETS["cpu"].with_overrides({"infer_step": 4})


@pytest.mark.parametrize(
    "key,value",
    [("infer_steps", 1), ("height", 100), ("dtype", "float16"), ("device", "tpu"), ("heads", "many")],
)
def test_with_overrides_bad_value_is_named(key, value):
    with pytest.raises(HarnessError) as err:
        PRESETS["cpu"].with_overrides({key: value})
    assert "pipeline config" in str(err.value)
    assert key in str(err.value)
    assert "\n" not in str(err.value)


def test_extra_fields_forbidden_and_load_config():
    with pytest.raises(HarnessError, match="nonsense"):
        load_config({**PRESETS["cpu"].model_dump(), "nonsense": 1})
    assert load_config(PRESETS["gpu"].model_dump(mode="json")) == PRESETS["gpu"]


def test_cross_field_rules():
    with pytest.raises(HarnessError, match="latent_t"):
        PRESETS["tiny"].with_overrides({"latent_t": 100})
    with pytest.raises(HarnessError, match="heads\\*head_dim"):
        PRESETS["tiny"].with_overrides({"heads": 1, "head_dim": 16})
