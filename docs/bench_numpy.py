#!/usr/bin/python3
"""NumPy's figures for docs/benchmarks.md: np.percentile and np.histogram(x, 2048)
on as many float32 values as quantscope-cli bench uses (default 64M elements,
shaped [N/4096, 4096], distributed like its data), plus a plain copy, timed the way the bench
times its cases: one warm-up, then the best of 5 runs.

Usage: bench_numpy.py [N]    (prints JSON like `quantscope-cli bench --json`)
"""
import json
import sys
import time

import numpy as np


def best_seconds(run, repetitions=5):
    run()
    best = float("inf")
    for _ in range(repetitions):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 26
    rng = np.random.default_rng(1)
    # Shaped like the bench's data (not the same values: its generator is C++'s):
    # normal rows with spreads 2^(row mod 7 - 3) and one outlier x20 per row.
    x = rng.standard_normal(n, dtype=np.float32).reshape(n // 4096, 4096)
    rows = np.arange(x.shape[0])
    x *= np.exp2((rows % 7) - 3.0).astype(np.float32)[:, None]
    x[rows, rng.integers(0, 4096, size=x.shape[0])] *= 20
    out = np.empty_like(x)
    cases = [
        ("copy", 8, lambda: np.copyto(out, x)),
        ("percentile", 4, lambda: np.percentile(x, 99.99)),
        ("histogram_2048", 4, lambda: np.histogram(x, 2048)),
        ("absmax_per_channel", 4, lambda: np.abs(x).max(axis=1)),
    ]
    results = []
    for name, bytes_per_element, run in cases:
        s = best_seconds(run)
        results.append({"name": name, "seconds": s, "gbps": bytes_per_element * n / s / 1e9})
    copy = results[0]["seconds"]
    for r in results:
        r["ratio_to_copy"] = copy / r["seconds"]
    print(json.dumps({"numpy": np.__version__, "elements": n, "results": results}, indent=2))


if __name__ == "__main__":
    main()
