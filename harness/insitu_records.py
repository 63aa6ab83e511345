"""The in-situ measurement's records on disk: ``insitu/rank<r>.jsonl`` (one ``InSituCall`` per
attention call, each op's ``InSituOpError``) and ``insitu/rank<r>.meta.json`` (``InSituMeta``: the
ops, the settings, the captured calls), and the pooled ``InSituStats`` readers build from them."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, get_args

from pydantic import ConfigDict, Field

from harness.records import InSituSettings, Record

INSITU_DIR = "insitu"  # a run folder's in-situ records
CallKind = Literal["dit_self", "refiner", "cross", "other"]  # what a runner's hooks call a call
CALL_KINDS: tuple[str, ...] = get_args(CallKind)


class CallSiteFilter(Record):
    """Which attention calls something applies to (a planted error): those of the listed kinds, DiT
    steps (from 1) and blocks (from 0); a field left empty restricts nothing."""

    model_config = ConfigDict(extra="forbid")  # written by hand in a scenario: a typo is refused

    kinds: list[CallKind] = Field(default_factory=list)
    steps: list[Annotated[int, Field(ge=1)]] = Field(default_factory=list)
    blocks: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)

    def matches(self, kind: str, step: int | None, block: int | None) -> bool:
        wanted = ((self.kinds, kind), (self.steps, step), (self.blocks, block))
        return all(not listed or at in listed for listed, at in wanted)

    @property
    def everywhere(self) -> bool:
        return not (self.kinds or self.steps or self.blocks)

    def text(self) -> str:
        """'refiner; steps 1, 2' ('every call' when unrestricted)."""
        named = {"": self.kinds, "steps ": self.steps, "blocks ": self.blocks}
        return "; ".join(f"{name}{', '.join(map(str, v))}" for name, v in named.items() if v) or "every call"


class InSituOpError(Record):
    """One op's error on one call against the exact yardstick, on the call's sampled query rows."""

    cosine: float
    rel_l1: float  # sum|o - r| / sum|r|
    rmse: float
    max_abs: float
    row_cos_p1: float  # the worst rows: 1st and 10th percentile of the per-row cosine
    row_cos_p10: float
    nan: int = 0  # in the op's whole output, not only the sampled rows
    inf: int = 0
    error: str | None = None  # the op refused or failed on this call (its metrics are NaN)
    # Least squares out ~ scale x yardstick on the sampled rows, and the rel L1 of out / scale
    # (None: an older record, or a failed op).
    scale: float | None = None
    rel_l1_unscaled: float | None = None

    @property
    def nonfinite(self) -> int:  # NaN and Inf values in the whole output (nan, inf count them there)
        return self.nan + self.inf

    @property
    def finite(self) -> bool:  # measured, no NaN/Inf in the whole output nor in the metrics
        metrics = (self.cosine, self.rel_l1, self.rmse, self.max_abs, self.row_cos_p1, self.row_cos_p10)
        return not self.error and not self.nonfinite and all(math.isfinite(x) for x in metrics)


class InSituCall(Record):
    """One attention call of a shadowed run: where it was and every op's error on it."""

    call: int  # 1-based, per rank
    rank: str = "0"
    step: int | None = None  # DiT step from 1 (None: outside the sampling loop)
    block: int | None = None  # transformer block index from 0
    kind: str = "other"  # dit_self | refiner | cross | other
    batch: int
    heads: int
    q_len: int
    k_len: int
    head_dim: int
    rows: int  # query rows sampled (the same for every op of the call)
    elements: int  # values compared per op: batch * heads * rows * head_dim
    ref_l1: float  # sum|r| over them (pools rel L1 over calls)
    seconds: float = 0.0  # the measurement's own time: yardstick and shadows (device-synchronised)
    errors: dict[str, InSituOpError] = Field(default_factory=dict)  # op name -> error

    def returned_nonfinite(self, op: str) -> bool:
        """``op`` ran and gave NaN/Inf: in its whole output, or in its metrics on a sound yardstick."""
        e = self.errors.get(op)
        sound = math.isfinite(self.ref_l1) and self.ref_l1 > 0  # else every op's metrics are NaN
        return e is not None and not e.error and (e.nonfinite > 0 or (sound and not e.finite))


class InSituOp(Record):
    """An op a shadowed run measured: the run's own attention (``primary``) or one of its shadows."""

    name: str
    role: Literal["primary", "shadow"]
    attn_type: str
    exact: bool = False
    kv_reversed: bool = False
    kv_chunks: int = 1
    params: dict[str, Any] = Field(default_factory=dict)


class CapturedCall(Record):
    """A call whose q/k/v were kept (``file``, relative to the insitu folder; tensors q, k, v)."""

    file: str
    call: int
    rank: str = "0"
    step: int | None = None
    block: int | None = None
    kind: str = "other"
    q_shape: list[int] = Field(default_factory=list)  # [B, H, N, D]
    k_len: int = 0
    dtype: str = ""
    scale: float = 0.0
    bytes: int = 0


class InSituMeta(Record):
    """insitu/rank<r>.meta.json: what one rank's lines measured, and the calls it captured."""

    schema_version: str = Field("harness.insitu/1", alias="schema")
    rank: str = "0"
    primary: str  # the op name of the run's own attention in every line's ``errors``
    ops: list[InSituOp] = Field(default_factory=list)
    settings: InSituSettings = Field(default_factory=InSituSettings)
    calls: int = 0
    complete: bool = False  # the run closed the recorder (every line flushed)
    captured: list[CapturedCall] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # a shadow that failed and was dropped, ...


class InSituStats(Record):
    """One op's errors pooled over a group of calls."""

    calls: int = 0
    failed: int = 0  # calls not pooled: refused, failed, or a non-finite output or metric
    nonfinite: int = 0  # of them, calls measured with a non-finite value (output or metric)
    rel_l1: float | None = None
    rmse: float | None = None
    cosine: float | None = None  # mean over calls
    cosine_min: float | None = None
    max_abs: float | None = None
    row_cos_p1: float | None = None  # lowest over calls
    row_cos_p10: float | None = None  # mean over calls
    nan: int = 0
    inf: int = 0
