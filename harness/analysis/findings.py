"""Where a candidate's attention error concentrates: its calls (in situ) or rows (kernels) grouped by what
they were, a finding when one group's error is several times the rest's (``rule()``). A defect rarely
spreads evenly: thu-ml's Triton kernels score the padded keys of their last 64-key block, which scales
a 74-key call's output by 0.70 and leaves a 120k-key call alone; pooled, the long calls hide it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from harness.analysis.insitu_model import BOOTSTRAP, Finding
from harness.number_format import range_text, ratio_text

FACTOR = 3.0  # a group's error over the rest's (and over its floor) that makes a finding

ROUNDS = 3  # findings per candidate at most
BLOCK = 64  # the key block of the Triton SageAttention kernels (thu-ml); 128 is their query block
PADDED_SHARE = 0.10  # "much padding": padded keys of the last block over this share of all keys
SCALE_MIN = 0.02  # |scale - 1| from which an output counts as scaled


def rule(what: str = "calls") -> str:
    """The rule in words, for observations that are ``what`` (calls in situ, shapes in kernels)."""
    return (
        f"a group of {what} is named when its pooled rel L1 is at least {FACTOR:g}x the other {what}' (the whole "
        f"95 % interval, {BOOTSTRAP} bootstrap resamples of each side) and at least {FACTOR:g}x its exact floor "
        "where one was measured; groups by call kind, key and query length, key length modulo 64 and 128, padding "
        f"of the last 64-key block, step, block and rank; the strongest first, its {what} then set aside"
    )


@dataclass
class Observation:
    """One call (or kernels row): what it was, its error and the exact floor's on it."""

    attrs: dict[str, object]  # kind, k_len, q_len, step, block, rank (missing: not known)
    l1: float  # sum|o - r| (or rel L1 with ref = 1)
    ref: float  # sum|r|
    floor_l1: float | None = None
    scale: float | None = None
    unscaled: float | None = None  # rel L1 of out / scale


def padding(k_len: int, block: int = BLOCK) -> int:
    """Keys a kernel with ``block``-key tiles pads the last tile with."""
    return (-k_len) % block


def _k(o: Observation) -> int | None:
    k = o.attrs.get("k_len")
    return int(k) if isinstance(k, int) else None


def _padded_share(o: Observation) -> str | None:
    if (k := _k(o)) is None:
        return None
    much = padding(k) > PADDED_SHARE * k
    return f"whose last {BLOCK}-key block pads over {PADDED_SHARE:.0%} of the keys" if much else "other"


def _mod(block: int) -> Callable[[Observation], str | None]:
    words = f"whose key length is not a multiple of {block}"
    return lambda o: None if (k := _k(o)) is None else words if k % block else "other"


def _attr(name: str, words: str) -> Callable[[Observation], str | None]:
    return lambda o: None if (v := o.attrs.get(name)) is None else words.format(v)


# (dimension, the group's description of an observation); "other" groups are never named alone.
DIMENSIONS: list[tuple[str, Callable[[Observation], str | None]]] = [
    ("padded_share", _padded_share),
    ("k_len_mod_64", _mod(64)),
    ("k_len_mod_128", _mod(128)),
    ("kind", _attr("kind", "of kind {}")),
    ("k_len", _attr("k_len", "with {} keys")),
    ("q_len", _attr("q_len", "with {} queries")),
    ("shape", _attr("shape", "on shape {}")),
    ("step", _attr("step", "of step {}")),
    ("block", _attr("block", "of block {}")),
    ("rank", _attr("rank", "on rank {}")),
]


def _pooled(obs: Sequence[Observation]) -> float:
    ref = sum(o.ref for o in obs)
    return sum(o.l1 for o in obs) / ref if ref > 0 else math.nan


def _interval(group: Sequence[Observation], rest: Sequence[Observation]) -> list[float] | None:
    """95 % bootstrap interval of pooled(group) / pooled(rest), each side resampled apart."""
    if len(group) < 2 and len(rest) < 2:
        return None
    rng = np.random.default_rng(0)

    def boots(obs: Sequence[Observation]) -> np.ndarray:
        l1 = np.array([o.l1 for o in obs], dtype=float)
        ref = np.array([o.ref for o in obs], dtype=float)
        idx = rng.integers(0, len(obs), size=(BOOTSTRAP, len(obs)))
        return l1[idx].sum(axis=1) / np.maximum(ref[idx].sum(axis=1), np.finfo(float).tiny)

    with np.errstate(all="ignore"):  # huge sums overflow to inf: that resample's ratio is not finite
        ratio = boots(group) / np.maximum(boots(rest), np.finfo(float).tiny)
        return [float(np.percentile(ratio, 2.5)), float(np.percentile(ratio, 97.5))]


def scale_of(obs: Sequence[Observation]) -> tuple[float | None, float | None]:
    """The group's fitted scale and rel L1 once it is removed, each weighted by sum|r|."""
    known = [o for o in obs if o.scale is not None and o.unscaled is not None and math.isfinite(o.scale)]
    ref = sum(o.ref for o in known)
    if not known or ref <= 0:
        return None, None
    return (
        sum(o.scale * o.ref for o in known) / ref,  # type: ignore[operator]
        sum(o.unscaled * o.ref for o in known) / ref,  # type: ignore[operator]
    )


def mostly_scale(rel_l1: float | None, scale: float | None, unscaled: float | None) -> bool:
    """Scaled by ``SCALE_MIN`` or more, with under a third of the error left once the scale is divided out."""
    if any(x is None or not math.isfinite(x) for x in (rel_l1, scale, unscaled)):
        return False
    return abs(scale - 1) >= SCALE_MIN and unscaled < rel_l1 / 3


def scale_words(rel_l1: float, scale: float | None, unscaled: float | None) -> str:
    """'outputs scaled by 0.70, direction kept (...)': empty unless the error is mostly a scale."""
    if not mostly_scale(rel_l1, scale, unscaled):
        return ""
    return (
        f"outputs scaled by {scale:.2f}, direction kept (rel L1 {unscaled:.3g} once the scale is divided out): "
        "cosine cannot see this"
    )


def _facts(group: Sequence[Observation]) -> str:
    """What the group's observations were: kinds, key lengths and their padding."""
    kinds = sorted({str(o.attrs["kind"]) for o in group if o.attrs.get("kind") is not None})
    ks = sorted({k for o in group if (k := _k(o)) is not None})
    bits = [", ".join(kinds)] if kinds else []
    if ks:
        shown = ", ".join(f"{k:,}" for k in ks[:4]) + (f" and {len(ks) - 4} more" if len(ks) > 4 else "")
        pads = sorted({padding(k) for k in ks})
        pad = f"{pads[0]} padded" if len(pads) == 1 else f"{pads[0]}-{pads[-1]} padded"
        bits.append(f"{shown} keys, {pad} to a {BLOCK}-key block")
    return "; ".join(bits)


def _candidates(obs: Sequence[Observation]) -> dict[frozenset[int], list[tuple[str, str]]]:
    """Every nameable group: its observations (indices) -> [(dimension, description)], in order."""
    out: dict[frozenset[int], list[tuple[str, str]]] = {}
    for dim, key in DIMENSIONS:
        labels = [key(o) or "other" for o in obs]  # not known: never named, always in the rest
        if len(set(labels)) < 2:
            continue
        for lab in dict.fromkeys(x for x in labels if x != "other"):
            members = frozenset(i for i, x in enumerate(labels) if x == lab)
            out.setdefault(members, []).append((dim, str(lab)))
    return out


def find(candidate: str, obs: Sequence[Observation], what: str = "calls") -> list[Finding]:
    """The findings of ``candidate`` over ``obs`` (finite observations with ref > 0), strongest first."""
    pool = [o for o in obs if o.ref > 0 and math.isfinite(o.l1)]
    found: list[Finding] = []
    for _ in range(ROUNDS):
        best: tuple[float, Finding, frozenset[int]] | None = None
        for members, names in _candidates(pool).items():
            group = [pool[i] for i in sorted(members)]
            rest = [o for i, o in enumerate(pool) if i not in members]
            g, r = _pooled(group), _pooled(rest)
            # The rest without error (bitwise exact there) gives no ratio to name.
            if not (math.isfinite(g) and math.isfinite(r)) or r <= 0 or g < FACTOR * r:
                continue
            ratio = g / r
            ci = _interval(group, rest)
            if ci is not None and not (all(map(math.isfinite, ci)) and ci[0] >= FACTOR):
                continue  # an interval that overflowed decides nothing
            floors = [o for o in group if o.floor_l1 is not None]
            floor = sum(o.floor_l1 for o in floors) / sum(o.ref for o in floors) if floors else None  # type: ignore[misc]
            if floor is not None and floors and g < FACTOR * floor:
                continue
            scale, unscaled = scale_of(group)
            f = Finding(
                candidate=candidate, dimension=names[0][0], group=names[0][1], also=[n for _, n in names[1:]],
                what=what, facts=_facts(group), count=len(group), rest_count=len(rest), rel_l1=g, rest_rel_l1=r,
                ratio=ratio, ratio_ci=ci, floor_ratio=g / floor if floor else None, scale=scale,
                rel_l1_unscaled=unscaled, among_rest=bool(found),
            )  # fmt: skip
            strength = ci[0] if ci is not None else ratio
            if best is None or strength > best[0]:
                best = (strength, f, members)
        if best is None:
            break
        _, f, members = best
        f.text = finding_text(f)
        found.append(f)
        pool = [o for i, o in enumerate(pool) if i not in members]
    scaled = _scale_finding(candidate, pool, what, among_rest=bool(found))
    return found + ([scaled] if scaled else [])


def _scale_finding(
    candidate: str, pool: Sequence[Observation], what: str, among_rest: bool
) -> Finding | None:
    """The observations no group finding took, when their error is mostly a scale of the output."""
    g = _pooled(pool) if pool else math.nan
    scale, unscaled = scale_of(pool)
    if not mostly_scale(g, scale, unscaled):
        return None
    f = Finding(
        candidate=candidate, dimension="all", group="", what=what, facts=_facts(pool), count=len(pool),
        rest_count=0, rel_l1=g,
        rest_rel_l1=None, ratio=None, scale=scale, rel_l1_unscaled=unscaled, among_rest=among_rest,
    )  # fmt: skip
    f.text = finding_text(f)
    return f


def finding_text(f: Finding) -> str:
    """'sage_attn2: error 85x higher [95 % 60 to 120] on calls whose ...: rel L1 0.307 against ...'."""
    facts, scaled = f" ({f.facts})" if f.facts else "", scale_words(f.rel_l1, f.scale, f.rel_l1_unscaled)
    if f.ratio is None or f.rest_rel_l1 is None:  # the scale alone, on every call left
        where = f"{'the other' if f.among_rest else 'all'} {f.count} {f.what}{facts}"
        return f"{f.candidate}: rel L1 {f.rel_l1:.3g} on {where}; {scaled}"
    ci = f" [95 % {range_text(*f.ratio_ci)}]" if f.ratio_ci else ""
    where = f"{f.what} {f.group}{facts}"
    others = f"the other {f.rest_count} {f.what}" + (" left" if f.among_rest else "")
    parts = [
        f"{f.candidate}: error {ratio_text(f.ratio)} higher{ci} on {f.count} {where}: rel L1 {f.rel_l1:.3g} against "
        f"{f.rest_rel_l1:.3g} on {others}"
    ]
    if f.floor_ratio is not None:
        parts.append(f"{ratio_text(f.floor_ratio)} its exact floor")
    return "; ".join([*parts, scaled] if scaled else parts)
