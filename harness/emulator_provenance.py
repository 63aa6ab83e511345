"""What an emulator models and whether its numerics were checked against that kernel (a verdict's
foundation): a ``Provenance`` per variant, carried in the backend's params into every record."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Fidelity(_Frozen):
    """Whether an emulator's numerics were checked against the kernel it models."""

    measured: bool
    machine: str = ""  # "one NVIDIA H200"
    machine_short: str = ""  # "H200": the word the badge uses
    date: str = ""  # ISO date of the measurement
    software: str = ""  # "torch 2.11, triton 3.6"
    shapes: str = ""  # what was measured: dtype, heads x head dim, key lengths
    agreement: str = ""  # the figures: rel L1 and fitted scale of the emulator beside the kernel's
    evidence: str = ""  # the file that holds the figures (repo-relative), or where they were measured
    unmeasured: str = ""  # not measured: why, and what stays unknown

    def text(self) -> str:
        """One sentence for reports and ``harness backends``."""
        if not self.measured:
            return "not measured" + (f": {self.unmeasured}" if self.unmeasured else "")
        where = ", ".join(x for x in (self.machine, self.date, self.software) if x)
        parts = [f"measured on {where}" if where else "measured"]
        parts += [x for x in (self.shapes, self.agreement) if x]
        text = "; ".join(parts)
        return text + (f" ({self.evidence})" if self.evidence else "")


class KernelRef(_Frozen):
    """The kernel an emulator models."""

    package: str  # "thu-ml SageAttention"
    function: str  # "sageattn_qk_int8_pv_fp16_triton"
    version: str = ""  # "1.0.6", or "2.2.0 at d1a57a5" (the commit where there is no release)
    short: str  # a few words for badges: "SageAttention2 d1a57a5 Triton"
    backend: str = ""  # the harness backend that runs the real kernel ("sage_attn2")
    package_choice: str = ""  # that backend's ``package`` option selecting this version, if any

    def text(self) -> str:
        return " ".join(x for x in (self.package, self.version, self.function) if x)


class Provenance(_Frozen):
    """What an emulator (variant) models, and its fidelity to it."""

    schema_version: str = Field("harness.emulator_provenance/1", alias="schema")
    variant: str = ""
    kernel: KernelRef
    fidelity: Fidelity
    # options set away from the variant's settings: the measured figures no longer apply
    changed: list[str] = Field(default_factory=list)

    def badge(self) -> str:
        """'emulator of SageAttention2 d1a57a5 Triton, measured on H200' (or 'not measured')."""
        if self.changed:
            state = f"not measured with {', '.join(self.changed)} changed"
        elif self.fidelity.measured:
            state = f"measured on {self.fidelity.machine_short or self.fidelity.machine or 'a GPU'}"
        else:
            state = "not measured"
        return f"emulator of {self.kernel.short}, {state}"

    def with_changes(self, changed: list[str]) -> Provenance:
        return self.model_copy(update={"changed": sorted(changed)})


def provenance_of(params: dict | None) -> Provenance | None:
    """The provenance a record's backend params carry (None: not an emulator, or an older record)."""
    raw = (params or {}).get("provenance")
    if not isinstance(raw, dict):
        return None
    try:
        return Provenance.model_validate(raw)
    except ValueError:  # a record from another harness version, or edited: not trusted as a claim
        return None
