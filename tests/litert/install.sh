#!/bin/sh
# Installs LiteRT.js (@litertjs/core, pinned in tests/litert/package.json) into
# DEST/node_modules for the tests that run our .tflite exports, and checks that
# its WebAssembly runtime loads under Node (run_tflite.mjs's shim). Run by the
# CTest fixture `litert_install`.
set -eu
dest=${1:?usage: install.sh DEST_DIR}
here=$(cd "$(dirname "$0")" && pwd)
node=${QUANTSCOPE_NODE:-node}
sh "$here/../npm_install.sh" "$here/package.json" "$dest"
if ! "$node" --input-type=module -e "
import path from 'node:path'; import fs from 'node:fs'; import vm from 'node:vm'; import { createRequire } from 'node:module';
const dest = path.resolve(process.argv[1]);
const wasm = path.join(dest, 'node_modules/@litertjs/core/wasm');
globalThis.self = globalThis; globalThis.require = createRequire(path.join(dest, 'package.json'));
globalThis.importScripts = (u) => vm.runInThisContext(fs.readFileSync(u.toString(), 'utf8'));
globalThis.Module = { locateFile: (f) => path.join(wasm, f) }; globalThis.__dirname = wasm;
const litert = await import(path.join(dest, 'node_modules/@litertjs/core/dist/index.js'));
await litert.loadLiteRt(wasm + '/');
process.exit(0);" "$dest"; then
    echo "install.sh: @litertjs/core is installed in $dest but its WebAssembly runtime does not load under Node" >&2
    exit 1
fi
