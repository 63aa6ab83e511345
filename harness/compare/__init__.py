"""Compare stage: what two runs (or two files) say about themselves and how far B is from A:
one run's own account (``summary``), files' hashes (``hashes``), the cache of costly results
(``cache``), latent PSNR (``latents``), the comparison itself (``pairwise``), what ``harness
compare`` accepts and refuses (``inputs``, ``admit``), the gates that fail CI (``gates``) and when
a timing difference is a finding (``significance``). A campaign's aggregates, noise floor and
verdicts are ``harness.analysis``'s; text rendering is ``harness.report``'s.
"""
