#!/bin/sh
# Installs onnxruntime-node (the version pinned in tests/ort/package.json) into
# DEST/node_modules, for the tests that compare against ONNX Runtime. Run by the
# CTest fixture `ort_install`; does nothing when DEST already holds that version
# and its binding loads. --ignore-scripts: the Linux x64 binding ships inside the
# package, the post-install script only fetches optional GPU providers.
set -eu
dest=${1:?usage: install.sh DEST_DIR}
here=$(cd "$(dirname "$0")" && pwd)
node=${QUANTSCOPE_NODE:-node}
npm=${QUANTSCOPE_NPM:-npm}
want=$(sed -n 's/.*"onnxruntime-node": *"\([^"]*\)".*/\1/p' "$here/package.json")

loads() {
    "$node" -e "
const ort = require('$dest/node_modules/onnxruntime-node');
const v = require('$dest/node_modules/onnxruntime-node/package.json').version;
if (v !== '$want') { console.error('installed onnxruntime-node is ' + v + ', want $want'); process.exit(1); }
if (typeof ort.InferenceSession.create !== 'function') process.exit(1);
" 2>/dev/null
}

command -v "$node" >/dev/null 2>&1 || { echo "install.sh: node ('$node') not found; install Debian's nodejs and npm (packaging/install-deps.sh)" >&2; exit 1; }
mkdir -p "$dest"
if loads; then
    echo "onnxruntime-node $want already installed in $dest"
    exit 0
fi
command -v "$npm" >/dev/null 2>&1 || { echo "install.sh: npm ('$npm') not found; install Debian's npm (packaging/install-deps.sh)" >&2; exit 1; }
cp "$here/package.json" "$dest/package.json"
if ! (cd "$dest" && "$npm" install --ignore-scripts --no-audit --no-fund --no-save --loglevel=error >npm-install.log 2>&1); then
    echo "install.sh: 'npm install --ignore-scripts onnxruntime-node@$want' failed in $dest (is the npm registry reachable?):" >&2
    tail -n 20 "$dest/npm-install.log" >&2
    exit 1
fi
if ! loads; then
    echo "install.sh: onnxruntime-node $want installed in $dest but its native binding does not load:" >&2
    "$node" -e "require('$dest/node_modules/onnxruntime-node')" >&2 || true
    exit 1
fi
echo "onnxruntime-node $want installed in $dest"
