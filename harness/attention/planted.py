"""Planted errors of known size: exact SDPA with an error added to every call's output whose rel L1
against the exact output is the dose by construction, the doses of a dose-response (how much per-call
error the pipeline absorbs). ``noise``: each element times 1 + or - dose, the signs drawn from the
backend's own seeded generator (reproducible call by call); ``scale``: the output times 1 - dose, the
shape of scored padded keys (their zero values only add weight to the softmax's denominator). Option
``site`` (a ``CallSiteFilter``: kinds, steps, blocks) plants it on those calls only, the others exact."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from pydantic import ValidationError

from harness.attention.registry import AttentionBackend, check_qkv, default_scale, register_backend
from harness.errors import HarnessError
from harness.insitu_records import CallSiteFilter

SHAPES = ("noise", "scale")


@register_backend(
    "planted_error",
    exact=False,
    description="torch SDPA with a planted error of rel L1 `dose` on every call of `site` (shape noise: "
    "signs seeded by `seed`; scale: out x (1 - dose), the padded-key shape)",
)
class PlantedError(AttentionBackend):
    default_options = {"dose": 0.01, "shape": "noise", "seed": 0, "site": {}}
    sites = None  # the run's CallSites (bind_sites), read when the site is restricted

    @classmethod
    def option_problem(cls, options: dict[str, Any]) -> str | None:
        dose, shape = options.get("dose", 0.01), options.get("shape", "noise")
        seed = options.get("seed", 0)
        if isinstance(dose, bool) or not isinstance(dose, int | float) or not 0 <= dose < 1:
            return f"planted_error: option dose={dose!r}; expected a number in [0, 1) (the rel L1 per call)"
        if shape not in SHAPES:
            return f"planted_error: option shape={shape!r}; expected one of {', '.join(SHAPES)}"
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            return f"planted_error: option seed={seed!r}; expected an integer 0 or more"
        try:
            CallSiteFilter.model_validate(options.get("site", {}))
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(map(str, first["loc"]))
            return f"planted_error: option site{'.' + where if where else ''}: {first['msg']}"
        return None

    def setup(self) -> None:
        if problem := self.option_problem(self.options):
            raise HarnessError(problem)
        self._signs = torch.Generator(device="cpu").manual_seed(self.options["seed"])
        self.site = CallSiteFilter.model_validate(self.options["site"])

    def bind_sites(self, sites: Any) -> None:
        self.sites = sites

    def _planted_here(self) -> bool:
        if self.site.everywhere:
            return True
        if self.sites is None:
            raise HarnessError(
                "planted_error: option site needs the run's call sites, which this runner gives none"
            )
        at = self.sites.current
        return self.site.matches(at.kind, at.step, at.block)

    def __call__(self, q, k, v, scale=None):
        check_qkv(self.name, q, k, v)
        out = F.scaled_dot_product_attention(q, k, v, scale=default_scale(q, scale))
        if not self._planted_here():
            return out
        dose = float(self.options["dose"])
        if self.options["shape"] == "scale":
            return out * (1.0 - dose)
        # drawn on the CPU whatever the device: the same signs on every machine
        signs = torch.randint(0, 2, out.shape, generator=self._signs).mul_(2).sub_(1)
        return out + out * signs.to(device=out.device, dtype=out.dtype) * dose
