#!/usr/bin/python3
"""An independent AWQ in NumPy, written from Lin et al. 2023 ("AWQ: Activation-aware
Weight Quantization for LLM Compression and Acceleration", section 3.2): the
weight's input channel j is scaled by s_j = s_X,j ** alpha, s_X the mean absolute
activation of channel j over the calibration inputs, the scaled weight is rounded
to nearest and divided by s again, and alpha is the grid point i / GRID
(i = 0 .. GRID-1) with the least output error ||W X^T - W^ X^T||^2 on those inputs
(the first one on a tie). As the authors' code does, s is clamped below at 1e-4 and
divided by sqrt(max(s) * min(s)). The documented conventions of Quantscope
(docs/algorithms.md) fix the arithmetic: s is rounded to float32, W * s and
Q(W * s) / s are float32 products and quotients; the grid and scales are those of
docs/rules.md (signed b-bit integers, symmetric absmax scale = absmax / (qmax + 0.5),
asymmetric minmax scale = (max - min) / (qmax - qmin) over the range widened to
include 0 and zero point round(qmin - min / scale); rounding half to even in float32).

With CLIP = 1, the clipping search of the same paper (the authors' `auto_clip`) follows
the scales: each group of the scaled weight W * s (a row, a row's tile of TILE
input channels, or per tensor the whole weight, its error summed over every row) is clamped to r times its range -- [-r max|v|, r max|v|] for SCHEME
sym, [r min v, r max v] for asym, the bounds r * v computed in float64 and rounded to
float32 -- for r = 1 - i / 40, i = 0 .. 19; the group is then rounded to nearest with
its scale (and zero point) taken from the clamped values, and the first r with the
least output error of the group on the calibration inputs, ||(w_g - w^_g) X_g^T||^2
(X_g the inputs of the group's channels), is kept for that group.

A Conv's input channel j spans K im2col features (its kernel positions): s_X,j is
the mean |x| over those K features' entries, and s_j scales all K weights of
channel j. A grouped Conv of GROUPS groups (depthwise included): output channel o
of group g = o // (O / GROUPS) contracts only group g's input channels, so row o
is scaled by the s of group g's channels (s is one per input channel of the layer,
normalised over all of them), the output error is the sum over the groups of
||(W_g - W^_g) X_g^T||^2, X_g group g's features, and a clipping group of row o is
scored on group g's inputs.

usage: awq_reference.py DIR BITS TILE SCHEME GRID [CLIP [GROUPS K]]
  DIR holds W.npy (float32 [O, C]) and X.npy (float32 [N, GROUPS * C], the layer's
  inputs, every group's features group after group, K features per input channel;
  GROUPS and K default to 1); TILE 0 = per output channel, -1 = per tensor, else
  groups of TILE input channels per row; SCHEME sym | asym. Writes
  DIR/ref_alpha_index.npy (int64 [1]), DIR/ref_s.npy (float32 [GROUPS * C / K], one
  per input channel), DIR/ref_rounded.npy (float32 [O, C]) and DIR/ref_losses.npy
  (float64 [GRID]); with CLIP = 1 (default 0) also DIR/ref_clip_index.npy (int64
  [O, groups per row], or [1] per tensor: the i of the ratio each group keeps), and ref_rounded.npy is
  then the clipped weight's.
"""
import math
import sys

import numpy as np


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


def round_to_nearest(w32, bits, tile, scheme):
    """Q(w32): per row, or per row and group of `tile` columns; float32."""
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if tile < 0:  # per tensor: one scale and zero point for the whole weight
        s, zp = scales_of(w32.reshape(1, -1), bits, scheme)
        q = np.clip(np.rint(w32 / s[0] + np.float32(zp[0])), qmin, qmax).astype(np.int32)
        return (q - zp[0]).astype(np.float32) * s[0]
    out = np.empty_like(w32)
    C = w32.shape[1]
    step = tile if tile else C
    for c0 in range(0, C, step):
        part = w32[:, c0:c0 + step]
        s, zp = scales_of(part, bits, scheme)
        v = part / s[:, None] + zp[:, None].astype(np.float32)
        q = np.clip(np.rint(v), qmin, qmax).astype(np.int32)  # integer codes: no negative zero
        out[:, c0:c0 + step] = (q - zp[:, None]).astype(np.float32) * s[:, None]
    return out


def scale_rows(s32, O, C, groups, k):
    """s per element of W [O, C]: row o's column c multiplies input channel (o // (O / groups)) * C / k + c // k."""
    rows, per_group = O // groups, C // k
    return np.stack([np.repeat(s32[(o // rows) * per_group:(o // rows + 1) * per_group], k) for o in range(O)])


def awq(W, X, bits, tile, scheme, grid, groups=1, k=1):
    n = X.shape[0]
    O, C = W.shape
    rows = O // groups
    X64 = X.astype(np.float64)
    # per group: the loss below is ||(W_g - W^_g) X_g^T||^2 * 2 / n
    H = [(X64[:, g * C:(g + 1) * C].T @ X64[:, g * C:(g + 1) * C]) * (2.0 / n) for g in range(groups)]
    mean_abs = (np.abs(X64).sum(axis=0) / n).reshape(-1, k).sum(axis=1) / k  # per input channel of the layer
    per_group = C // k  # input channels per group
    best = None
    losses = []
    for i in range(grid):
        alpha = i / grid
        s = np.array([max(math.pow(m, alpha), 1e-4) for m in mean_abs])
        s = s / math.sqrt(s.max() * s.min())
        s32 = s.astype(np.float32)
        S = scale_rows(s32, O, C, groups, k)
        rounded = round_to_nearest(W * S, bits, tile, scheme) / S
        E = W.astype(np.float64) - rounded.astype(np.float64)
        loss = float(sum(np.sum((E[g * rows:(g + 1) * rows] @ H[g]) * E[g * rows:(g + 1) * rows])
                         for g in range(groups)))
        losses.append(loss)
        if best is None or loss < losses[best[0]]:
            best = (i, s32, rounded)
    return best, np.array(losses)


RATIOS = 20


def clipped(v, i, scheme):
    """v (float32) clamped by ratio i: to [-r max|v|, r max|v|] (sym) or [r min v, r max v] (asym),
    r = 1 - i / 40, the bounds computed in float64 and rounded to float32."""
    r = 1.0 - i / 40.0
    if scheme == "sym":
        b = np.float32(r * float(np.abs(v).max()))
        lo, hi = -b, b
    else:
        lo, hi = np.float32(r * float(v.min())), np.float32(r * float(v.max()))
    return np.clip(v, lo, hi).astype(np.float32)


def clip_search(W, X, S, bits, tile, scheme, groups=1):
    """Per group of W * S (S: s per element, scale_rows): the ratio index i kept, and the clipped weight
    rounded and divided by s. Row o's groups are scored on its Conv group's inputs."""
    O, C = W.shape
    rows_per_group = O // groups
    step = tile if tile else C
    scaled = W * S
    X64 = X.astype(np.float64)
    if tile < 0:  # per tensor: the whole weight is one group, its error summed over every row's own inputs
        best = None
        for i in range(RATIOS):
            rounded = round_to_nearest(clipped(scaled, i, scheme), bits, -1, scheme) / S
            E = W.astype(np.float64) - rounded.astype(np.float64)
            err = 0.0
            for o in range(O):
                g0 = (o // rows_per_group) * C
                err += float(np.sum((X64[:, g0:g0 + C] @ E[o]) ** 2))
            if best is None or err < best[0]:
                best = (err, i, rounded)
        return np.array([best[1]], np.int64), best[2]
    starts = list(range(0, C, step))
    index = np.zeros((O, len(starts)), np.int64)
    out = np.empty_like(W)
    for t, c0 in enumerate(starts):
        c1 = min(c0 + step, C)
        part = scaled[:, c0:c1]
        for o in range(O):
            g0 = (o // rows_per_group) * C
            Xg = X64[:, g0 + c0:g0 + c1]
            v = part[o:o + 1, :]
            best = None
            for i in range(RATIOS):
                rounded = round_to_nearest(clipped(v, i, scheme), bits, 0, scheme) / S[o:o + 1, c0:c1]
                e = W[o, c0:c1].astype(np.float64) - rounded[0].astype(np.float64)
                err = float(np.sum((Xg @ e) ** 2))
                if best is None or err < best[0]:
                    best = (err, i, rounded[0])
            index[o, t] = best[1]
            out[o, c0:c1] = best[2]
    return index, out


def main():
    folder, bits, tile, scheme, grid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    clip = len(sys.argv) > 6 and sys.argv[6] == "1"
    W = np.load(folder + "/W.npy").astype(np.float32)
    X = np.load(folder + "/X.npy").astype(np.float32)
    groups = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    k = int(sys.argv[8]) if len(sys.argv) > 8 else 1
    assert W.shape[0] % groups == 0 and X.shape[1] == groups * W.shape[1] and W.shape[1] % k == 0
    (index, s32, rounded), losses = awq(W, X, bits, tile, scheme, grid, groups, k)
    if clip:
        clip_index, rounded = clip_search(W, X, scale_rows(s32, W.shape[0], W.shape[1], groups, k), bits, tile,
                                          scheme, groups)
        np.save(folder + "/ref_clip_index.npy", clip_index)
    np.save(folder + "/ref_alpha_index.npy", np.array([index], np.int64))
    np.save(folder + "/ref_s.npy", s32)
    np.save(folder + "/ref_rounded.npy", rounded.astype(np.float32))
    np.save(folder + "/ref_losses.npy", losses)


if __name__ == "__main__":
    main()
