"""Writes the well-formed archives tst_safetensors and tst_npz read, with the
expected contents beside them as .npy files (raw codes for BF16 and F8).

usage: /usr/bin/python3 make_valid_archives.py OUTDIR
"""
import io
import json
import os
import sys
import zipfile

import numpy as np

from archive_formats import NUMPY_OF_DTYPE, Member, safetensors_bytes, zip_bytes

rng = np.random.default_rng(20261122)


def random_array(dtype, shape):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 3).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)


def write_safetensors(folder, name, specs, metadata=None, pad_to=8):
    """specs: list of (tensor name, dtype, shape). References go to folder/name.ref/<i>.npy."""
    tensors = []
    ref = os.path.join(folder, name + ".ref")
    os.makedirs(ref, exist_ok=True)
    for i, (tname, dtype, shape) in enumerate(specs):
        values = random_array(NUMPY_OF_DTYPE[dtype], shape)
        np.save(os.path.join(ref, f"{i}.npy"), values)
        tensors.append((tname, dtype, shape, values.tobytes()))
    with open(os.path.join(folder, name), "wb") as f:
        f.write(safetensors_bytes(tensors, metadata=metadata, pad_to=pad_to))


def main(out):
    os.makedirs(out, exist_ok=True)
    # Every dtype, a scalar and an empty tensor; natural alignment (largest items first).
    write_safetensors(out, "all_dtypes.safetensors", [
        ("f64", "F64", [3]), ("i64", "I64", [2, 2]), ("u64", "U64", [2]),
        ("model.layers.0.q_proj.weight", "F32", [4, 5]), ("scalar", "F32", []), ("i32", "I32", [7]),
        ("u32", "U32", [1]), ("f16", "F16", [3, 3]), ("bf16", "BF16", [2, 3]), ("i16", "I16", [5]),
        ("u16", "U16", [2]), ("i8", "I8", [9]), ("u8", "U8", [4]), ("flags", "BOOL", [6]),
        ("fp8", "F8_E4M3", [8]), ("fp8b", "F8_E5M2", [3]), ("empty", "F32", [0, 3]),
    ], metadata={"format": "pt", "note": "written by make_valid_archives.py"})
    # Misaligned: a 3-byte tensor first and no header padding put the others off their item size.
    write_safetensors(out, "misaligned.safetensors", [
        ("odd", "U8", [3]), ("w", "F32", [2, 3]), ("d", "F64", [2]), ("h", "BF16", [5]),
    ], pad_to=0)

    # Sharded checkpoint: the index lists shards out of name order on purpose.
    shard_dir = os.path.join(out, "sharded")
    os.makedirs(shard_dir, exist_ok=True)
    shards = {
        "model-00002-of-00002.safetensors": [("lm_head.weight", "F32", [3, 4]), ("model.norm.weight", "F16", [4])],
        "model-00001-of-00002.safetensors": [("model.embed.weight", "F32", [5, 4]),
                                             ("model.layers.0.mlp.weight", "BF16", [4, 4])],
    }
    weight_map = {}
    for shard, specs in shards.items():
        write_safetensors(shard_dir, shard, specs, metadata={"format": "pt"})
        for tname, _, _ in specs:
            weight_map[tname] = shard
    with open(os.path.join(shard_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 212}, "weight_map": weight_map}, f, indent=2)

    # npz written by numpy itself: every layout the reader must handle.
    arrays = {
        "x": random_array("<f4", (3, 5)),
        "labels": random_array("<i8", (7,)),
        "mask": random_array("?", (2, 3)),
        "big_endian": random_array(">f8", (4,)),
        "fortran": np.asfortranarray(random_array("<i2", (3, 4))),
        "half_scalar": random_array("<f2", ()),
        "empty": np.zeros((0, 4), np.float32),
        "u8": random_array("u1", (10,)),
        "big": random_array("<f4", (1000, 64)),
        "zeros": np.zeros((256, 1024), np.float32),
    }
    ref = os.path.join(out, "npz.ref")
    os.makedirs(ref, exist_ok=True)
    for name, a in arrays.items():
        np.save(os.path.join(ref, name + ".npy"), a)
    np.savez(os.path.join(out, "plain.npz"), **arrays)
    np.savez_compressed(os.path.join(out, "compressed.npz"), **arrays)

    # A zip python itself writes with zip64 extras and a non-array member.
    with zipfile.ZipFile(os.path.join(out, "zipfile_zip64.npz"), "w", zipfile.ZIP_DEFLATED) as z:
        for name in ("x", "labels"):
            with z.open(name + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, arrays[name])
        z.writestr("README.txt", "not an array")

    # Written to a pipe-like stream: sizes and CRC in data descriptors after the data (flag bit 3).
    class Unseekable(io.RawIOBase):
        def __init__(self, f):
            self.f = f

        def writable(self):
            return True

        def write(self, b):
            return self.f.write(b)

    with open(os.path.join(out, "streamed.npz"), "wb") as raw:
        with zipfile.ZipFile(Unseekable(raw), "w", zipfile.ZIP_DEFLATED) as z:
            for name in ("x", "mask"):
                with z.open(name + ".npy", "w") as f:
                    np.lib.format.write_array(f, arrays[name])

    # A full zip64 archive (end record, locator, zip64 central entries), stored and deflated.
    def npy_bytes(a):
        b = io.BytesIO()
        np.save(b, a)
        return b.getvalue()

    path = os.path.join(out, "zip64_end.npz")
    with open(path, "wb") as f:
        f.write(zip_bytes([Member("x.npy", npy_bytes(arrays["x"]), method=0, zip64=True),
                           Member("big.npy", npy_bytes(arrays["big"]), method=8, zip64=True)],
                          zip64_end=True, comment=b"zip64 archive written by make_valid_archives.py"))
    with zipfile.ZipFile(path) as z:  # python's own reader agrees the archive is sound
        assert z.testzip() is None


if __name__ == "__main__":
    main(sys.argv[1])
