// The command line of the llama.cpp scripts here: `--name value` pairs, the
// required names checked. Throws with the script's usage otherwise.
'use strict';

function parseArgs(script, usage, required) {
    const out = {};
    const argv = process.argv.slice(2);
    for (let i = 0; i < argv.length; i += 2) {
        if (!argv[i].startsWith('--') || i + 1 >= argv.length)
            throw new Error(`usage: ${script} ${usage} (at '${argv[i]}')`);
        out[argv[i].slice(2)] = argv[i + 1];
    }
    for (const need of required)
        if (!out[need])
            throw new Error(`--${need} is required`);
    return out;
}

module.exports = { parseArgs };
