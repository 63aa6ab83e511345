"""Collectors: metrics computed from what runs leave behind (video, audio, statistics, logs)."""
