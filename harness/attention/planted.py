"""Planted errors of known size, the doses of a dose-response: exact SDPA whose output's rel L1 against
the exact one is the dose by construction. ``noise``: each element times 1 +- dose, the signs from the
backend's own seeded generator (reproducible call by call); ``scale``: out x (1 - dose), the shape of
scored padded keys (their zeros only add weight to the softmax's denominator); ``site``: those calls."""

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
        opts = {**cls.default_options, **options}
        dose, shape, seed = opts["dose"], opts["shape"], opts["seed"]
        if isinstance(dose, bool) or not isinstance(dose, int | float) or not 0 <= dose < 1:
            return f"planted_error: option dose={dose!r}; expected a number in [0, 1) (the rel L1 per call)"
        if shape not in SHAPES:
            return f"planted_error: option shape={shape!r}; expected one of {', '.join(SHAPES)}"
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            return f"planted_error: option seed={seed!r}; expected an integer 0 or more"
        try:
            CallSiteFilter.model_validate(opts["site"])
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

    def __call__(self, q, k, v, scale=None):
        check_qkv(self.name, q, k, v)
        out = F.scaled_dot_product_attention(q, k, v, scale=default_scale(q, scale))
        if not self.site.everywhere:
            if self.sites is None:
                raise HarnessError(
                    "planted_error: option site needs the run's call sites, which this runner gives none"
                )
            at = self.sites.current
            if not self.site.matches(at.kind, at.step, at.block):
                return out
        dose = float(self.options["dose"])
        if self.options["shape"] == "scale":
            return out * (1.0 - dose)
        # drawn on the CPU whatever the device: the same signs on every machine
        signs = torch.randint(0, 2, out.shape, generator=self._signs).mul_(2).sub_(1)
        return out + out * signs.to(device=out.device, dtype=out.dtype) * dose
