// llama.cpp's tokenizer on the vocabulary of a GGUF file: loads it with
// node-llama-cpp (vocabulary only) and tokenizes every line of a JSON array of
// strings, added tokens written in the text taken as those tokens (as the
// Hugging Face tokenizers do) and no BOS or EOS added.
//
//   node tokenize.js --modules DIR --gguf MODEL.gguf --lines LINES.json [--nfc 1]
//
// Prints one JSON array of id arrays, one per line. Exit 1 with a message on
// stderr for anything llama.cpp refuses. `--nfc 1` first puts each line in
// Unicode normalization form C (llama.cpp has no normalizer of its own).
'use strict';

const fs = require('fs');
const path = require('path');
const { parseArgs } = require('./args.js');

function args() {
    return parseArgs('tokenize.js', '--modules DIR --gguf MODEL.gguf --lines LINES.json [--nfc 1]', ['modules', 'gguf', 'lines']);
}

async function main() {
    const a = args();
    const lines = JSON.parse(fs.readFileSync(a.lines, 'utf8'));
    if (!Array.isArray(lines) || !lines.every((l) => typeof l === 'string'))
        throw new Error(`${a.lines}: expected a JSON array of strings`);
    const { getLlama } = await import(path.join(path.resolve(a.modules), 'node_modules', 'node-llama-cpp', 'dist', 'index.js'));
    const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
    const model = await llama.loadModel({ modelPath: path.resolve(a.gguf), vocabOnly: true });
    const nfc = a.nfc === '1';
    const ids = lines.map((line) => Array.from(model.tokenize(nfc ? line.normalize('NFC') : line, true), Number));
    await model.dispose();
    console.log(JSON.stringify(ids));
}

main().catch((e) => {
    console.error(`tokenize.js: ${e.message}`);
    process.exit(1);
});
