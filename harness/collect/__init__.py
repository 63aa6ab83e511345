"""Collectors: metrics computed from what runs leave behind (video, audio, statistics, logs).

Metric modules (ssim, video, audio, stats) hold pure functions, arrays in and numbers out;
``suite`` streams two files through them once; ``models`` holds what is written to disk.
"""
