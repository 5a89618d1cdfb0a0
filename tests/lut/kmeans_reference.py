#!/usr/bin/python3
"""An independent k-means palettization in NumPy, written from the description in
docs/algorithms.md ("Palettization"), as coremltools' palettizer does it: every group
of a weight (the whole tensor, an output channel, or a tile of TILE columns of an
output channel) gets a table of K = 2**BITS float32 entries found by Lloyd's
algorithm in one dimension, and every value is replaced by its nearest entry.

  - d distinct values, d <= K: the table is those values ascending, padded with the
    largest;
  - otherwise: initial entry j = min + (max - min) * j / (K - 1) (float64, rounded to
    float32), or, when those are not strictly increasing in float32, u[floor((j + 0.5) * d / K)]
    for the d distinct values u ascending; assignment: the code of x is the number of midpoints
    (t[j] + t[j + 1]) / 2 (float64, exact) strictly below x; update: each entry becomes
    the float64 mean of its members, rounded to float32, an empty cluster keeping its
    entry; stop when an update leaves every code as it was, or after 100 updates.

usage: kmeans_reference.py DIR BITS GRANULARITY [TILE]
  DIR holds W.npy (float32 [O, C]); GRANULARITY per_tensor | per_channel | tile.
  Writes DIR/ref_lut.npy (float32 [groups, K], groups in row-major order of the
  group grid: per_tensor 1, per_channel O, tile O * ceil(C / TILE)) and
  DIR/ref_codes.npy (uint8 [O, C]).
"""
import math
import sys

import numpy as np

MAX_ITERATIONS = 100


def codes_of(values, table):
    mids = (table[:-1].astype(np.float64) + table[1:].astype(np.float64)) / 2
    return np.searchsorted(mids, values.astype(np.float64), side="left").astype(np.int64)


def kmeans_table(values, k):
    u = np.unique(values)  # ascending, distinct
    d = len(u)
    if d <= k:
        return np.concatenate([u, np.full(k - d, u[-1], np.float32)]).astype(np.float32)
    lo, hi = float(u[0]), float(u[-1])
    table = np.array([lo + (hi - lo) * j / (k - 1) for j in range(k)], np.float32)
    if np.any(table[1:] <= table[:-1]):
        table = np.array([u[int(math.floor((j + 0.5) * d / k))] for j in range(k)], np.float32)
    codes = codes_of(values, table)
    for _ in range(MAX_ITERATIONS):
        for j in range(k):
            members = values[codes == j]
            if len(members):
                table[j] = np.float32(members.astype(np.float64).sum() / len(members))
        new_codes = codes_of(values, table)
        if np.array_equal(new_codes, codes):
            break
        codes = new_codes
    return table


def main():
    folder, bits, granularity = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    tile = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    w = np.load(folder + "/W.npy").astype(np.float32)
    rows, cols = w.shape
    k = 2 ** bits
    if granularity == "per_tensor":
        groups = [(slice(0, rows), slice(0, cols))]
    elif granularity == "per_channel":
        groups = [(slice(r, r + 1), slice(0, cols)) for r in range(rows)]
    elif granularity == "tile":
        groups = [(slice(r, r + 1), slice(c, min(c + tile, cols)))
                  for r in range(rows) for c in range(0, cols, tile)]
    else:
        raise SystemExit("unknown granularity " + granularity)
    tables = np.zeros((len(groups), k), np.float32)
    codes = np.zeros(w.shape, np.uint8)
    for g, (rs, cs) in enumerate(groups):
        values = w[rs, cs].reshape(-1)
        tables[g] = kmeans_table(values, k)
        codes[rs, cs] = codes_of(w[rs, cs], tables[g]).astype(np.uint8)
    np.save(folder + "/ref_lut.npy", tables)
    np.save(folder + "/ref_codes.npy", codes)


if __name__ == "__main__":
    main()
