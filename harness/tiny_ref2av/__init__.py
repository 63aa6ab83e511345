"""The embedded tiny ref2av pipeline (a small DiT after MiniMax-H3 Ref2AV, its sampler and decoders)
that the ``builtin`` runner drives; nothing is downloaded (the reference ships with scikit-image)."""
