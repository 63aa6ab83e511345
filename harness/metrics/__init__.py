"""The metric registry: one ``Metric`` per figure, registered by key in ``METRICS``, that every table,
gate, floor band, history and verdict reads; each module here registers one family on import.
"""

from __future__ import annotations

import importlib
import pkgutil

for _found in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_found.name}")
