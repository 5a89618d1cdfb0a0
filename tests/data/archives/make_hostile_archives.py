"""Writes malformed safetensors checkpoints and .npz archives, each wrong in a
different way, and a manifest.json per folder listing, for each file, the
phrases the loader's error must contain (besides the file's name).

usage: /usr/bin/python3 make_hostile_archives.py OUTDIR
The committed corpus in hostile/ is this script's output.
"""
import io
import json
import os
import struct
import sys
import zlib

import numpy as np

from archive_formats import Member, safetensors_bytes, zip_bytes

F32_6 = np.arange(6, dtype="<f4").tobytes()
I16_2 = np.arange(2, dtype="<i2").tobytes()
GOOD = [("a", "F32", [2, 3], F32_6), ("b", "I16", [2], I16_2)]


def st(**kw):
    return safetensors_bytes(kw.pop("tensors", GOOD), **kw)


def header_with(entries, metadata=None):
    h = {} if metadata is None else {"__metadata__": metadata}
    h.update(entries)
    return json.dumps(h)


SAFETENSORS = [
    ("empty.safetensors", b"", ["too short for the 8-byte header length"]),
    ("short_length.safetensors", b"\x10\x00\x00", ["too short for the 8-byte header length"]),
    ("header_past_eof.safetensors", st(header_length=4096), ["header length 4096", "runs past the end"]),
    ("huge_header.safetensors", st(header_length=1 << 40), ["header length 1099511627776", "exceeds the limit"]),
    ("index_not_named_index.safetensors", b'{"weight_map": {"a": "s1.safetensors"}}', ["looks like JSON", ".index.json"]),
    ("invalid_json.safetensors", st(header_text='{"a": {"dtype": "F32", "shape": [2, 3],,}}', data=F32_6),
     ["not valid JSON", "byte offset 47"]),
    ("invalid_utf8.safetensors", st(header_text=b'{"\xff\xfe": {"dtype": "F32"}}', data=b""),
     ["not valid JSON", "byte offset"]),
    ("not_object.safetensors", st(header_text="[1, 2, 3]", data=b""), ["must be a JSON object"]),
    ("unknown_dtype.safetensors", st(tensors=[("a", "F4", [2], b"\0")]), ['tensor "a"', 'unknown dtype "F4"']),
    ("shape_bytes_mismatch.safetensors", st(tensors=[("a", "F32", [2, 4], F32_6)]),
     ['tensor "a"', "needs 32 bytes", "hold 24"]),
    ("overlap.safetensors", st(offsets={"b": [20, 24]}, data=F32_6), ['tensor "b"', "overlap"]),
    ("gap.safetensors", st(offsets={"b": [28, 32]}, data=F32_6 + b"\0" * 8), ["gap of 4 bytes", "data offset 24"]),
    ("trailing_bytes.safetensors", st(data=F32_6 + I16_2 + b"xyz"), ["3 bytes after the last tensor"]),
    ("offsets_past_end.safetensors", st(offsets={"b": [24, 28]}, data=F32_6 + b"\0\0"),
     ['tensor "b"', "end 28", "past the end of the data section"]),
    ("begin_after_end.safetensors", st(tensors=[("a", "F32", [0], b"")], offsets={"a": [8, 4]}, data=b""),
     ['tensor "a"', "begin 8 is after end 4"]),
    ("negative_dim.safetensors", st(header_text=header_with(
        {"a": {"dtype": "F32", "shape": [-2, 3], "data_offsets": [0, 24]}}), data=F32_6),
     ['tensor "a" shape[0]', "non-negative integer"]),
    ("number_overflow.safetensors", st(header_text='{"a": {"dtype": "F32", "shape": [1E999], '
                                                   '"data_offsets": [0, 24]}}', data=F32_6),
     ["header JSON cannot be read", "number overflow"]),
    ("float_dim.safetensors", st(header_text=header_with(
        {"a": {"dtype": "F32", "shape": [2.0, 3], "data_offsets": [0, 24]}}), data=F32_6),
     ['tensor "a" shape[0]', "non-negative integer"]),
    ("missing_field.safetensors", st(header_text=header_with(
        {"a": {"dtype": "F32", "data_offsets": [0, 24]}}), data=F32_6), ['tensor "a"', 'no field "shape"']),
    ("extra_field.safetensors", st(header_text=header_with(
        {"a": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24], "strides": [1]}}), data=F32_6),
     ['tensor "a"', 'unknown field "strides"']),
    ("offsets_not_pair.safetensors", st(header_text=header_with(
        {"a": {"dtype": "F32", "shape": [6], "data_offsets": [0, 12, 24]}}), data=F32_6),
     ['tensor "a"', "data_offsets must be [begin, end]"]),
    ("shape_overflow.safetensors", st(header_text=header_with(
        {"a": {"dtype": "F64", "shape": [1 << 31, 1 << 31, 1 << 31], "data_offsets": [0, 0]}}), data=b""),
     ['tensor "a"', "overflows"]),
    ("bytes_overflow.safetensors", st(header_text=header_with(
        {"a": {"dtype": "F64", "shape": [1 << 31, 1 << 31], "data_offsets": [0, 0]}}), data=b""),
     ['tensor "a"', "overflows 64 bits"]),
    ("metadata_not_string.safetensors", st(metadata={"format": "pt", "epochs": 3}),
     ['__metadata__ entry "epochs"', "must be a string"]),
    ("duplicate_key.safetensors", st(header_text=(
        '{"a": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]},'
        ' "a": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]}}'), data=F32_6),
     ['key "a" twice']),
    ("entry_not_object.safetensors", st(header_text='{"a": [1, 2]}', data=b""),
     ['tensor "a"', "must be an object"]),
]


def shard(tensors):
    return safetensors_bytes(tensors, metadata={"format": "pt"})


def index(weight_map):
    return json.dumps({"metadata": {"total_size": 32}, "weight_map": weight_map}).encode()


A = [("a", "F32", [2, 3], F32_6)]
B = [("b", "I16", [2], I16_2)]
# Sharded cases: folder -> (files, expected phrases). The index is model.safetensors.index.json.
SHARDED = {
    "missing_shard": ({"s1.safetensors": shard(A), "model.safetensors.index.json":
                       index({"a": "s1.safetensors", "b": "s2.safetensors"})},
                      ['shard "s2.safetensors"', "no such file"]),
    "dotdot_shard": ({"s1.safetensors": shard(A), "model.safetensors.index.json":
                      index({"a": "s1.safetensors", "b": "../s2.safetensors"})},
                     ['"../s2.safetensors"', "may not contain '..'"]),
    "absolute_shard": ({"model.safetensors.index.json": index({"a": "/etc/passwd"})},
                       ['"/etc/passwd"', "must be a relative path"]),
    "tensor_not_in_shard": ({"s1.safetensors": shard(A), "s2.safetensors": shard(B),
                             "model.safetensors.index.json":
                             index({"a": "s1.safetensors", "b": "s2.safetensors", "c": "s2.safetensors"})},
                            ['tensor "c"', 'shard "s2.safetensors"', "does not contain it"]),
    "tensor_in_two_shards": ({"s1.safetensors": shard(A), "s2.safetensors": shard(A + B),
                              "model.safetensors.index.json":
                              index({"a": "s1.safetensors", "b": "s2.safetensors"})},
                             ['tensor "a"', 'shard "s2.safetensors"', "weight_map puts it in \"s1.safetensors\""]),
    "no_weight_map": ({"model.safetensors.index.json": b'{"metadata": {}}'}, ['"weight_map"']),
    "weight_map_not_strings": ({"model.safetensors.index.json": b'{"weight_map": {"a": 1}}'},
                               ['weight_map entry "a"', "must be a string"]),
    "broken_shard": ({"s1.safetensors": st(header_length=1 << 40), "model.safetensors.index.json":
                      index({"a": "s1.safetensors"})}, ['shard "s1.safetensors"', "exceeds the limit"]),
}


def npy(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


X = npy(np.arange(12, dtype="<f4").reshape(3, 4))
Y = npy(np.arange(5, dtype="<i8"))
Y6 = npy(np.arange(6, dtype="<i8"))
GOOD_ZIP = zip_bytes([Member("x.npy", X), Member("y.npy", Y, method=8)])


def deflate(data):
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def bad_local_signature():
    z = bytearray(GOOD_ZIP)
    z[0:4] = b"PK\x09\x09"
    return bytes(z)


def overlapping_entries():
    """w.npy's local header and data lie inside x.npy's stored data."""
    inner = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, zlib.crc32(X), len(X), len(X), 5, 0)
    inner += b"w.npy" + X
    return zip_bytes([Member("x.npy", inner), Member("w.npy", X, local_offset=30 + len("x.npy"))])


def corrupt_deflate():
    data = bytearray(deflate(Y))
    data[0] ^= 0xFF  # an invalid block type in the first header bits
    data[1] ^= 0xFF
    return zip_bytes([Member("y.npy", Y, method=8, compressed=bytes(data))])


NPZ = [
    ("empty.npz", b"", ["too short for an end-of-central-directory record"]),
    ("not_zip.npz", b"this is not a zip archive, only some text" * 3, ["no end-of-central-directory record"]),
    ("truncated_half.npz", GOOD_ZIP[: len(GOOD_ZIP) // 2], ["no end-of-central-directory record"]),
    ("bad_comment_length.npz", GOOD_ZIP[:-2] + b"\x05\x00", ["no end-of-central-directory record"]),
    ("cd_past_end.npz", zip_bytes([Member("x.npy", X)], cd_size_delta=40), ["central directory", "runs past"]),
    ("cd_truncated.npz", zip_bytes([Member("x.npy", X)], cd_size_delta=-2),
     ["central directory entry 0", "run past the end of the central directory"]),
    ("cd_too_small.npz", zip_bytes([Member("x.npy", X)], cd_size_delta=-10),
     ["declares 1 entries", "more than a central directory of 41 bytes"]),
    ("too_many_entries.npz", zip_bytes([Member("x.npy", X)], count_delta=1000),
     ["declares 1001 entries", "more than a central directory"]),
    ("cd_bad_signature.npz", zip_bytes([Member("x.npy", X)], cd_offset=10),
     ["central directory entry 0 at offset 10", "no central directory signature"]),
    ("crc_stored.npz", zip_bytes([Member("x.npy", X, crc=0x12345678)]), ['entry "x.npy"', "CRC-32 mismatch"]),
    ("crc_deflated.npz", zip_bytes([Member("y.npy", Y, method=8, crc=0x12345678)]),
     ['entry "y.npy"', "CRC-32 mismatch"]),
    ("deflate_bomb_declared_smaller.npz", zip_bytes([Member("y.npy", Y + b"\0" * 4096, method=8,
                                                            declared_size=len(Y))]),
     ['entry "y.npy"', "inflates to more than the"]),
    ("declared_larger.npz", zip_bytes([Member("y.npy", Y6[:-8], method=8, declared_size=len(Y6))]),
     ['entry "y.npy"', "ends after"]),
    ("ratio_bomb.npz", zip_bytes([Member("y.npy", Y, method=8, declared_size=1 << 40, zip64=True)]),
     ['entry "y.npy"', "more than deflate can produce"]),
    ("corrupt_deflate.npz", corrupt_deflate(), ['entry "y.npy"', "corrupt deflate data"]),
    ("truncated_deflate.npz", zip_bytes([Member("y.npy", Y, method=8, compressed=deflate(Y)[:20])]),
     ['entry "y.npy"', "truncated"]),
    ("encrypted.npz", zip_bytes([Member("x.npy", X, flags=1)]), ['entry "x.npy"', "encrypted"]),
    ("bzip2_method.npz", zip_bytes([Member("x.npy", X, method=12)]), ['entry "x.npy"', "compression method 12"]),
    ("stored_size_mismatch.npz", zip_bytes([Member("x.npy", X, declared_size=len(X) + 1)]),
     ['entry "x.npy"', "differs from its uncompressed size"]),
    ("local_name_mismatch.npz", zip_bytes([Member("x.npy", X, local_name="z.npy")]),
     ['entry "x.npy"', 'names "z.npy" instead']),
    ("local_crc_mismatch.npz", zip_bytes([Member("x.npy", X, local_crc=1)]),
     ['entry "x.npy"', "disagrees with the central directory"]),
    ("local_signature.npz", bad_local_signature(), ['entry "x.npy"', "no local header signature at offset 0"]),
    ("local_offset_past_cd.npz", zip_bytes([Member("x.npy", X, local_offset=100000)]),
     ['entry "x.npy"', "local header offset 100000"]),
    ("overlapping_entries.npz", overlapping_entries(), ['entry "w.npy"', "overlaps the data of entry \"x.npy\""]),
    ("duplicate_names.npz", zip_bytes([Member("x.npy", X), Member("x.npy", X)]), ['entry "x.npy"', "appears twice"]),
    ("zip64_missing_extra.npz", zip_bytes([Member("x.npy", X, zip64=True, omit_zip64_extra=True)]),
     ['entry "x.npy"', "no zip64 extra field"]),
    ("zip64_bad_locator.npz", zip_bytes([Member("x.npy", X, zip64=True)], zip64_end=True, zip64_record_offset=3),
     ["no zip64 end-of-central-directory signature at offset 3"]),
    ("zip64_locator_past.npz", zip_bytes([Member("x.npy", X, zip64=True)], zip64_end=True,
                                         zip64_record_offset=1 << 50),
     ["zip64 locator", "no 56-byte zip64 end record fits"]),
    ("npy_bad_magic.npz", zip_bytes([Member("x.npy", b"NOTNUMPY" + X[8:])]), ['entry "x.npy"', "magic"]),
    ("npy_shape_mismatch.npz", zip_bytes([Member("x.npy", X[:-8])]),
     ['entry "x.npy"', "needs 48 bytes of data, the member holds 40"]),
    ("npy_deflated_truncated_header.npz", zip_bytes([Member("y.npy", Y[:30], method=8)]),
     ['entry "y.npy"', "truncated"]),
    ("npy_object_array.npz", zip_bytes([Member("o.npy", npy(np.array([{"a": 1}], dtype=object)))]),
     ['entry "o.npy"', "descr"]),
]


def write_folder(folder, cases):
    os.makedirs(folder, exist_ok=True)
    manifest = []
    for name, data, expect in cases:
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
        manifest.append({"file": name, "expect": expect})
    return manifest


def main(out):
    st_dir = os.path.join(out, "safetensors")
    manifest = write_folder(st_dir, SAFETENSORS)
    for folder, (files, expect) in SHARDED.items():
        d = os.path.join(st_dir, folder)
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        manifest.append({"file": folder + "/model.safetensors.index.json", "expect": expect})
    with open(os.path.join(st_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    npz_dir = os.path.join(out, "npz")
    manifest = write_folder(npz_dir, NPZ)
    with open(os.path.join(npz_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
