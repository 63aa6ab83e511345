"""Compare stage: what two runs (or files) say about themselves and how far B is from A (summary, hashes,
cache, latents, pairwise, inputs, gates, significance); campaigns are ``harness.analysis``'s."""
