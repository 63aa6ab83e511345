"""The review's records in results.json: per candidate its reading with every sentence a renderer prints of
it, and the summary's lines (``analysis.review`` reads them, ``analysis.sentences`` words them)."""

from __future__ import annotations

from pydantic import Field

from harness.records import Record

INSITU_WHAT = "in-situ error / the exact floor's"  # what a ratio measures where in situ decides


class Terms(Record):
    """A number with its interval and what the interval is."""

    value: float | None = None
    ci: tuple[float, float] | None = None
    ci_what: str = ""  # "95 % CI", "range over seeds"
    word: str = ""


class Reading(Record):
    """One candidate at the top of the report, with the sentences every renderer prints of it."""

    arm: str
    word: str
    ratio: Terms = Field(default_factory=Terms)
    ratio_what: str = ""  # what the ratio measures: "video MSE / the floor's", "in-situ error / ..."
    tolerance: float = 2.0
    regime: str = ""
    step: Terms = Field(default_factory=Terms)  # DiT s/step speed-up
    total: Terms = Field(default_factory=Terms)  # pipeline-total speed-up
    baseline: bool = False  # the scenario's accepted baseline
    text: str = ""  # the verdict in words
    decided_by: str = ""  # the part whose word is the verdict's (``Verdict.decided_by``)
    end_to_end: Terms = Field(default_factory=Terms)  # the decoded output's own reading
    end_to_end_what: str = ""
    insitu: Terms | None = None  # the in-situ reading (ratio to the exact floor's, word), where there is one
    identical_seeds: list[int | None] = Field(default_factory=list)  # bitwise the reference's output
    seeds: int = 0
    warnings: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    attention: str = ""  # why the attention is invalid, where it is
    emulator: bool = False  # a numerics model: its accuracy stands for a kernel's, its timing for none
    badge: str = ""  # an emulator's words after its name; "" for a kernel
    emulator_detail: str = ""  # what the emulator models and how far that was checked
    name: str = ""  # its name as a line leads with it (with an emulator's badge)
    # Its sentences (``analysis.sentences``):
    line: str = ""  # the summary's line: name, word, the deciding ratio, the speed-up
    ratio_line: str = ""  # the deciding ratio with its interval and the tolerance
    lines: list[str] = Field(default_factory=list)  # the badge's accuracy lines ("error: ...")
    bare_lines: list[str] = Field(default_factory=list)  # the same without "error: " (a table cell)
    step_line: str = ""  # "DiT s/step speed-up ..." (or why there is none)
    total_line: str = ""
    step_cell: str = ""  # the speed-up with its interval and word, as a table cell
    total_cell: str = ""
    note: str = ""  # why a run is missing or invalid
    warning_lines: list[str] = Field(default_factory=list)  # each warning led by its arm's name


class FloorPoint(Record):
    """An exact noise-floor arm on the speed-against-accuracy axes."""

    arm: str
    speedup: Terms = Field(default_factory=Terms)
    ratio: float  # its own error energy / the pooled floor's, on ``metric``
    metric: str


class Summary(Record):
    """The summary a report opens with, and its parts pr.md and the job summary print."""

    lines: list[str] = Field(default_factory=list)  # the campaign, each candidate, copies, findings, ...
    incomplete: str = ""  # "INCOMPLETE: ..." where the results lack something
    findings: list[str] = Field(default_factory=list)
    intervals: list[str] = Field(default_factory=list)  # the intervals' confidence, said once
