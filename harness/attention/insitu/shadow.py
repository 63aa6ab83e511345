"""Shadowed attention: the run's own attention, plus every shadow op on copies of the same q/k/v, each
measured against an exact yardstick on sampled query rows. The model receives bitwise what the run
without shadows gives (the primary runs first on its own tensors; the rest under ``fork_rng``).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from harness.attention.insitu.measure import error_scalars, failed_op, op_error, sample_rows, yardstick
from harness.attention.insitu.recorder import InSituRecorder
from harness.attention.registry import AttentionOp, UnsupportedCall, WrappedOp, default_scale
from harness.insitu_records import InSituCall, InSituOp


def op_record(name: str, role: str, op: AttentionOp) -> InSituOp:
    """What the meta record says of an op (its backend's parameters; perturbations included)."""
    params = dict(getattr(op, "params", {}) or {})
    return InSituOp(
        name=name,
        role=role,
        attn_type=str(params.get("backend", op.name)),
        exact=bool(op.exact),
        kv_reversed=bool(params.get("kv_reversed", False)),
        kv_chunks=int(params.get("kv_chunks", 1)),
        params=params,
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class ShadowedAttention(WrappedOp):
    """The primary's output, measuring the shadows beside it; a shadow's refusal is that call's NaN
    with the reason, any other failure drops it for the rest of the run (named in the meta notes)."""

    def __init__(
        self,
        primary: AttentionOp,
        shadows: dict[str, AttentionOp],
        *,
        sample_rows: int,
        seed: int,
        recorder: InSituRecorder,
        primary_name: str | None = None,
    ):
        super().__init__(primary)
        self.shadows = dict(shadows)
        self.rows = int(sample_rows)
        self.recorder = recorder
        self.primary_name = primary_name or primary.name
        if self.primary_name in self.shadows:
            raise ValueError(f"shadow {self.primary_name!r} has the primary's name")
        self.generator = torch.Generator(device="cpu").manual_seed(int(seed))
        ops = [op_record(self.primary_name, "primary", primary)]
        ops += [op_record(n, "shadow", op) for n, op in self.shadows.items()]
        recorder.set_ops(self.primary_name, ops)

    def __getattr__(self, name: str) -> Any:
        # The runner reads the primary's counts and checks (rank_calls, direct_check) through us.
        if name in ("inner", "__setstate__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __call__(self, q, k, v, scale=None):
        site = self.recorder.current
        call = self.recorder.next_call()
        pristine = [x.detach().clone() for x in (q, k, v)]
        out = self.inner(q, k, v, scale)
        cuda = q.is_cuda
        with torch.random.fork_rng(devices=[q.device] if cuda else [], device_type="cuda" if cuda else None):
            self._measure(call, site, out, pristine, default_scale(pristine[0], scale))
        return out

    def _measure(self, call: int, site, out: torch.Tensor, qkv: list[torch.Tensor], scale: float) -> None:
        q, k, v = qkv
        device = q.device
        _sync(device)
        t0 = time.perf_counter()
        if self.recorder.wants_capture(site):
            self.recorder.capture(site, call, q, k, v, scale)
        rows = sample_rows(q.shape[2], self.rows, self.generator, device)
        with torch.no_grad():
            ref = yardstick(q, k, v, scale, rows, self.recorder.settings.yardstick)
            scalars = {self.primary_name: error_scalars(out.detach(), ref, rows)}
            failed = {}
            for name, op in list(self.shadows.items()):
                try:
                    shadow_out = op(*(x.clone() for x in qkv), scale)
                    scalars[name] = error_scalars(shadow_out, ref, rows)
                    del shadow_out
                except UnsupportedCall as err:
                    failed[name] = failed_op(f"refused: {err}")
                except (RuntimeError, ValueError) as err:  # OOM, a kernel error: stop measuring it
                    message = f"{type(err).__name__}: {err}".splitlines()[0]
                    failed[name] = failed_op(message)
                    del self.shadows[name]
                    self.recorder.note(f"shadow {name} failed on call {call} and was dropped: {message}")
            names = list(scalars)
            # One device-to-host copy per call: sum|r| first, then every op's scalars.
            flat = torch.cat([ref.to(torch.float64).abs().sum().view(1), *(scalars[n] for n in names)])
            values = flat.cpu().tolist()
        ref_l1, width = values[0], len(values[1:]) // max(1, len(names))
        errors = {n: op_error(values[1 + i * width : 1 + (i + 1) * width]) for i, n in enumerate(names)}
        errors.update(failed)
        _sync(device)
        b, h, n_q, d = q.shape
        self.recorder.write(
            InSituCall(
                call=call,
                rank=self.recorder.rank,
                step=site.step,
                block=site.block,
                kind=site.kind,
                batch=b,
                heads=h,
                q_len=n_q,
                k_len=k.shape[2],
                head_dim=d,
                rows=int(rows.numel()),
                elements=b * h * int(rows.numel()) * d,
                ref_l1=ref_l1,
                seconds=time.perf_counter() - t0,
                errors={n: errors[n] for n in [self.primary_name, *self.shadows, *failed] if n in errors},
            )
        )

    def __repr__(self) -> str:
        return f"ShadowedAttention({self.inner!r}, shadows={list(self.shadows)})"
