"""The metric registry: one object per metric (``Metric``) that comparison tables, gates, floor
bands, history, the accuracy line of `harness compare`, pr.md's accuracy table, the verdict's error
energies and a pair's values (``analysis.energy.PairErrors``) all read, registered by key in ``METRICS``.

Every module of this package is imported with it and registers its metrics there: ``video`` (MSE,
PSNR, SSIM) and ``audio`` (SNR, cosine, mel spectral error, log-mel cosine). A new metric is one
module here (or a ``METRICS.register`` from a plug-in): its reader, label, unit, digits, direction,
gate key, error energy, history column, headline and pr.md column are fields of its ``Metric``.
"""

from __future__ import annotations

import importlib
import pkgutil

from harness.metrics.metric import (  # noqa: F401  (the package's API)
    METRICS,
    Energy,
    Headline,
    HistoryColumn,
    Metric,
    PrColumn,
    accuracy_metrics,
    energy_metrics,
    headline_metrics,
    history_metrics,
    in_order,
    judged_energies,
    pr_metrics,
    table_metrics,
)

for _found in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_found.name}")
