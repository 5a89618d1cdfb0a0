#!/usr/bin/python3
"""Writes the data-source fixtures of tst_data_source into the folder argv[1].

Values are arithmetic so the test can check any row without a reference
copy: for an array of shape [rows, ...], element (r, k) (k the flat index
within the row) is r * 1000 + k, cast to the array's dtype; labels are r % 3.
"""
import os
import sys

import h5py
import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def rows(n, row_shape, dtype):
    k = int(np.prod(row_shape)) if row_shape else 1
    a = np.arange(n)[:, None] * 1000 + np.arange(k)[None, :]
    return a.reshape((n,) + tuple(row_shape)).astype(dtype)


image = rows(10, (2, 3), np.float32)
mask = rows(10, (4,), np.int64)
labels = (np.arange(10) % 3).astype(np.int64)

np.savez(os.path.join(out, "two_inputs.npz"), image=image, mask=mask, labels=labels)
np.savez_compressed(os.path.join(out, "two_inputs_compressed.npz"), image=image, mask=mask, labels=labels)
np.savez_compressed(os.path.join(out, "single.npz"), pixels=image)
np.savez(os.path.join(out, "fortran.npz"), x=np.asfortranarray(rows(9, (5,), np.float32)))
# 20000 rows of 64 floats (5 MB inflated): many batches, read a batch at a time.
np.savez_compressed(os.path.join(out, "large.npz"), x=rows(20000, (64,), np.float32),
                    labels=(np.arange(20000) % 3).astype(np.int64))
np.savez(os.path.join(out, "mismatched_rows.npz"), a=rows(10, (3,), np.float32), b=rows(9, (3,), np.float32))
np.savez(os.path.join(out, "zero_d.npz"), x=np.float32(3.0))
np.savez(os.path.join(out, "float64.npz"), image=image.astype(np.float64))

np.save(os.path.join(out, "single.npy"), rows(7, (3,), np.float32))
np.save(os.path.join(out, "fortran.npy"), np.asfortranarray(rows(7, (3,), np.float32)))
np.save(os.path.join(out, "big_endian.npy"), rows(7, (3,), ">f4"))
np.save(os.path.join(out, "bools.npy"), (rows(7, (3,), np.int64) % 2).astype(bool))
with open(os.path.join(out, "truncated.npy"), "wb") as f:
    f.write(open(os.path.join(out, "single.npy"), "rb").read()[:-8])

with h5py.File(os.path.join(out, "data.h5"), "w") as f:
    f.create_dataset("image", data=image, chunks=(3, 2, 3), compression="gzip")
    f.create_dataset("mask", data=mask)
    f.create_dataset("labels", data=labels)
    g = f.create_group("calib")
    g.create_dataset("input", data=rows(6, (4,), np.float32))
    g.create_dataset("nested/ignored", data=rows(2, (1,), np.float32))
    b = f.create_group("strings")
    b.create_dataset("names", data=np.array([b"a", b"b"]))
