"""Compiled CPU kernels (numba) for the metric suite, wrapped by ``ssim.py`` and ``stats.py``: one
pass over a frame (pair) in cache, ``nogil`` so threads run side by side, compiled once per machine
(``cache=True``); imported only when a CPU kernel is first needed.

``ssim_sse``'s filters are centre-compensated, x_c + sum_t k_t ((x_t - x_c) + (x_-t - x_c)): a flat
neighbourhood gives exactly x_c, so the variance is exactly 0 there (without it, flat areas next to a
difference cost ~1e-6 of SSIM; with it the worst case found is ~1e-7).
"""

from __future__ import annotations

import numba as nb
import numpy as np

# contract: fused multiply-add. No reassociation in the filters: their order of operations
# is what keeps flat regions exact (see ``ssim_sse``). error_model numpy: no zero-division
# checks (they would stop vectorisation). No assumption of finite values.
_OPTS = {"nogil": True, "cache": True, "fastmath": {"contract", "nsz"}, "error_model": "numpy"}
# For sums only: reassociation lets them vectorise (sums of integers stay exact below 2^53).
_SUM_OPTS = _OPTS | {"fastmath": {"reassoc", "contract", "nsz"}}

PAD = 5  # 11-tap window
MODE_FULL, MODE_BLUR, MODE_MAPS = 0, 1, 2  # MODE_BLUR/MAPS: partial work, for profiling only


@nb.njit(**_OPTS)
def _deinterleave(src, r0, n, out):  # pragma: no cover - compiled
    """Rows r0..r0+n of src (H, W*C) into out[:, :n] (C, rows, W); returns their sum."""
    C = out.shape[0]
    W = out.shape[2]
    total = 0
    for i in range(n):
        row = src[r0 + i]
        s = 0
        for x in range(W * C):
            s += np.int32(row[x])
        total += s
        if C == 3:
            o0 = out[0, i]
            o1 = out[1, i]
            o2 = out[2, i]
            for x in range(W):
                o0[x] = row[3 * x]
                o1[x] = row[3 * x + 1]
                o2[x] = row[3 * x + 2]
        else:
            for x in range(W):
                for c in range(C):
                    out[c, i, x] = row[C * x + c]
    return total


@nb.njit(**_SUM_OPTS)
def _sum(x):  # pragma: no cover - compiled
    acc = 0.0
    for j in range(x.shape[0]):
        acc += x[j]
    return acc


@nb.njit(**_OPTS)
def ssim_sse(a, b, taps, band_rows, ring, ts, pa, pb, row_sse, mode):  # pragma: no cover - compiled
    """(sum of the SSIM map over the valid region, number of terms, exact SSE) of uint8 (H, W, C) a, b;
    the s, d, s^2, d^2 maps of a row go through the horizontal pass into a ring of 12 rows, the vertical
    pass makes two output rows per load; identical bands (halo included) count 1.0 per term unread."""
    H, W, C = a.shape
    Wv = W - 2 * PAD
    k0, k1, k2, k3, k4 = taps[0], taps[1], taps[2], taps[3], taps[4]
    c1 = np.float32(2.0 * (0.01 * 255.0) ** 2)
    c2 = np.float32(2.0 * (0.03 * 255.0) ** 2)
    a2 = a.reshape(H, W * C)
    b2 = b.reshape(H, W * C)
    sse = 0
    for r in range(H):
        ra = a2[r]
        rb = b2[r]
        acc = 0
        for x in range(W * C):
            e = np.int32(ra[x]) - np.int32(rb[x])
            acc += np.int64(e * e)
        row_sse[r] = acc
        sse += acc
    total = 0.0
    rowbuf = np.empty(Wv, np.float32)
    vo = np.empty((8, Wv), np.float32)
    for o0 in range(PAD, H - PAD, band_rows):
        o1 = min(o0 + band_rows, H - PAD)
        r0 = o0 - PAD
        n = o1 - o0 + 2 * PAD
        same = True
        for r in range(r0, r0 + n):
            if row_sse[r] != 0:
                same = False
                break
        if same:
            total += float((o1 - o0) * Wv * C)
            continue
        # Band-wide integer offsets keep |s|, |d| small so that E[x^2] - E[x]^2 cancels less
        # in float32 (a variance ignores a shift; the means get the offset back below).
        inv = 1.0 / (n * W * C)
        mean_a = _deinterleave(a2, r0, n, pa) * inv
        mean_b = _deinterleave(b2, r0, n, pb) * inv
        cs = np.float32(np.round(mean_a + mean_b - 255.0))
        cd = np.float32(np.round(mean_a - mean_b))
        fcs = np.float32(255.0) + cs
        for c in range(C):
            for i in range(n):
                ac = pa[c, i]
                bc = pb[c, i]
                s_ = ts[0]
                d_ = ts[1]
                ss = ts[2]
                dd = ts[3]
                for x in range(W):
                    av = np.float32(ac[x])
                    bv = np.float32(bc[x])
                    s = av + bv - fcs
                    d = av - bv - cd
                    s_[x] = s
                    d_[x] = d
                    ss[x] = s * s
                    dd[x] = d * d
                if mode == MODE_MAPS:
                    continue
                slot = i % 12
                for m in range(4):
                    t = ts[m]
                    o = ring[m, slot]
                    for j in range(Wv):
                        c0 = t[j + 5]
                        c2x = c0 + c0
                        o[j] = c0 + (
                            k0 * (t[j] + t[j + 10] - c2x)
                            + k1 * (t[j + 1] + t[j + 9] - c2x)
                            + k2 * (t[j + 2] + t[j + 8] - c2x)
                            + k3 * (t[j + 3] + t[j + 7] - c2x)
                            + k4 * (t[j + 4] + t[j + 6] - c2x)
                        )
                if i < 2 * PAD:
                    continue
                q = i - 2 * PAD  # the output row whose window ends at input row i
                last = q == n - 2 * PAD - 1
                if q % 2 == 0 and not last:
                    continue  # wait for the next input row: output rows q, q + 1 together
                two = q % 2 == 1
                if two:
                    q -= 1
                for m in range(4):
                    R = ring[m]
                    i0 = R[q % 12]
                    i1 = R[(q + 1) % 12]
                    i2 = R[(q + 2) % 12]
                    i3 = R[(q + 3) % 12]
                    i4 = R[(q + 4) % 12]
                    i5 = R[(q + 5) % 12]
                    i6 = R[(q + 6) % 12]
                    i7 = R[(q + 7) % 12]
                    i8 = R[(q + 8) % 12]
                    i9 = R[(q + 9) % 12]
                    i10 = R[(q + 10) % 12]
                    i11 = R[(q + 11) % 12]
                    oa = vo[2 * m]
                    ob = vo[2 * m + 1]
                    if two:
                        for j in range(Wv):
                            x = i5[j]
                            y = i6[j]
                            v1 = i1[j]
                            v2 = i2[j]
                            v3 = i3[j]
                            v4 = i4[j]
                            v7 = i7[j]
                            v8 = i8[j]
                            v9 = i9[j]
                            v10 = i10[j]
                            oa[j] = x + (
                                k0 * ((i0[j] - x) + (v10 - x))
                                + k1 * ((v1 - x) + (v9 - x))
                                + k2 * ((v2 - x) + (v8 - x))
                                + k3 * ((v3 - x) + (v7 - x))
                                + k4 * ((v4 - x) + (y - x))
                            )
                            ob[j] = y + (
                                k0 * ((v1 - y) + (i11[j] - y))
                                + k1 * ((v2 - y) + (v10 - y))
                                + k2 * ((v3 - y) + (v9 - y))
                                + k3 * ((v4 - y) + (v8 - y))
                                + k4 * ((x - y) + (v7 - y))
                            )
                    else:
                        for j in range(Wv):
                            x = i5[j]
                            oa[j] = x + (
                                k0 * ((i0[j] - x) + (i10[j] - x))
                                + k1 * ((i1[j] - x) + (i9[j] - x))
                                + k2 * ((i2[j] - x) + (i8[j] - x))
                                + k3 * ((i3[j] - x) + (i7[j] - x))
                                + k4 * ((i4[j] - x) + (i6[j] - x))
                            )
                for h in range(2 if two else 1):
                    ms_ = vo[h]
                    md_ = vo[2 + h]
                    es_ = vo[4 + h]
                    ed_ = vo[6 + h]
                    for j in range(Wv):
                        ms = ms_[j]
                        md = md_[j]
                        es = es_[j]
                        ed = ed_[j]
                        if mode == MODE_BLUR:
                            rowbuf[j] = ms + md + es + ed  # keeps the blurs from being optimised away
                            continue
                        vs = es - ms * ms  # variance of s (shift-free)
                        vd = ed - md * md
                        mu_s = ms + fcs  # mean of a + b
                        mu_d = md + cd  # mean of a - b
                        qs = mu_s * mu_s
                        qd = mu_d * mu_d
                        rowbuf[j] = ((qs - qd + c1) * (vs - vd + c2)) / ((qs + qd + c1) * (vs + vd + c2))
                    total += _sum(rowbuf)
    return total, (H - 2 * PAD) * Wv * C, sse


@nb.njit(**_SUM_OPTS)
def frame_sums(f, prev, has_prev, yring, rows, cols, grid, colsum):  # pragma: no cover - compiled
    """Exact integer sums of one uint8 RGB frame (H, W, 3): (Y sum, Y sum of squares, interior Laplacian
    sum and sum of squares, count of RGB values 0 or 255, sum |f - prev|, max Y); ``grid`` gets each
    layout cell's Y sum (``rows``: each frame row's grid row; ``cols``: each grid column's first x, then W)."""
    H = f.shape[0]
    W = f.shape[1]
    G = cols.shape[0] - 1
    n = W * 3
    f2 = f.reshape(H, n)
    p2 = prev.reshape(prev.shape[0], prev.shape[1] * prev.shape[2])
    y_sum = 0
    y_sq = 0
    y_max = 0
    lap_s = 0
    lap_sq = 0
    extreme = 0
    diff = 0
    for x in range(W):
        colsum[x] = 0
    for r in range(H):
        row = f2[r]
        y = yring[r % 3]
        s = 0
        sq = 0
        m = 0
        for x in range(W):
            v = (
                np.int32(9798) * np.int32(row[3 * x])
                + np.int32(19235) * np.int32(row[3 * x + 1])
                + np.int32(3735) * np.int32(row[3 * x + 2])
                + np.int32(16384)
            ) >> 15
            y[x] = v
            s += v
            sq += np.int64(v * v)
            colsum[x] += v
            m = max(m, v)
        y_max = max(y_max, m)
        y_sum += s
        y_sq += sq
        if r == H - 1 or rows[r + 1] != rows[r]:  # the last row of a grid row
            g = grid[rows[r]]
            for c in range(G):
                cs = 0
                for x in range(cols[c], cols[c + 1]):
                    cs += colsum[x]
                g[c] += cs
            for x in range(W):
                colsum[x] = 0
        e = 0
        for x in range(n):
            v8 = row[x]
            e += np.int32((v8 == 0) | (v8 == 255))
        extreme += e
        if has_prev:
            pr = p2[r]
            d = 0
            for x in range(n):
                d += abs(np.int32(row[x]) - np.int32(pr[x]))
            diff += d
        if r >= 2 and W >= 3:
            up = yring[(r - 2) % 3]
            mid = yring[(r - 1) % 3]
            ls = 0
            lsq = 0
            for x in range(1, W - 1):
                v = up[x] + y[x] + mid[x - 1] + mid[x + 1] - 4 * mid[x]
                ls += v
                lsq += np.int64(v * v)
            lap_s += ls
            lap_sq += lsq
    return y_sum, y_sq, lap_s, lap_sq, extreme, diff, y_max
