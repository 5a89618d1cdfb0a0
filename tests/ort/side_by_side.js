'use strict';
// Prints two profiles of one model next to each other: ours
// (`quantscope-cli bench-model --profile --json`) and ONNX Runtime's
// (profile_model.js). profile_side_by_side.sh runs both and then this.
//
//   node side_by_side.js OURS.json ORT.json

const fs = require('fs');

function fail(message) {
    process.stderr.write(message + '\n');
    process.exit(1);
}

function load(file, what) {
    let j;
    try {
        j = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (error) {
        fail(`side_by_side.js: ${file}: ${error.message}`);
    }
    if (!Array.isArray(j.profile) || !Array.isArray(j.nodes))
        fail(`side_by_side.js: ${file} holds no profile and nodes (${what})`);
    return j;
}

const ms = v => v.toFixed(3);
const percent = v => (100 * v).toFixed(1) + '%';

// Rows of cells, columns padded to their widest cell; `right` flags numeric columns.
function table(rows, right) {
    const width = rows[0].map((_, c) => Math.max(...rows.map(r => String(r[c]).length)));
    return rows.map(r => r.map((cell, c) => (right[c] ? String(cell).padStart(width[c]) : String(cell).padEnd(width[c])))
                          .join('  ').trimEnd()).join('\n');
}

function main() {
    const [oursFile, ortFile] = process.argv.slice(2);
    if (!oursFile || !ortFile)
        fail('usage: node side_by_side.js OURS.json ORT.json');
    const ours = load(oursFile, 'bench-model --profile --json');
    const ort = load(ortFile, 'profile_model.js');

    console.log(`${ours.model}: batch ${ours.batch}, ${ours.threads} threads; ours ${ours.runs} profiled runs, ` +
                `${ort.runtime} ${ort.runs} profiled runs at graph optimisation level ${ort.level}`);
    console.log('Op types are each runtime\'s own names after its own graph rewriting: ONNX Runtime fuses nodes ' +
                '(FusedConv, QuickGelu, ...) and reorders layouts (ReorderInput/Output), we fold activations and ' +
                'residual Adds into Conv; rows of one line are ranks, not the same nodes.');
    console.log('Kernel time per run is summed from per-node timers (both sides pay their overhead); whole runs are ' +
                'timed without them (ours: bench-model\'s float runs; ONNX Runtime: a session without the profiler).\n');

    const rows = [['quantscope op', 'nodes', 'ms/run', 'share', '|', 'ONNX Runtime op', 'nodes', 'ms/run', 'share']];
    const n = Math.max(ours.profile.length, ort.profile.length);
    for (let i = 0; i < n; ++i) {
        const a = ours.profile[i], b = ort.profile[i];
        rows.push([a ? a.op_type : '', a ? a.nodes : '', a ? ms(a.ms_mean) : '', a ? percent(a.share) : '', '|',
                   b ? b.op_type : '', b ? b.nodes : '', b ? ms(b.ms_mean) : '', b ? percent(b.share) : '']);
    }
    const nodes = p => p.profile.reduce((sum, t) => sum + t.nodes, 0);
    rows.push(['kernel time', nodes(ours), ms(ours.profile_ms_total), '', '|', 'kernel time', nodes(ort),
               ms(ort.profile_ms_total), '']);
    rows.push(['whole run, fastest', '', ms(ours.latency_ms_min), '', '|', 'whole run, fastest', '',
               ms(ort.latency_ms_min), '']);
    rows.push(['whole run, median', '', ms(ours.latency_ms_median), '', '|', 'whole run, median', '',
               ms(ort.latency_ms_median), '']);
    console.log(table(rows, [false, true, true, true, false, false, true, true, true]));
    console.log(`\nwhole run, fastest: ours / ONNX Runtime = ${(ours.latency_ms_min / ort.latency_ms_min).toFixed(2)}`);

    for (const [title, p] of [['quantscope', ours], ['ONNX Runtime', ort]]) {
        console.log(`\n${title}: the ${p.nodes.length} slowest nodes`);
        const nodeRows = [['node', 'op type', 'ms/run', 'share']];
        for (const node of p.nodes)
            nodeRows.push([node.node, node.op_type, ms(node.ms_mean), percent(node.share)]);
        console.log(table(nodeRows, [false, false, true, true]));
    }
}

main();
