// llama.cpp as the consumer of our GGUF export: loads a .gguf with node-llama-cpp
// (CPU, prebuilt binaries) and computes the next-token perplexity of token ids,
// one sequence per row, each evaluated from position 0 in a fresh context.
//
//   node perplexity.js --modules DIR --gguf MODEL.gguf --ids IDS.npy
//
// IDS.npy is int64 [N, T]; prints one JSON line {"perplexity", "nll_mean",
// "tokens", "rows"} over the N * (T - 1) predicted tokens. Exit 1 with a
// message on stderr for anything llama.cpp refuses.
'use strict';

const fs = require('fs');
const path = require('path');
const { parseArgs } = require('./args.js');

function args() {
    return parseArgs('perplexity.js', '--modules DIR --gguf MODEL.gguf --ids IDS.npy', ['modules', 'gguf', 'ids']);
}

// int64 [N, T] from an .npy file (little-endian, C order).
function readIds(file) {
    const bytes = fs.readFileSync(file);
    const headerLength = bytes.readUInt16LE(8);
    const header = bytes.subarray(10, 10 + headerLength).toString('latin1');
    if (!header.includes("'<i8'") || header.includes("'fortran_order': True"))
        throw new Error(`${file}: expected little-endian int64 in C order, header ${header}`);
    const shape = header.match(/'shape': \((\d+), (\d+)\)/);
    if (!shape)
        throw new Error(`${file}: expected a 2-D array, header ${header}`);
    const rows = Number(shape[1]), cols = Number(shape[2]);
    const data = new BigInt64Array(bytes.buffer.slice(bytes.byteOffset + 10 + headerLength,
                                                      bytes.byteOffset + 10 + headerLength + rows * cols * 8));
    const out = [];
    for (let r = 0; r < rows; ++r)
        out.push(Array.from(data.subarray(r * cols, (r + 1) * cols), Number));
    return out;
}

async function main() {
    const a = args();
    const { getLlama } = await import(path.join(path.resolve(a.modules), 'node_modules', 'node-llama-cpp', 'dist', 'index.js'));
    const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
    const model = await llama.loadModel({ modelPath: path.resolve(a.gguf), gpuLayers: 0 });
    const rows = readIds(a.ids);
    let nll = 0, tokens = 0;
    for (const row of rows) {
        const context = await model.createContext({ contextSize: Math.max(row.length + 8, 64), batchSize: row.length,
                                                    threads: 2 });
        const sequence = context.getSequence();
        // Probabilities of the next token after every position but the last, without sampling options.
        const input = row.map((token, i) => (i + 1 < row.length ? [token, { generateNext: { probabilities: true } }] : token));
        const results = await sequence.controlledEvaluate(input);
        for (let i = 0; i + 1 < row.length; ++i) {
            const probabilities = results[i]?.next?.probabilities;
            if (!probabilities)
                throw new Error(`no probabilities at position ${i}`);
            const p = probabilities.get(row[i + 1]) ?? 0;
            nll += -Math.log(p);
            ++tokens;
        }
        await context.dispose();
    }
    await model.dispose();
    console.log(JSON.stringify({ perplexity: Math.exp(nll / tokens), nll_mean: nll / tokens, tokens, rows: rows.length }));
}

main().catch((e) => {
    console.error(`perplexity.js: ${e.message}`);
    process.exit(1);
});
