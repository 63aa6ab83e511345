"""Analysis stage: a campaign compared, aggregated, tested and judged once, written as results.json.

- ``analyze``: ``analyze_campaign(campaign)`` -> ``ReportResults`` (and results.json);
- ``model``: results.json and its assets, the contract with the renderers (``harness.report``);
- ``aggregate``: per-arm spreads and the speed tests against the reference;
- ``energy``, ``verdict``: error energies against the noise floor's, and the verdict in words;
- ``floor``: the noise-floor band and the codec floor of the reference;
- ``frames``, ``audio_view``, ``assets``: what the page shows of the media, as files under assets/;
- ``digest``: what an analysis read, so that an unchanged campaign is not analysed again.

What compares two runs or two files is ``harness.compare``'s; rendering is ``harness.report``'s.
The package imports nothing itself, so reading the model (``analysis.model``) stays light.
"""
