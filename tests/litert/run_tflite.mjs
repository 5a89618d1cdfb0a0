// Runs a .tflite model with LiteRT.js (npm @litertjs/core, its WebAssembly
// CPU runtime on XNNPACK) under plain Node:
//   node run_tflite.mjs DEST_DIR MODEL.tflite OUT_DIR IN0.npy [IN1.npy ...]
// DEST_DIR holds node_modules (tests/litert/install.sh). Inputs are float32
// .npy arrays in the model's input order and layout (NHWC for images); the
// outputs are written as OUT_DIR/output_<i>.npy (float32).
//
// LiteRT.js is written for browsers and workers; a few lines make Node look
// like a worker to it: `self` is the global object, `importScripts` runs its
// Emscripten loader script in this context, and `Module.locateFile` points
// the loader at the .wasm beside it (the loader itself reads it with
// require('fs') once it sees Node, from `__dirname`).
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { createRequire } from 'node:module';

const [dest, modelFile, outDir, ...inputFiles] = process.argv.slice(2);
if (!dest || !modelFile || !outDir) {
    process.stderr.write('usage: node run_tflite.mjs DEST_DIR MODEL.tflite OUT_DIR IN0.npy [IN1.npy ...]\n');
    process.exit(2);
}
const require = createRequire(path.join(path.resolve(dest), 'package.json'));
const { readNpy, encodeNpy, fail } = require(path.join(path.dirname(new URL(import.meta.url).pathname), '../ort/npy.js'));
const wasmDir = path.join(path.resolve(dest), 'node_modules/@litertjs/core/wasm');

globalThis.self = globalThis;
globalThis.require = require;
globalThis.importScripts = (url) => vm.runInThisContext(fs.readFileSync(url.toString(), 'utf8'), { filename: url.toString() });
// The runtime reports a model it cannot prepare ("Failed to allocate tensors") on stderr and
// still returns outputs: its ERROR lines are collected and fail the run.
const runtimeErrors = [];
globalThis.Module = {
    locateFile: (file) => path.join(wasmDir, file),
    printErr: (text) => {
        process.stderr.write(text + '\n');
        if (/^ERROR/.test(text))
            runtimeErrors.push(text);
    },
};
globalThis.__dirname = wasmDir; // the loader's own directory, as Node would give a CommonJS script

const litert = await import(path.join(path.resolve(dest), 'node_modules/@litertjs/core/dist/index.js'));
await litert.loadLiteRt(wasmDir + '/');
let model;
try {
    model = await litert.loadAndCompile(new Uint8Array(fs.readFileSync(modelFile)), { accelerator: 'wasm' });
} catch (e) {
    fail(`${modelFile}: LiteRT.js refused the model: ${e.message ?? e}`);
}
// readNpy builds its result with `new ort.Tensor(type, data, dims)`: collect them plainly.
const plain = { Tensor: class { constructor(type, data, dims) { Object.assign(this, { type, data, dims }); } } };
const inputs = inputFiles.map((file) => {
    const t = readNpy(plain, file);
    if (t.type !== 'float32')
        fail(`${file}: LiteRT.js takes float32 inputs here, not ${t.type}`);
    return new litert.Tensor(t.data, t.dims);
});
const outputs = await model.run(inputs);
if (runtimeErrors.length > 0)
    fail(`${modelFile}: LiteRT.js reported errors: ${runtimeErrors.join(' | ')}`);
fs.mkdirSync(outDir, { recursive: true });
outputs.forEach((tensor, i) => {
    const data = tensor.toTypedArray();
    const dims = tensor.type.layout.dimensions;
    fs.writeFileSync(path.join(outDir, `output_${i}.npy`), encodeNpy({ type: 'float32', data: Float32Array.from(data), dims }));
    tensor.delete();
});
inputs.forEach((t) => t.delete());
model.delete();
process.exit(0);
