#!/bin/sh
# Installs onnxruntime-node (the version pinned in tests/ort/package.json) into
# DEST/node_modules, for the tests that compare against ONNX Runtime, and checks
# that its native binding loads. Run by the CTest fixture `ort_install`.
set -eu
dest=${1:?usage: install.sh DEST_DIR}
here=$(cd "$(dirname "$0")" && pwd)
node=${QUANTSCOPE_NODE:-node}
sh "$here/../npm_install.sh" "$here/package.json" "$dest"
if ! "$node" -e "
const ort = require(process.argv[1] + '/node_modules/onnxruntime-node');
if (typeof ort.InferenceSession.create !== 'function') process.exit(1);" "$dest"; then
    echo "install.sh: onnxruntime-node is installed in $dest but its native binding does not load" >&2
    exit 1
fi
