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

const { readNpy, encodeNpy, fail } = require('./npy.js');

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
