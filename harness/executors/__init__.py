"""Executors: where and how the runs of a campaign are started (local processes or Slurm jobs)."""
