'use strict';
// ONNX Runtime's own profile of a model (onnxruntime-node, CPU), as JSON in the
// shape of `quantscope-cli bench-model --profile --json`: kernel time per op
// type and the slowest nodes, per run.
//
//   node profile_model.js --ort-dir DIR --model M.onnx --inputs IN.json
//                         [--threads T] [--runs N] [--warmup W] [--level L] [--top K]
//
// DIR holds node_modules/onnxruntime-node; IN.json maps each graph input name
// to an .npy file (what `bench-model --save-inputs` writes). The session runs
// with enableProfiling (T intra-op threads, one inter-op thread, sequential,
// graph optimisation level L: all by default, or basic, extended, disabled),
// W warm-up runs and N profiled runs; a second session without the profiler
// times N whole runs (wall time around session.run) first. From the trace ONNX Runtime writes, the
// events of category "Node" named "<node>_kernel_time" inside the last N
// "model_run" events count: their `dur` (microseconds) by `args.op_name` and
// by node. Op types are ONNX Runtime's own after its graph optimisations
// (FusedConv, FusedMatMul, ...), so they need not be the model's.
// Output: {runtime, model, level, threads, runs, latency_ms_min,
// latency_ms_median (the unprofiled runs), profiled_run_ms_median (model_run
// events), profile_ms_total, profile: [{op_type, nodes, ms_mean, share}],
// nodes: [{node, op_type, ms_mean, share}] (the K slowest)}.

const fs = require('fs');
const os = require('os');
const path = require('path');
const { readNpy, fail } = require('./npy.js');

function parseArguments(argv) {
    const options = { threads: 2, runs: 20, warmup: 2, level: 'all', top: 15 };
    for (let i = 0; i < argv.length; i += 2) {
        const key = argv[i], value = argv[i + 1];
        if (value === undefined)
            fail(`profile_model.js: ${key} needs a value`);
        switch (key) {
        case '--ort-dir': options.ortDir = value; break;
        case '--model': options.model = value; break;
        case '--inputs': options.inputs = value; break;
        case '--threads': options.threads = Number(value); break;
        case '--runs': options.runs = Number(value); break;
        case '--warmup': options.warmup = Number(value); break;
        case '--level': options.level = value; break;
        case '--top': options.top = Number(value); break;
        default: fail(`profile_model.js: unknown argument ${key}`);
        }
    }
    for (const required of ['ortDir', 'model', 'inputs'])
        if (!options[required])
            fail(`profile_model.js: missing --${required.replace('Dir', '-dir')}`);
    if (!(options.runs >= 1))
        fail('profile_model.js: --runs needs a count of at least 1');
    return options;
}

function median(values) {
    const s = [...values].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

// The profile's events of the last `runs` model runs, summed per op type and per node.
function summarize(events, runs, top) {
    const modelRuns = events.filter(e => e.cat === 'Session' && e.name === 'model_run').sort((a, b) => a.ts - b.ts);
    if (modelRuns.length < runs)
        fail(`profile_model.js: the trace holds ${modelRuns.length} model_run events, fewer than the ${runs} runs`);
    const timed = modelRuns.slice(modelRuns.length - runs);
    const inTimedRun = ts => timed.some(r => ts >= r.ts && ts <= r.ts + r.dur);
    const byNode = new Map();
    for (const e of events) {
        if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || !inTimedRun(e.ts))
            continue;
        const node = e.name.slice(0, -'_kernel_time'.length);
        const entry = byNode.get(node) || { node, op_type: (e.args && e.args.op_name) || '?', us: 0 };
        entry.us += e.dur;
        byNode.set(node, entry);
    }
    const total = [...byNode.values()].reduce((sum, n) => sum + n.us, 0) / 1000 / runs;
    const share = ms => (total > 0 ? ms / total : 0);
    const byType = new Map();
    for (const n of byNode.values()) {
        const t = byType.get(n.op_type) || { op_type: n.op_type, nodes: 0, ms_mean: 0 };
        t.nodes += 1;
        t.ms_mean += n.us / 1000 / runs;
        byType.set(n.op_type, t);
    }
    const profile = [...byType.values()].sort((a, b) => b.ms_mean - a.ms_mean)
                                        .map(t => ({ ...t, share: share(t.ms_mean) }));
    const nodes = [...byNode.values()].map(n => ({ node: n.node, op_type: n.op_type, ms_mean: n.us / 1000 / runs }))
                                      .sort((a, b) => b.ms_mean - a.ms_mean).slice(0, top)
                                      .map(n => ({ ...n, share: share(n.ms_mean) }));
    const profiledMs = timed.map(r => r.dur / 1000);
    return { profiled_run_ms_median: median(profiledMs), profile_ms_total: total, profile, nodes };
}

async function main() {
    const options = parseArguments(process.argv.slice(2));
    const ort = require(path.join(path.resolve(options.ortDir), 'node_modules', 'onnxruntime-node'));
    const traceDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort_profile_'));
    const prefix = path.join(traceDir, 'trace');
    try {
        const sessionOptions = {
            executionProviders: ['cpu'],
            intraOpNumThreads: options.threads,
            interOpNumThreads: 1,
            executionMode: 'sequential',
            graphOptimizationLevel: options.level,
        };
        const inputFiles = JSON.parse(fs.readFileSync(options.inputs, 'utf8'));
        const feeds = {};
        for (const [name, file] of Object.entries(inputFiles))
            feeds[name] = readNpy(ort, file);
        // Whole runs, timed without the profiler (whose per-node events cost
        // more than small kernels do).
        const plain = await ort.InferenceSession.create(options.model, sessionOptions);
        for (let i = 0; i < options.warmup; ++i)
            await plain.run(feeds);
        const runMs = [];
        for (let i = 0; i < options.runs; ++i) {
            const start = process.hrtime.bigint();
            await plain.run(feeds);
            runMs.push(Number(process.hrtime.bigint() - start) / 1e6);
        }
        await plain.release();
        const session = await ort.InferenceSession.create(
            options.model, { ...sessionOptions, enableProfiling: true, profileFilePrefix: prefix });
        for (let i = 0; i < options.warmup + options.runs; ++i)
            await session.run(feeds);
        session.endProfiling();
        const traces = fs.readdirSync(traceDir).filter(f => f.endsWith('.json'));
        if (traces.length !== 1)
            fail(`profile_model.js: ONNX Runtime wrote ${traces.length} trace files into ${traceDir}, not one`);
        const events = JSON.parse(fs.readFileSync(path.join(traceDir, traces[0]), 'utf8'));
        const summary = { latency_ms_min: Math.min(...runMs), latency_ms_median: median(runMs),
                          ...summarize(events, options.runs, options.top) };
        const version = require(path.join(path.resolve(options.ortDir), 'node_modules', 'onnxruntime-node',
                                          'package.json')).version;
        process.stdout.write(JSON.stringify({ runtime: `onnxruntime-node ${version}`, model: options.model,
                                              level: options.level, threads: options.threads, runs: options.runs,
                                              ...summary }, null, 1) + '\n');
    } finally {
        fs.rmSync(traceDir, { recursive: true, force: true });
    }
}

main().catch(error => fail(`ONNX Runtime: ${error && error.message ? error.message : error}`));
