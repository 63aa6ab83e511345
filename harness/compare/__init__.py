"""Compare stage: what two runs say about themselves and how far B is from A (the reference).

- ``summary``: one run's own account (status, timing, attention calls, output hash), no decoding;
- ``cache``: the metrics of a pair and the statistics of a run, kept in the campaign's metrics/
  folder and reused while the output files' sha256 still match;
- ``latents``: latent PSNR per sampler step;
- ``pairwise``: ``compare_runs`` / ``compare_summaries`` -> ``Comparison``;
- ``metrics``: the accuracy metrics that tables and gates read off a comparison;
- ``gates``: thresholds that fail CI (``harness compare --gate``);
- ``significance``: when a timing difference is a finding (Welch's t-test, pure functions);
- ``rules``: the tolerances a scenario sets for verdicts and speed tests;
- ``verdict``: a candidate's error energy against the noise floor's, in plain words.

Text rendering of all of this lives in ``harness.report``.
"""
