"""In-situ (shadow) measurement of attention: every call of a real run also computed by named shadow
ops and measured against an exact yardstick on sampled rows, attributed to its DiT step and block."""
