#!/usr/bin/python3
"""An independent AdaRound in NumPy, written from Nagel, Amjad, van Baalen, Louizos,
Blankevoort 2020 ("Up or Down? Adaptive Rounding for Post-Training Quantization"):
W~ = s * (clip(floor(W/s + z) + h(V), qmin, qmax) - z), the rectified sigmoid
h(V) = clip(sigmoid(V) * (zeta - gamma) + gamma, 0, 1) with zeta = 1.1, gamma = -0.1,
V initialised so that h(V) is the fractional part of W/s + z, the layer-wise
objective E||W x - W~ x||^2 (Eq. 25: summed over the outputs, averaged over the
inputs x) plus lam * sum(1 - |2 h(V) - 1|^beta), the regulariser off for the first
20% of the iterations and beta decayed linearly from 20 to 2 after, Adam
(lr 0.01, betas 0.9 / 0.999, eps 1e-8, bias-corrected) on V, and h(V) >= 0.5
rounding up at the end. The objective is evaluated from the inputs X themselves,
||(W~ - W) X^T||^2 / n, not from a Hessian; its gradient is autograd-free here,
2 (W~ - W) X^T X / n, written out.

The grid follows Quantscope's documented conventions (docs/rules.md, DESIGN "Scales
and zero points"): signed b-bit integers, per output row, symmetric absmax scale =
absmax / (qmax + 0.5), asymmetric minmax scale = (max - min) / (qmax - qmin) over
the range widened to include 0 and zero point round(qmin - min / scale); W/s + z
in float32.

A grouped Conv of GROUPS groups (depthwise included) is GROUPS layers side by side:
output channel o of group g = o // (O / GROUPS) contracts only group g's inputs, so
its rows W[g*O/G:(g+1)*O/G] are rounded against X[:, g*C:(g+1)*C] alone, and the
objectives add up over the groups (the grid is per row, so the groups do not meet).

usage: adaround_reference.py DIR BITS SCHEME ITERS LAMBDA [GROUPS]
  DIR holds W.npy (float32 [O, C]) and X.npy (float32 [N, GROUPS * C], the layer's
  inputs: rows of a Gemm's input or a Conv's im2col patches, every group's features,
  group after group; GROUPS defaults to 1). Writes DIR/ref_codes.npy
  (int32 [O, C]), DIR/ref_rtn_codes.npy (int32, round half to even) and
  DIR/ref_losses.npy (float64 [2]: the objective of round-to-nearest and of AdaRound).
"""
import sys

import numpy as np

ZETA, GAMMA = 1.1, -0.1
LR, B1, B2, EPS = 0.01, 0.9, 0.999, 1e-8


def scales_of(w32, bits, scheme):
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if scheme == "sym":
        absmax = np.abs(w32).max(axis=1).astype(np.float64)
        s = np.where(absmax == 0, 1.0, absmax / (qmax + 0.5)).astype(np.float32)
        return s, np.zeros(len(s), np.int32)
    lo = np.minimum(w32.min(axis=1).astype(np.float64), 0.0)
    hi = np.maximum(w32.max(axis=1).astype(np.float64), 0.0)
    s = np.where(hi == lo, 1.0, (hi - lo) / (qmax - qmin)).astype(np.float32)
    zp = np.rint(np.float32(qmin) - lo.astype(np.float32) / s)
    return s, np.clip(zp, qmin, qmax).astype(np.int32)


def objective(w, w_tilde, x):
    d = (w_tilde - w) @ x.T
    return float((d * d).sum() / x.shape[0])


def adaround(W, X, bits, scheme, iters, lam):
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    s32, zp = scales_of(W, bits, scheme)
    grid = W / s32[:, None] + zp[:, None].astype(np.float32)  # float32
    lower = np.floor(grid).astype(np.float64)
    frac = grid.astype(np.float64) - lower
    s = s32.astype(np.float64)[:, None]
    z = zp.astype(np.float64)[:, None]
    w = W.astype(np.float64)
    x = X.astype(np.float64)
    m = x.T @ x / x.shape[0]  # E[x x^T]

    p = (frac - GAMMA) / (ZETA - GAMMA)
    v = np.log(p) - np.log1p(-p)
    m1 = np.zeros_like(v)
    m2 = np.zeros_like(v)
    warm = int(0.2 * iters)
    for t in range(iters):
        sig = 1 / (1 + np.exp(-v))
        raw = sig * (ZETA - GAMMA) + GAMMA
        h = np.clip(raw, 0, 1)
        dh = np.where((raw >= 0) & (raw <= 1), sig * (1 - sig) * (ZETA - GAMMA), 0.0)
        g = lower + h
        inside = ((g >= qmin) & (g <= qmax)).astype(np.float64)
        w_tilde = (np.clip(g, qmin, qmax) - z) * s
        grad_h = 2 * ((w_tilde - w) @ m) * s * inside
        if t >= warm:
            beta = 2 + (20 - 2) * max(0.0, 1 - (t - warm) / max(1, iters - warm))
            u = 2 * h - 1
            grad_h -= lam * beta * np.abs(u) ** (beta - 1) * np.sign(u) * 2
        grad = grad_h * dh
        m1 = B1 * m1 + (1 - B1) * grad
        m2 = B2 * m2 + (1 - B2) * grad * grad
        m_hat = m1 / (1 - B1 ** (t + 1))
        v_hat = m2 / (1 - B2 ** (t + 1))
        v = v - LR * m_hat / (np.sqrt(v_hat) + EPS)

    h = np.clip(1 / (1 + np.exp(-v)) * (ZETA - GAMMA) + GAMMA, 0, 1)
    codes = np.clip(lower + (h >= 0.5), qmin, qmax).astype(np.int32)
    rtn = np.clip(np.rint(grid), qmin, qmax).astype(np.int32)  # rint: half to even
    values = lambda c: ((c - zp[:, None]).astype(np.float32) * s32[:, None]).astype(np.float64)
    losses = np.array([objective(w, values(rtn), x), objective(w, values(codes), x)])
    return codes, rtn, losses


def main():
    folder, bits, scheme, iters, lam = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    W = np.load(folder + "/W.npy").astype(np.float32)
    X = np.load(folder + "/X.npy").astype(np.float32)
    groups = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    O, C = W.shape
    assert O % groups == 0 and X.shape[1] == groups * C
    rows = O // groups
    parts = [adaround(W[g * rows:(g + 1) * rows], X[:, g * C:(g + 1) * C], bits, scheme, iters, lam)
             for g in range(groups)]
    codes = np.concatenate([p[0] for p in parts])
    rtn = np.concatenate([p[1] for p in parts])
    losses = np.sum([p[2] for p in parts], axis=0)
    np.save(folder + "/ref_codes.npy", codes)
    np.save(folder + "/ref_rtn_codes.npy", rtn)
    np.save(folder + "/ref_losses.npy", losses)


if __name__ == "__main__":
    main()
