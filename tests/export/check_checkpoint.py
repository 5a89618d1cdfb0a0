#!/usr/bin/python3
"""Independent reader of Quantscope's quantized checkpoints (docs/formats.md,
"Quantized checkpoints"), written from the documented layout only: parses the
safetensors header by hand (8-byte little-endian length + JSON) or opens the
HDF5 file with h5py, decodes every quantized weight's codes, applies its scales
and zero points and compares the result bit for bit with a reference
safetensors file of float32 fake-quantized weights (same names). lut1 ... lut8
weights are W.codes indexing the group's table in W.lut.

usage: check_checkpoint.py CHECKPOINT REFERENCE.safetensors
Prints one line per weight; exits 1 on any mismatch, 2 on a malformed file."""

import json
import struct
import sys

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "U64": "<u8", "I32": "<i4", "U32": "<u4",
          "I16": "<i2", "U16": "<u2", "I8": "i1", "U8": "u1", "BOOL": "u1", "F8_E4M3": "u1", "F8_E5M2": "u1"}

NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
       0.7229568362236023, 1.0]
FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        arr = np.frombuffer(data[base + b:base + end], dtype=DTYPES[e["dtype"]])
        tensors[name] = arr.reshape(e["shape"])
    return meta, tensors


def read_checkpoint(path):
    if path.endswith(".safetensors"):
        meta, tensors = read_safetensors(path)
        return json.loads(meta["quantscope"]), tensors
    import h5py
    f = h5py.File(path, "r")
    text = f.attrs["quantscope"]
    manifest = json.loads(text.decode() if isinstance(text, bytes) else text)
    return manifest, {"__h5__": f}


def get(tensors, key):
    if "__h5__" in tensors:
        return np.asarray(tensors["__h5__"]["/" + key])
    return tensors[key]


def small_float(code, exp_bits, man_bits, bias):
    """Value of a sign-magnitude float code (no special values handled: exported codes are finite)."""
    code = code.astype(np.int64)
    sign = np.where((code >> (exp_bits + man_bits)) & 1, -1.0, 1.0)
    e = (code >> man_bits) & ((1 << exp_bits) - 1)
    m = code & ((1 << man_bits) - 1)
    sub = np.ldexp(m / float(1 << man_bits), 1 - bias)
    norm = np.ldexp(1.0 + m / float(1 << man_bits), e - bias)
    return (sign * np.where(e == 0, sub, norm)).astype(np.float32)


def grid_values(qtype, bits, codes):
    c = codes.astype(np.int64)
    if qtype.startswith("int"):
        c &= (1 << bits) - 1
        return np.where(c >= 1 << (bits - 1), c - (1 << bits), c).astype(np.float32), True
    if qtype.startswith("uint"):
        return c.astype(np.float32), True
    if qtype == "binary":
        return np.where(c & 1, 1.0, -1.0).astype(np.float32), True
    if qtype == "ternary":
        c &= 3
        if np.any(c == 2):
            raise ValueError("ternary code 2 is invalid")
        return np.where(c == 3, -1, c).astype(np.float32), True
    if qtype in ("fp8_e4m3", "mxfp8"):
        return small_float(c & 0xFF, 4, 3, 7), False
    if qtype == "fp8_e5m2":
        return small_float(c & 0xFF, 5, 2, 15), False
    if qtype in ("fp4_e2m1", "mxfp4", "nvfp4"):
        c &= 0xF
        mag = np.array(FP4, dtype=np.float32)[c & 7]
        return np.where(c & 8, -mag, mag).astype(np.float32), False
    if qtype == "nf4":
        return np.array(NF4, dtype=np.float32)[c & 0xF], False
    raise ValueError("unknown qtype " + qtype)


def unpack(packed, bits, count):
    per = 8 // bits
    b = packed.reshape(-1).astype(np.uint8)
    out = np.zeros(b.size * per, dtype=np.uint8)
    for k in range(per):
        out[k::per] = (b >> (k * bits)) & ((1 << bits) - 1)
    return out[:count]


def broadcast(groups, block, shape):
    full = groups
    for axis, (b, n) in enumerate(zip(block, shape)):
        full = np.repeat(full, b, axis=axis)
        full = np.take(full, np.arange(n), axis=axis)
    return full


def palettized(entry, tensors):
    """lut1 ... lut8: codes index the group's table, W.lut of shape scale_shape + [2^bits]."""
    shape = entry["shape"]
    count = int(np.prod(shape)) if shape else 1
    q = get(tensors, entry["codes"])
    codes = (unpack(q, entry["bits"], count) if entry["packed"] else q.reshape(-1)).reshape(shape)
    lut = get(tensors, entry["lut"]).astype(np.float32)
    if list(lut.shape) != entry["scale_shape"] + [2 ** entry["bits"]]:
        raise ValueError("lut shape %s, manifest says %s" % (list(lut.shape), entry["lut_shape"]))
    groups = np.ravel_multi_index(
        np.meshgrid(*[np.arange(n) // b for n, b in zip(shape, entry["block"])], indexing="ij"),
        entry["scale_shape"])
    return lut.reshape(-1, 2 ** entry["bits"])[groups, codes.astype(np.int64)]


def dequantize(entry, tensors):
    shape = entry["shape"]
    count = int(np.prod(shape)) if shape else 1
    if entry.get("lut") is not None:
        return palettized(entry, tensors)
    q = get(tensors, entry["qvalue"])
    if entry["packed"]:
        codes = unpack(q, entry["bits"], count).reshape(shape)
    else:
        codes = q.reshape(shape)
    values, integer_like = grid_values(entry["qtype"], entry["bits"], codes)
    scale = get(tensors, entry["scale"]).astype(np.float32)
    if list(scale.shape) != entry["scale_shape"]:
        raise ValueError("scale shape %s, manifest says %s" % (list(scale.shape), entry["scale_shape"]))
    s = broadcast(scale, entry["block"], shape)
    if integer_like:
        z = np.float32(0)
        if entry["zero_point"] is not None:
            z = broadcast(get(tensors, entry["zero_point"]).astype(np.float32), entry["block"], shape)
        return ((values - z) * s).astype(np.float32)
    return (values * s).astype(np.float32)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    manifest, tensors = read_checkpoint(sys.argv[1])
    _, reference = read_safetensors(sys.argv[2])
    if manifest.get("format") != "quantscope-checkpoint":
        print("not a quantscope checkpoint")
        return 2
    bad = 0
    for name, entry in manifest["tensors"].items():
        got = dequantize(entry, tensors)
        want = reference[name].astype(np.float32)
        same = got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32))
        if not same:
            bad += 1
            diff = np.nonzero(got.view(np.uint32) != want.view(np.uint32))
            print("MISMATCH %s (%s): %d elements differ, first at %s: %r vs %r" % (
                name, entry["qtype"], len(diff[0]), [int(d[0]) for d in diff],
                got[tuple(d[0] for d in diff)], want[tuple(d[0] for d in diff)]))
        else:
            print("ok %s %s %s" % (name, entry["qtype"], entry["granularity"]))
    for name in manifest["float_tensors"]:
        if name in reference and not np.array_equal(get(tensors, name), reference[name]):
            bad += 1
            print("MISMATCH float tensor %s" % name)
    print("%d quantized tensors checked, %d mismatches" % (len(manifest["tensors"]), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
