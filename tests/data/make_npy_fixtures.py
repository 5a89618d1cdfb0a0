#!/usr/bin/python3
"""Writes the .npy fixtures tst_npy reads: every supported dtype in both byte
orders, C and Fortran order, format versions 1.0, 2.0 and 3.0.

Usage: make_npy_fixtures.py [--few] [OUT_DIR]   (default: tests/data/npy next to this script)
  --few   only the handful committed to the repository (FEW below)

Each array holds pattern(i) at row-major flat index i, so the reader's result can
be checked without numpy: signed ints (7i mod 11) - 5, unsigned 7i mod 11,
floats ((7i mod 11) - 5) / 4, bools i mod 3 == 0. File names:
  <descr without byte order>_<le|be>_<c|f>_v<major>.npy, e.g. f4_be_f_v1.npy
tst_npy runs this at test time when numpy is present; the committed copies serve
when it is not.
"""
import pathlib
import sys

import numpy as np

SHAPES = {"c": (2, 3, 4), "f": (3, 4, 5)}
FEW = {"f4_be_f_v3", "f4_le_c_v1", "i2_be_c_v2", "u8_le_f_v1", "b1_le_c_v1", "f2_le_f_v1", "f8_be_c_v1", "i1_le_f_v2"}


def pattern(kind, count):
    i = np.arange(count, dtype=np.int64)
    base = (7 * i) % 11
    if kind == "b":
        return i % 3 == 0
    if kind == "u":
        return base
    if kind == "i":
        return base - 5
    return (base - 5) / 4.0


def main():
    args = sys.argv[1:]
    few = "--few" in args
    args = [a for a in args if a != "--few"]
    out = pathlib.Path(args[0]) if args else pathlib.Path(__file__).with_name("npy")
    out.mkdir(parents=True, exist_ok=True)
    for code in ["b1", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8"]:
        for order in ["le", "be"]:
            if order == "be" and code[1] == "1":
                continue  # single-byte types have no byte order
            for layout in ["c", "f"]:
                for major in [1, 2, 3]:
                    name = f"{code}_{order}_{layout}_v{major}"
                    if few and name not in FEW:
                        continue
                    shape = SHAPES[layout]
                    values = pattern(code[0], int(np.prod(shape))).reshape(shape)
                    dtype = np.dtype(("<" if order == "le" else ">") + code if code[1] != "1" else "|" + code)
                    arr = values.astype(dtype)
                    if layout == "f":
                        arr = np.asfortranarray(arr)
                    with open(out / (name + ".npy"), "wb") as f:
                        np.lib.format.write_array(f, arr, version=(major, 0))
    # Edge shapes: a scalar, an empty array, a 1-D array.
    np.save(out / "scalar_f8.npy", np.array(2.5))
    np.save(out / "empty_f4.npy", np.zeros((0, 3), dtype=np.float32))
    np.save(out / "vector_i4.npy", np.arange(5, dtype=np.int32))


if __name__ == "__main__":
    main()
