"""Byte-level writers of the safetensors and zip formats, with knobs to break
them. Used by make_valid_archives.py and make_hostile_archives.py; the Python
safetensors package is not installed, and zipfile cannot write broken archives.
"""
import json
import struct
import zlib

# numpy dtype string (or raw code type) of each safetensors dtype.
NUMPY_OF_DTYPE = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
    "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?",
    "F8_E4M3": "u1", "F8_E5M2": "u1",
}


def safetensors_bytes(tensors, metadata=None, header_text=None, header_length=None, pad_to=8,
                      data=None, offsets=None):
    """tensors: list of (name, dtype, shape, raw bytes), laid out in order.
    Overrides: header_text (replaces the JSON), header_length (the 8-byte field),
    data (replaces the data section), offsets (name -> [begin, end])."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    blob = b""
    for name, dtype, shape, raw in tensors:
        begin = len(blob)
        blob += raw
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [begin, len(blob)]}
        if offsets and name in offsets:
            header[name]["data_offsets"] = offsets[name]
    text = header_text if header_text is not None else json.dumps(header).encode()
    if isinstance(text, str):
        text = text.encode()
    if pad_to:
        text += b" " * ((-(8 + len(text))) % pad_to)
    n = len(text) if header_length is None else header_length
    return struct.pack("<Q", n) + text + (blob if data is None else data)


class Member:
    """One zip entry and the knobs that break it."""

    def __init__(self, name, content, method=0, flags=0, crc=None, declared_size=None, compressed=None,
                 local_name=None, local_crc=None, zip64=False, local_offset=None, omit_zip64_extra=False):
        self.name = name.encode() if isinstance(name, str) else name
        self.content = content
        self.method = method
        self.flags = flags
        self.crc = zlib.crc32(content) if crc is None else crc
        self.declared_size = len(content) if declared_size is None else declared_size
        if compressed is None:
            if method == 8:
                c = zlib.compressobj(6, zlib.DEFLATED, -15)
                compressed = c.compress(content) + c.flush()
            else:
                compressed = content
        self.compressed = compressed
        self.local_name = self.name if local_name is None else local_name.encode()
        self.local_crc = self.crc if local_crc is None else local_crc
        self.zip64 = zip64
        self.local_offset = local_offset
        self.omit_zip64_extra = omit_zip64_extra


def zip_bytes(members, zip64_end=False, comment=b"", cd_size_delta=0, count_delta=0, cd_offset=None,
              zip64_record_offset=None):
    """A zip archive of `members`. zip64 members store 0xFFFFFFFF sizes and offsets
    with a zip64 extra field; zip64_end writes the zip64 end record and locator."""
    out = b""
    central = b""
    for m in members:
        offset = len(out)
        if m.zip64:
            extra = struct.pack("<HHQQ", 1, 16, m.declared_size, len(m.compressed))
            local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, m.flags, m.method, 0, 0x21, m.local_crc,
                                0xFFFFFFFF, 0xFFFFFFFF, len(m.local_name), 0 if m.omit_zip64_extra else len(extra))
            local += m.local_name + (b"" if m.omit_zip64_extra else extra)
        else:
            local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, m.flags, m.method, 0, 0x21, m.local_crc,
                                len(m.compressed), m.declared_size, len(m.local_name), 0) + m.local_name
        out += local + m.compressed
        at = offset if m.local_offset is None else m.local_offset
        if m.zip64:
            extra = b"" if m.omit_zip64_extra else struct.pack("<HHQQQ", 1, 24, m.declared_size,
                                                                 len(m.compressed), at)
            central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, m.flags, m.method, 0, 0x21, m.crc,
                                   0xFFFFFFFF, 0xFFFFFFFF, len(m.name), len(extra), 0, 0, 0, 0, 0xFFFFFFFF)
            central += m.name + extra
        else:
            central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, m.flags, m.method, 0, 0x21, m.crc,
                                   len(m.compressed), m.declared_size, len(m.name), 0, 0, 0, 0, 0, at)
            central += m.name
    cd_at = len(out) if cd_offset is None else cd_offset
    out += central
    count = len(members) + count_delta
    cd_size = len(central) + cd_size_delta
    if zip64_end:
        record_at = len(out)
        out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, cd_size, cd_at)
        locator_target = record_at if zip64_record_offset is None else zip64_record_offset
        out += struct.pack("<IIQI", 0x07064B50, 0, locator_target, 1)
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, len(comment))
    else:
        out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, cd_size, cd_at, len(comment))
    return out + comment
