'use strict';
// .npy files as onnxruntime-node tensors and back, for the scripts of this
// folder (run_model.js, profile_model.js, bench_server.js): little-endian,
// C-order arrays of the dtypes ONNX Runtime takes.

const fs = require('fs');

// .npy descr (without byte order) <-> ONNX Runtime tensor type and typed array.
const kTypes = [
    { descr: 'f4', ort: 'float32', array: Float32Array },
    { descr: 'f8', ort: 'float64', array: Float64Array },
    { descr: 'f2', ort: 'float16', array: Uint16Array },
    { descr: 'i1', ort: 'int8', array: Int8Array },
    { descr: 'u1', ort: 'uint8', array: Uint8Array },
    { descr: 'i2', ort: 'int16', array: Int16Array },
    { descr: 'u2', ort: 'uint16', array: Uint16Array },
    { descr: 'i4', ort: 'int32', array: Int32Array },
    { descr: 'u4', ort: 'uint32', array: Uint32Array },
    { descr: 'i8', ort: 'int64', array: BigInt64Array },
    { descr: 'u8', ort: 'uint64', array: BigUint64Array },
    { descr: 'b1', ort: 'bool', array: Uint8Array },
];

function fail(message) {
    process.stderr.write(message + '\n');
    process.exit(1);
}

// A little-endian, C-order .npy file (versions 1-3) as an ONNX Runtime tensor.
function readNpy(ort, file) {
    const bytes = fs.readFileSync(file);
    if (bytes.length < 10 || bytes.readUInt8(0) !== 0x93 || bytes.toString('latin1', 1, 6) !== 'NUMPY')
        fail(`${file}: not an .npy file (bad magic)`);
    const major = bytes.readUInt8(6);
    const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
    const headerStart = major === 1 ? 10 : 12;
    const dataStart = headerStart + headerLength;
    if (dataStart > bytes.length)
        fail(`${file}: the header length ${headerLength} runs past the end of the file`);
    const header = bytes.toString('latin1', headerStart, dataStart);
    const descr = /'descr':\s*'([^']*)'/.exec(header);
    const fortran = /'fortran_order':\s*(True|False)/.exec(header);
    const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
    if (!descr || !fortran || !shape)
        fail(`${file}: header ${header.trim()} lacks descr, fortran_order or shape`);
    if (fortran[1] === 'True')
        fail(`${file}: Fortran-order arrays are not supported`);
    const order = descr[1][0], code = descr[1].slice(1);
    const type = kTypes.find(t => t.descr === code);
    if (!type || order === '>')
        fail(`${file}: dtype '${descr[1]}' is not supported (want little-endian ${kTypes.map(t => t.descr).join(', ')})`);
    const dims = shape[1].split(',').map(s => s.trim()).filter(s => s.length > 0).map(Number);
    const count = dims.reduce((a, b) => a * b, 1);
    const byteLength = count * type.array.BYTES_PER_ELEMENT;
    if (dataStart + byteLength !== bytes.length)
        fail(`${file}: shape (${dims.join(', ')}) of ${descr[1]} needs ${byteLength} bytes, the file holds ${bytes.length - dataStart}`);
    // Copy into an aligned buffer: typed arrays need element-aligned offsets.
    const data = new type.array(count);
    Buffer.from(data.buffer).set(bytes.subarray(dataStart));
    return new ort.Tensor(type.ort, type.ort === 'bool' ? new Uint8Array(data.buffer) : data, dims);
}

// An ONNX Runtime tensor as a version 1.0 .npy image.
function encodeNpy(tensor) {
    const type = kTypes.find(t => t.ort === tensor.type);
    if (!type)
        fail(`output of type ${tensor.type} has no .npy dtype`);
    const order = type.array.BYTES_PER_ELEMENT === 1 ? '|' : '<';
    const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
    let header = `{'descr': '${order}${type.descr}', 'fortran_order': False, 'shape': ${shape}, }`;
    // Pad with spaces so that the data starts on a 64-byte boundary; end with a newline.
    const total = Math.ceil((10 + header.length + 1) / 64) * 64;
    header = header.padEnd(total - 10 - 1, ' ') + '\n';
    const prefix = Buffer.alloc(10);
    prefix.writeUInt8(0x93, 0);
    prefix.write('NUMPY', 1, 'latin1');
    prefix.writeUInt8(1, 6);
    prefix.writeUInt8(0, 7);
    prefix.writeUInt16LE(header.length, 8);
    const data = tensor.data;
    const payload = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    return Buffer.concat([prefix, Buffer.from(header, 'latin1'), payload]);
}

module.exports = { kTypes, fail, readNpy, encodeNpy };
