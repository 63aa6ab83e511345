"""layers.json: a DiT layer's seconds per step at the run's sequence length (a runner that times
every block, LightX2V's ``time_blocks``, writes it), and a step of the released depth extrapolated
from it, marked ``~`` (``45.3 s~``) wherever the report prints it.
"""

from __future__ import annotations

from pydantic import Field

from harness.number_format import fmt_s
from harness.records import Record

LAYERS_JSON = "layers.json"
EXTRAPOLATED = "~"  # the mark beside every extrapolated figure


class LayerTiming(Record):
    """A DiT layer's seconds per step at ``seq_len`` rows, over steps 2..N."""

    schema_version: str = Field("harness.lightx2v.layers/1", alias="schema")
    layers: int  # DiT blocks a step ran
    seq_len: int | None = None  # packed rows of every DiT attention call
    steps: list[int] = Field(default_factory=list)  # the steps the means are over
    step_s: float  # mean DiT step (the profiler's, max over ranks)
    layer_s: float  # mean seconds of one layer in a step (the slowest rank's blocks)
    outside_layers_s: float  # the rest of a step: pre/post infer, refiner, scheduler
    released_layers: int  # the released model's depth (MiniMax-H3: 50)
    released_step_s: float  # extrapolated: outside_layers_s + released_layers * layer_s
    text: str = ""

    def reading(self) -> str:
        rows = f" at {self.seq_len:,} packed rows" if self.seq_len else ""
        return (
            f"one DiT layer {fmt_s(self.layer_s)} s per step{rows} ({self.layers} layers timed, steps "
            f"{', '.join(map(str, self.steps))}; the rest of a step {fmt_s(self.outside_layers_s)} s); "
            f"a step of {self.released_layers} layers {fmt_s(self.released_step_s)} s{EXTRAPOLATED} "
            f"({EXTRAPOLATED}: extrapolated from {self.layers} layers)"
        )
