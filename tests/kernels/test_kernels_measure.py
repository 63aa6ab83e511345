"""harness.kernels.run (measurements): accuracy metrics against numpy, FLOPs, TFLOP/s, bitwise comparison."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.kernels.results import BitwiseCheck, bitwise_reading
from harness.kernels.run import accuracy_metrics, bitwise_compare, tflops
from harness.kernels.schema import attention_flops


def test_accuracy_metrics_match_numpy():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((2, 3, 50, 16))
    out = ref + 0.01 * rng.standard_normal(ref.shape)
    out[0, 0, 0] = 0.0  # a zero row where the reference is not
    m = accuracy_metrics(torch.from_numpy(out).float(), torch.from_numpy(ref), chunk_elems=16 * 7)
    o = torch.from_numpy(out).float().double().numpy()
    assert m.cosine == pytest.approx((o * ref).sum() / np.sqrt((o**2).sum() * (ref**2).sum()), rel=1e-12)
    assert m.rel_l1 == pytest.approx(np.abs(o - ref).sum() / np.abs(ref).sum(), rel=1e-12)
    assert m.rmse == pytest.approx(np.sqrt(((o - ref) ** 2).mean()), rel=1e-12)
    assert m.max_abs_err == pytest.approx(np.abs(o - ref).max(), rel=1e-12)
    a, b = o.reshape(-1, 16), ref.reshape(-1, 16)
    rows = (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-300)
    assert m.row_cos_p10 == pytest.approx(np.percentile(rows, 10), abs=1e-6)
    assert m.row_cos_min == pytest.approx(0.0, abs=1e-7)
    assert m.row_cos_frac_gt_099 == pytest.approx((rows > 0.99).mean())
    assert m.zero_rows == 1 and m.nan_count == 0 and m.inf_count == 0


def test_accuracy_metrics_count_nan_and_inf():
    ref = torch.ones(4, 8)
    out = ref.clone()
    out[0, 0], out[1, 1], out[2, 2] = float("nan"), float("inf"), float("-inf")
    m = accuracy_metrics(out, ref)
    assert (m.nan_count, m.inf_count) == (1, 2)


def test_flops_and_bitwise_helpers():
    assert attention_flops(1, 24, 32768, 32768, 128) == 4 * 24 * 32768**2 * 128
    assert tflops(2e12, 1000.0) == pytest.approx(2.0)
    a = torch.arange(6.0)
    assert bitwise_compare("x", a, a.clone()).identical
    b = a.clone()
    b[3] += 0.5
    diff = bitwise_compare("x", a, b)
    assert not diff.identical and diff.max_abs_diff == 0.5


def test_bitwise_reading_tells_a_wrapper_from_a_nondeterministic_kernel():
    same = BitwiseCheck(check="direct_vs_direct", identical=True, max_abs_diff=0.0)
    jitter = BitwiseCheck(check="direct_vs_direct", identical=False, max_abs_diff=2.4e-4)
    wrapped_same = BitwiseCheck(check="registry_vs_direct", identical=True, max_abs_diff=0.0)
    wrapped_diff = BitwiseCheck(check="registry_vs_direct", identical=False, max_abs_diff=1.2e-4)
    assert bitwise_reading([same, wrapped_same]).startswith("identical")
    assert (
        bitwise_reading([jitter, wrapped_diff])
        == "kernel nondeterministic (direct vs direct differs by max 0.00024)"
    )
    assert bitwise_reading([same, wrapped_diff]).startswith("wrapper changes the result (max 0.00012")
    assert "no direct-vs-direct repeat" in bitwise_reading([wrapped_diff])
    assert bitwise_reading([BitwiseCheck(check="registry_vs_direct", note="no direct call")]) == "not checked"
