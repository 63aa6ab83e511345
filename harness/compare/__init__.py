"""Compare stage: what two runs (or two files) say about themselves and how far B is from A.

- ``summary``: one run's own account (status, timing, attention calls, output hash), no decoding;
- ``hashes``: files' sha256, remembered by file identity (a campaign's metrics/hashes.json);
- ``cache``: the one cache of costly results in a campaign's metrics/ folder (kind, version and a
  key of content hashes), with this stage's entries: a pair's metrics, a run's statistics, latents;
- ``latents``: latent PSNR per sampler step;
- ``pairwise``: ``compare_runs`` / ``compare_summaries`` -> ``Comparison``;
- ``inputs``: what ``harness compare`` accepts on each side (a run, CAMPAIGN:ARM, an mp4);
- ``admit``: two media files ``harness compare`` refuses before measuring (one line, the flag);
- ``metrics``: the accuracy metrics that tables and gates read off a comparison;
- ``gates``: thresholds that fail CI (``harness compare --gate``);
- ``significance``: when a timing difference is a finding (Welch's t-test, pure functions);
- ``rules``: the tolerances a scenario sets for verdicts and speed tests.

A campaign's aggregates, noise floor and verdicts are ``harness.analysis``'s; text rendering
lives in ``harness.report``.
"""
