"""Planted errors of known size: exact SDPA with an error added to every call's output whose rel L1
against the exact output is the dose by construction, the doses of a dose-response (how much per-call
error the pipeline absorbs). ``noise``: each element times 1 + or - dose, the signs drawn from the
backend's own seeded generator (reproducible call by call); ``scale``: the output times 1 - dose, the
shape of scored padded keys (their zero values only add weight to the softmax's denominator)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from harness.attention.registry import AttentionBackend, check_qkv, default_scale, register_backend

SHAPES = ("noise", "scale")


@register_backend(
    "planted_error",
    exact=False,
    description="torch SDPA with a planted error of rel L1 `dose` on every call (shape noise: signs "
    "seeded by `seed`; scale: out x (1 - dose), the padded-key shape)",
)
class PlantedError(AttentionBackend):
    default_options = {"dose": 0.01, "shape": "noise", "seed": 0}

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
        return None

    def setup(self) -> None:
        if problem := self.option_problem(self.options):
            from harness.errors import HarnessError

            raise HarnessError(problem)
        self._signs = torch.Generator(device="cpu").manual_seed(self.options["seed"])

    def __call__(self, q, k, v, scale=None):
        check_qkv(self.name, q, k, v)
        out = F.scaled_dot_product_attention(q, k, v, scale=default_scale(q, scale))
        dose = float(self.options["dose"])
        if self.options["shape"] == "scale":
            return out * (1.0 - dose)
        # drawn on the CPU whatever the device: the same signs on every machine
        signs = torch.randint(0, 2, out.shape, generator=self._signs).mul_(2).sub_(1)
        return out + out * signs.to(device=out.device, dtype=out.dtype) * dose
