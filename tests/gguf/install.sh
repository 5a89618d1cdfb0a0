#!/bin/sh
# Installs @node-llama-cpp/linux-x64 and node-llama-cpp (the versions pinned in
# tests/gguf/package.json) into DEST/node_modules, for the tests that compare our
# GGUF block encoders with llama.cpp's own ggml (bins/linux-x64/libggml-base.so,
# which exports ggml's reference quantizers and GGUF reader) and run our GGUF
# exports in llama.cpp (tests/gguf/perplexity.js). Run by the CTest fixture
# `ggml_install`. --omit=optional skips node-llama-cpp's GPU builds; the CPU
# library ships inside @node-llama-cpp/linux-x64.
set -eu
dest=${1:?usage: install.sh DEST_DIR}
here=$(cd "$(dirname "$0")" && pwd)
sh "$here/../npm_install.sh" "$here/package.json" "$dest" --omit=optional
lib="$dest/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"
if [ ! -f "$lib" ]; then
    echo "install.sh: @node-llama-cpp/linux-x64 is installed in $dest but $lib is missing" >&2
    exit 1
fi
