'use strict';
// Runs an ONNX model with ONNX Runtime (onnxruntime-node, CPU) on .npy inputs
// and writes its outputs as .npy files: the reference runtime of the tests.
//
//   node run_model.js --ort-dir DIR --model M.onnx --inputs IN.json --out OUTDIR
//                     [--threads T] [--warmup W] [--repeat R] [--batch B] [--level L]
//
// DIR holds node_modules/onnxruntime-node (tests/ort/install.sh puts it there).
// IN.json maps each graph input name to an .npy file. Every graph output is
// written to OUTDIR/<index>.npy, and OUTDIR/outputs.json maps output names to
// those files (names may hold characters a file name cannot).
// With --repeat R the model also runs W + R more times on the same inputs and
// the R wall-clock latencies are printed on stdout as JSON
// ({"runs_ms": [...], "median_ms": m, "min_ms": m}).
// With --batch B every input is cut along axis 0 into batches of B rows, the
// model runs once per batch, and each output is the batches' outputs joined
// along axis 0 (a model with a fixed batch of 1 then runs a whole data set).
// --level sets ONNX Runtime's graph optimisation level: disabled, basic,
// extended or all (the default, what users get).
// Failures print ONNX Runtime's message on stderr and exit with status 1.

const fs = require('fs');
const path = require('path');

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

function parseArguments(argv) {
    const options = { threads: 2, warmup: 1, repeat: 0, batch: 0, level: 'all' };
    for (let i = 0; i < argv.length; i += 2) {
        const key = argv[i], value = argv[i + 1];
        if (value === undefined)
            fail(`run_model.js: ${key} needs a value`);
        switch (key) {
        case '--ort-dir': options.ortDir = value; break;
        case '--model': options.model = value; break;
        case '--inputs': options.inputs = value; break;
        case '--out': options.out = value; break;
        case '--threads': options.threads = Number(value); break;
        case '--warmup': options.warmup = Number(value); break;
        case '--repeat': options.repeat = Number(value); break;
        case '--batch': options.batch = Number(value); break;
        case '--level': options.level = value; break;
        default: fail(`run_model.js: unknown argument ${key}`);
        }
    }
    for (const required of ['ortDir', 'model', 'inputs', 'out'])
        if (!options[required])
            fail(`run_model.js: missing --${required.replace('Dir', '-dir')}`);
    return options;
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

// Rows [begin, end) of a tensor along axis 0.
function rows(ort, tensor, begin, end) {
    const rowSize = tensor.dims.slice(1).reduce((a, b) => a * b, 1);
    const data = tensor.data.slice(begin * rowSize, end * rowSize);
    return new ort.Tensor(tensor.type, data, [end - begin, ...tensor.dims.slice(1)]);
}

// Tensors of one type joined along axis 0.
function joinRows(ort, parts) {
    const total = parts.reduce((n, t) => n + t.data.length, 0);
    const data = new parts[0].data.constructor(total);
    let offset = 0;
    for (const t of parts) {
        data.set(t.data, offset);
        offset += t.data.length;
    }
    const leading = parts.reduce((n, t) => n + (t.dims.length ? t.dims[0] : 1), 0);
    return new ort.Tensor(parts[0].type, data, [leading, ...parts[0].dims.slice(1)]);
}

async function runInBatches(ort, session, feeds, batch) {
    const counts = Object.values(feeds).map(t => t.dims[0]);
    const n = counts[0];
    if (counts.some(c => c !== n) || n % batch !== 0)
        fail(`run_model.js: --batch ${batch}: the inputs have ${counts.join(', ')} rows, not one multiple of ${batch}`);
    const parts = {};
    for (let begin = 0; begin < n; begin += batch) {
        const slice = {};
        for (const [name, t] of Object.entries(feeds))
            slice[name] = rows(ort, t, begin, begin + batch);
        const out = await session.run(slice);
        for (const name of session.outputNames)
            (parts[name] = parts[name] || []).push(out[name]);
    }
    const joined = {};
    for (const name of session.outputNames)
        joined[name] = joinRows(ort, parts[name]);
    return joined;
}

async function main() {
    const options = parseArguments(process.argv.slice(2));
    const ort = require(path.join(path.resolve(options.ortDir), 'node_modules', 'onnxruntime-node'));
    const session = await ort.InferenceSession.create(options.model, {
        executionProviders: ['cpu'],
        intraOpNumThreads: options.threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: options.level,
    });
    const inputFiles = JSON.parse(fs.readFileSync(options.inputs, 'utf8'));
    const feeds = {};
    for (const [name, file] of Object.entries(inputFiles))
        feeds[name] = readNpy(ort, file);
    const results = options.batch > 0 ? await runInBatches(ort, session, feeds, options.batch)
                                      : await session.run(feeds);
    fs.mkdirSync(options.out, { recursive: true });
    const manifest = {};
    session.outputNames.forEach((name, index) => {
        const file = `${index}.npy`;
        fs.writeFileSync(path.join(options.out, file), encodeNpy(results[name]));
        manifest[name] = file;
    });
    fs.writeFileSync(path.join(options.out, 'outputs.json'), JSON.stringify(manifest));

    if (options.repeat > 0) {
        for (let i = 0; i < options.warmup; ++i)
            await session.run(feeds);
        const runs = [];
        for (let i = 0; i < options.repeat; ++i) {
            const start = process.hrtime.bigint();
            await session.run(feeds);
            runs.push(Number(process.hrtime.bigint() - start) / 1e6);
        }
        const sorted = [...runs].sort((a, b) => a - b);
        const median = sorted.length % 2 ? sorted[(sorted.length - 1) / 2]
                                         : (sorted[sorted.length / 2 - 1] + sorted[sorted.length / 2]) / 2;
        process.stdout.write(JSON.stringify({ runs_ms: runs, median_ms: median, min_ms: sorted[0] }) + '\n');
    }
}

main().catch(error => fail(`ONNX Runtime: ${error && error.message ? error.message : error}`));
