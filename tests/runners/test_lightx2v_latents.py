"""The launcher's latent saving: which steps, where each rank writes, and files the report reads."""

from __future__ import annotations

import types

import pytest
import torch

from harness.compare.latents import latent_files, load_latent
from harness.runners.lightx2v.latents import LatentSaver, auto_step, parse_steps


def test_the_step_choice():
    assert [s for s in range(1, 5) if parse_steps("auto")(s, 4)] == [1, 2, 3, 4]  # a short run: every step
    assert [s for s in range(1, 30) if auto_step(s, 29)] == [1, 5, 10, 15, 20, 25, 29]
    assert [s for s in range(1, 30) if parse_steps(" 1,15 ,29")(s, 29)] == [1, 15, 29]
    assert parse_steps("all")(7, 29) and not parse_steps("none")(1, 29)
    for bad in ("every", "0,3", ","):
        with pytest.raises(ValueError):
            parse_steps(bad)


def scheduler(step_index: int, rows: int = 6) -> types.SimpleNamespace:
    """What the saver reads of MiniMax-H3's scheduler after step_post (2 condition rows first)."""
    gen = torch.Generator().manual_seed(step_index)
    return types.SimpleNamespace(
        step_index=step_index,
        infer_steps=3,
        video_latents=torch.randn(rows, 96, generator=gen),
        audio_latents=torch.randn(rows + 1, 32, generator=gen),
        num_condition_video_rows=2,
        num_condition_audio_rows=0,
        video_sigmas=torch.tensor([1.0, 0.5, 0.25, 0.0]),
        audio_sigmas=torch.tensor([1.0, 0.6, 0.3, 0.0]),
    )


def test_each_rank_writes_the_chosen_steps_where_the_report_reads_them(tmp_path):
    for rank in ("0", "1"):
        saver = LatentSaver(tmp_path, rank, parse_steps("1,3"))
        for i in range(3):
            saver.on_step_end(i + 1, scheduler(i))
        saver.close()
        assert saver.saved == [1, 3] and saver.errors == [] and saver.copy_s > 0
        assert saver.to_json()["steps"] == [1, 3]
    assert LatentSaver(tmp_path, "0", parse_steps("none")).folder == tmp_path / "latents"
    assert sorted(latent_files(tmp_path)) == [1, 3]  # rank 0's, where harness.compare.latents looks
    assert sorted(p.name for p in (tmp_path / "latents" / "rank1").iterdir()) == [
        "step_001.npz",
        "step_003.npz",
    ]
    arrays = load_latent(tmp_path / "latents" / "step_003.npz")
    assert sorted(arrays) == ["audio", "video"]  # the sigmas are scalars: not compared
    want = scheduler(2)
    assert torch.equal(torch.from_numpy(arrays["video"]).float(), want.video_latents[2:])  # target rows only
    assert arrays["audio"].shape == (7, 32)


def test_a_scheduler_of_another_layout_is_noted_once(tmp_path):
    saver = LatentSaver(tmp_path, "0", parse_steps("all"))
    saver.on_step_end(1, types.SimpleNamespace(infer_steps=2))
    saver.on_step_end(1, types.SimpleNamespace(infer_steps=2))
    saver.close()
    assert len(saver.errors) == 1 and saver.errors[0].startswith(
        "latents of step 1 not saved: AttributeError"
    )
    assert not (tmp_path / "latents").exists()
