"""A DiT layer's cost at the run's sequence length, and a step of the released depth from it.

A run with ``time_blocks`` (the launcher's ``--time-blocks``) times every DiT block of every
measured step, the device synchronised around it; with the profiler's step times that splits a
step into its layers and the rest (pre-infer with the token refiner, post-infer, the scheduler).
On a checkpoint of few layers at the released width (the synthetic ``prod`` preset: 2 of 50),
``layers.json`` then gives the measured seconds per layer and step, and a step of the released
50 layers as the rest plus 50 such layers - extrapolated, and written with the ``~`` mark
(``12.3 s~``) wherever it is printed.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from harness.records import TimingRecord, steady_steps
from harness.runners.lightx2v.checkpoint import RELEASED_LAYERS
from harness.store import LAYERS_JSON as LAYERS_JSON
from harness.store import LayerTiming


def layer_timing(rank_files: list[Path], timing: TimingRecord) -> LayerTiming | None:
    """From the ranks' ``block_seconds`` and the step times; None when no block was timed."""
    per_rank: list[dict[str, list[float]]] = []
    for path in rank_files:
        try:
            blocks = json.loads(Path(path).read_text()).get("block_seconds")
        except (OSError, ValueError):
            continue
        if blocks:
            per_rank.append(blocks)
    step_s = {s.index: s.seconds for s in timing.steps}
    timed = sorted(int(s) for s in per_rank[0] if s.isdigit() and int(s) in step_s) if per_rank else []
    if not timed:
        return None
    layers = len(per_rank[0][str(timed[0])])
    steps = steady_steps(timed)
    in_layers = [max(sum(r.get(str(s), [])) for r in per_rank) for s in steps]
    layer_s = statistics.fmean(x / layers for x in in_layers)
    outside = statistics.fmean(step_s[s] - x for s, x in zip(steps, in_layers, strict=True))
    record = LayerTiming(
        layers=layers,
        seq_len=timing.seq_len,
        steps=steps,
        step_s=statistics.fmean(step_s[s] for s in steps),
        layer_s=layer_s,
        outside_layers_s=outside,
        released_layers=RELEASED_LAYERS,
        released_step_s=outside + RELEASED_LAYERS * layer_s,
    )
    record.text = record.reading()
    return record
