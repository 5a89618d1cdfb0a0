'use strict';
// ONNX Runtime (onnxruntime-node, CPU) as a long-lived child of a benchmark
// (tests/bench/bench_zoo), so that each of its runs can be timed in turn with
// ours, round by round, without starting node again.
//
//   node bench_server.js --ort-dir DIR
//
// One JSON request per line on stdin, one JSON reply per line on stdout:
//   {"op": "load", "model": M, "inputs": IN.json, "threads": T, "level": L, "outputs": OUTDIR}
//       Opens a session (T intra-op threads, one inter-op thread, sequential,
//       graph optimisation level L, default all), replacing the one before;
//       reads the inputs (IN.json maps input names to .npy files) and runs
//       once. With "outputs", writes every graph output to OUTDIR/<index>.npy
//       and OUTDIR/outputs.json (as run_model.js does).
//       -> {"ok": true, "runtime": "onnxruntime-node X.Y.Z"}
//   {"op": "run", "untimed": K, "settle_ms": S}  -> {"ms": M}: untimed
//       session.run calls, at least K of them (default 0) and for at least S
//       milliseconds (default 0), then one on the loaded inputs timed: wall
//       time around it (hrtime) in milliseconds.
//   {"op": "quit"} -> exits; so does the end of stdin.
// A failure replies {"error": message} and the server keeps serving.

const fs = require('fs');
const path = require('path');
const readline = require('readline');
const { readNpy, encodeNpy, fail } = require('./npy.js');

function parseArguments(argv) {
    if (argv.length !== 2 || argv[0] !== '--ort-dir')
        fail('usage: node bench_server.js --ort-dir DIR');
    return { ortDir: argv[1] };
}

async function main() {
    const options = parseArguments(process.argv.slice(2));
    const packageDir = path.join(path.resolve(options.ortDir), 'node_modules', 'onnxruntime-node');
    const ort = require(packageDir);
    const runtime = `onnxruntime-node ${require(path.join(packageDir, 'package.json')).version}`;
    let session = null, feeds = null;

    const handlers = {
        async load(request) {
            if (session)
                await session.release();
            session = null;
            session = await ort.InferenceSession.create(request.model, {
                executionProviders: ['cpu'],
                intraOpNumThreads: request.threads || 2,
                interOpNumThreads: 1,
                executionMode: 'sequential',
                graphOptimizationLevel: request.level || 'all',
            });
            feeds = {};
            for (const [name, file] of Object.entries(JSON.parse(fs.readFileSync(request.inputs, 'utf8'))))
                feeds[name] = readNpy(ort, file);
            const results = await session.run(feeds);
            if (request.outputs) {
                fs.mkdirSync(request.outputs, { recursive: true });
                const manifest = {};
                session.outputNames.forEach((name, index) => {
                    fs.writeFileSync(path.join(request.outputs, `${index}.npy`), encodeNpy(results[name]));
                    manifest[name] = `${index}.npy`;
                });
                fs.writeFileSync(path.join(request.outputs, 'outputs.json'), JSON.stringify(manifest));
            }
            return { ok: true, runtime };
        },
        async run(request) {
            if (!session)
                throw new Error('no model loaded');
            const settleUntil = process.hrtime.bigint() + BigInt(Math.round((request.settle_ms || 0) * 1e6));
            for (let i = 0; i < (request.untimed || 0) || process.hrtime.bigint() < settleUntil; ++i)
                await session.run(feeds);
            const start = process.hrtime.bigint();
            await session.run(feeds);
            return { ms: Number(process.hrtime.bigint() - start) / 1e6 };
        },
    };

    const lines = readline.createInterface({ input: process.stdin, terminal: false });
    for await (const line of lines) {
        if (!line.trim())
            continue;
        let reply;
        try {
            const request = JSON.parse(line);
            if (request.op === 'quit')
                break;
            const handler = handlers[request.op];
            if (!handler)
                throw new Error(`unknown op ${JSON.stringify(request.op)}`);
            reply = await handler(request);
        } catch (error) {
            reply = { error: `ONNX Runtime: ${error && error.message ? error.message : error}` };
        }
        process.stdout.write(JSON.stringify(reply) + '\n');
    }
    if (session)
        await session.release();
}

main().catch(error => fail(`bench_server.js: ${error && error.message ? error.message : error}`));
