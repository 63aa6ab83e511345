"""Video metrics, on decoded RGB against the reference's frames: the MSE the verdict weighs, PSNR
(pooled: of the mean per-frame MSE, so one identical frame neither lifts nor sinks it; the mean of
the frames' PSNR; the worst frame), SSIM (mean over frames, the worst frame)."""

from __future__ import annotations

from harness.metrics.metric import METRICS, Energy, Headline, HistoryColumn, Metric, PrColumn, one_minus, same


def _fmt5(x: float) -> str:
    return f"{x:.5f}"


for _metric in (
    Metric("video_mse", "video MSE", "video", "mse_mean", 5, higher_is_closer=False,  # weighed, not shown
           energy=Energy("video_mse", "video MSE", same, same)),
    Metric("psnr", "video PSNR (pooled)", "video", "psnr_pooled", 10, unit="dB", digits=2,
           column="PSNR (pooled)", gate="min_psnr",
           gate_doc="Video PSNR of B against A, pooled (from the mean MSE over frames), in dB.",
           history=HistoryColumn("psnr_pooled", "video PSNR pooled (dB)", 2),
           headline=Headline("video PSNR {} pooled", opens=True),
           pr=PrColumn("video PSNR pooled (min frame)", "psnr_min")),
    Metric("psnr_mean", "video PSNR mean of frames", "video", "psnr_mean", 15, unit="dB", digits=2,
           history=HistoryColumn("psnr_mean", "video PSNR mean of frames (dB)", 2, tested=False,
                                 latest=False)),
    Metric("psnr_min", "video PSNR min frame", "video", "psnr_min", 20, unit="dB", digits=2,
           column="PSNR min (frame)", row="video PSNR min (frame)", gate="min_psnr_frame",
           gate_doc="Video PSNR of the worst frame, in dB.", worst_frame="psnr_min_frame",
           worst_label="video PSNR of the worst frame", headline=Headline("{} min")),
    Metric("ssim_mean", "SSIM mean", "video", "ssim_mean", 30, digits=6, column="SSIM mean", gate="min_ssim",
           gate_doc="SSIM, mean over frames.", gate_range=(None, 1),
           energy=Energy("video_1_ssim", "video 1 - SSIM", one_minus, lambda x: 1.0 - x),
           history=HistoryColumn("ssim_mean", "SSIM mean", 5),
           headline=Headline("SSIM {} mean", opens=True, fmt=_fmt5), pr=PrColumn("SSIM (min frame)", "ssim_min")),
    Metric("ssim_min", "SSIM min frame", "video", "ssim_min", 40, digits=6, column="SSIM min (frame)",
           row="SSIM min (frame)", gate="min_ssim_frame", gate_doc="SSIM of the worst frame.",
           gate_range=(None, 1),
           worst_frame="ssim_min_frame", worst_label="SSIM of the worst frame",
           headline=Headline("{} min", fmt=_fmt5)),
):  # fmt: skip
    METRICS.register(_metric.key, _metric)
