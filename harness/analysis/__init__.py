"""Analysis stage: a campaign judged once, written as results.json (``analyze``); ``model`` is the
contract with ``harness.report``. The package imports nothing itself, so reading the model stays light."""
