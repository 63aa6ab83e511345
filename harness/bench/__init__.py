"""Benchmark of the metric suite against a naive per-frame scikit-image loop, side by side: a tool
behind ``harness bench metrics`` (no command line of its own).

It generates a pair of the pull request's size (362 frames, 768x1344, H.264 yuv420p + 32 kHz
stereo AAC; ``material``), caches it, and times each side in a fresh process (``child``, which
runs ``sides.run_side``) so that its CPU time and peak RSS are its own: the suite, the naive
loop on the first N frames (a subset is scaled to the full length and every figure so derived
carries a mark), an OpenCV loop as a yardstick of the machine's speed, the suite on a video
twice as long (time linear, memory flat), and the time split of the CPU stages. ``result``
holds the records and the markdown that ``harness bench metrics`` prints; ``run`` drives it.
"""

from harness.bench.child import measure_side
from harness.bench.material import ensure_pair, synthetic_audio, synthetic_frames
from harness.bench.result import MARK, BenchResult, BenchRow, SideResult, StageTimes
from harness.bench.run import bench_metrics
from harness.bench.sides import warm_up

__all__ = [
    "MARK",
    "BenchResult",
    "BenchRow",
    "SideResult",
    "StageTimes",
    "bench_metrics",
    "ensure_pair",
    "measure_side",
    "synthetic_audio",
    "synthetic_frames",
    "warm_up",
]
