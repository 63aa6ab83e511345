"""In-situ (shadow) measurement of attention: every call of a real run also computed by named shadow
ops and measured against an exact yardstick on sampled rows, attributed to its DiT step and block."""

from harness.attention.insitu.read import InSituRun, grouped, pool, read_insitu  # noqa: F401
from harness.attention.insitu.recorder import INSITU_DIR, InSituRecorder  # noqa: F401
from harness.attention.insitu.shadow import ShadowedAttention  # noqa: F401
from harness.attention.insitu.sites import KINDS, CallSite, CallSites  # noqa: F401
