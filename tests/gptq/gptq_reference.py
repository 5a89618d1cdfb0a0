#!/usr/bin/python3
"""An independent GPTQ in NumPy, written from Frantar et al. 2022 ("GPTQ: Accurate
Post-Training Quantization for Generative Pre-trained Transformers"), Algorithm 1
(lazy batch updates of B columns over the Cholesky factor of H^-1), with the
details the paper's reference implementation adds: dead inputs (diag H = 0) get
H_ii = 1 and zero weights, dampening lambda = damp * mean(diag H), act-order
(columns by descending diag H), group scales found when a group is first reached
from W as the blocks before left it. The grid and the scales follow Quantscope's
documented conventions (docs/rules.md, DESIGN "Scales and zero points"): signed
b-bit integers, symmetric absmax scale = absmax / (qmax + 0.5), asymmetric minmax
scale = (max - min) / (qmax - qmin) over the range widened to include 0 and
zero point round(qmin - min / scale); rounding half to even in float32.

A grouped Conv of GROUPS groups (depthwise included) is GROUPS layers side by side:
output channel o of group g = o // (O / GROUPS) contracts only group g's inputs, so
its rows W[g*O/G:(g+1)*O/G] are run through Algorithm 1 against the Hessian of
X[:, g*C:(g+1)*C] alone (its own dead inputs, act-order, dampening and factors).

usage: gptq_reference.py DIR BITS TILE SCHEME DAMP ACT_ORDER [GROUPS]
  DIR holds W.npy (float32 [O, C]) and X.npy (float32 [N, GROUPS * C], the layer's
  inputs, every group's features group after group; GROUPS defaults to 1);
  TILE 0 = per channel; SCHEME sym | asym. Writes DIR/ref_codes.npy (int32 [O, C]),
  DIR/ref_scales.npy (float32 [O, groups]) and DIR/ref_zeros.npy (int32 [O, groups]).
"""
import sys

import numpy as np

BLOCK = 128


def scales_of(w32, bits, scheme):
    """Per row of w32 (float32 [O, n]): scale (float32) and zero point (int32)."""
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


def fake_quant(w, s, zp, bits):
    """Codes and dequantized values of column w (float64 [O]) under per-row s, zp."""
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    v = w.astype(np.float32) / s + zp.astype(np.float32)
    q = np.clip(np.rint(v), qmin, qmax)
    return q.astype(np.int32), ((q - zp).astype(np.float32) * s).astype(np.float64)


def gptq(W, H, bits, tile, scheme, damp, act_order):
    O, C = W.shape
    W = W.astype(np.float64).copy()
    H = H.copy()
    dead = np.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    perm = np.argsort(-np.diag(H), kind="stable") if act_order else np.arange(C)
    W = W[:, perm]
    H = H[perm][:, perm]
    H[np.diag_indices(C)] += damp * np.mean(np.diag(H))
    Hinv = np.linalg.inv(H)
    U = np.linalg.cholesky(Hinv).T  # upper: Hinv = U^T U
    position = np.empty(C, np.int64)
    position[perm] = np.arange(C)

    groups = (C + tile - 1) // tile if tile else 1
    S = np.zeros((O, groups), np.float32)
    Z = np.zeros((O, groups), np.int32)
    reached = np.zeros(groups, bool)
    if not tile:
        S[:, 0], Z[:, 0] = scales_of(W.astype(np.float32), bits, scheme)
    codes = np.zeros((O, C), np.int32)
    for i1 in range(0, C, BLOCK):
        i2 = min(i1 + BLOCK, C)
        W1 = W[:, i1:i2].copy()
        Err1 = np.zeros_like(W1)
        for i in range(i2 - i1):
            col = perm[i1 + i]
            g = col // tile if tile else 0
            if tile and not reached[g]:
                cols = position[g * tile:min((g + 1) * tile, C)]
                S[:, g], Z[:, g] = scales_of(W[:, cols].astype(np.float32), bits, scheme)
                reached[g] = True
            w = W1[:, i]
            d = U[i1 + i, i1 + i]
            q, wq = fake_quant(w, S[:, g], Z[:, g], bits)
            codes[:, col] = q
            err = (w - wq) / d
            W1[:, i:] -= np.outer(err, U[i1 + i, i1 + i:i2])
            Err1[:, i] = err
        W[:, i2:] -= Err1 @ U[i1:i2, i2:]
    return codes, S, Z


def main():
    folder, bits, tile, scheme, damp, act_order = sys.argv[1:7]
    W = np.load(folder + "/W.npy").astype(np.float64)
    X = np.load(folder + "/X.npy").astype(np.float64)
    groups = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    O, C = W.shape
    assert O % groups == 0 and X.shape[1] == groups * C
    rows = O // groups
    parts = []
    for g in range(groups):
        Xg = X[:, g * C:(g + 1) * C]
        H = 2.0 * Xg.T @ Xg / X.shape[0]
        parts.append(gptq(W[g * rows:(g + 1) * rows], H, int(bits), int(tile), scheme, float(damp), act_order == "1"))
    codes, S, Z = (np.concatenate([p[i] for p in parts]) for i in range(3))
    np.save(folder + "/ref_codes.npy", codes)
    np.save(folder + "/ref_scales.npy", S)
    np.save(folder + "/ref_zeros.npy", Z)


if __name__ == "__main__":
    main()
