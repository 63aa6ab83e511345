"""A run's folder name (``arm@seed~r2``) and its sample: what the analysis pairs runs by."""

from __future__ import annotations

REPEAT_MARK = "~r"


def run_key(arm: str, seed: int | None = None, repeat: int = 1, input: str | None = None) -> str:
    """``arm``, ``arm@seed``, ``arm@seed~r2``, ``arm@input@seed``: '@' and '~' are in no name, so keys
    parse back."""
    key = arm if seed is None else f"{arm}@{seed}" if input is None else f"{arm}@{input}@{seed}"
    return key if repeat <= 1 else f"{key}{REPEAT_MARK}{repeat}"


Sample = int | str  # a run's sample: its seed, or "SEED (INPUT)" where the scenario lists inputs


def sample_label(seed: int, input: str | None = None) -> Sample:
    """What the analysis pairs runs by (their sample): the seed, and in a campaign of several inputs
    ``"SEED (INPUT)"``, which reads after the word "seed" as every per-seed line prints it."""
    return seed if input is None else f"{seed} ({input})"


def sample_key(sample: Sample) -> tuple[int, str]:
    """Samples in order: by seed, then input name (a campaign's mix of both kinds sorts too)."""
    if isinstance(sample, int):
        return sample, ""
    seed, _, rest = sample.partition(" (")
    return (int(seed) if seed.isdigit() else -1), rest.removesuffix(")")
