#!/bin/sh
# Installs @node-llama-cpp/linux-x64 and node-llama-cpp (the versions pinned in
# tests/gguf/package.json) into DEST/node_modules, for the tests that compare our
# GGUF block encoders with llama.cpp's own ggml (bins/linux-x64/libggml-base.so,
# which exports ggml's reference quantizers and GGUF reader) and run our GGUF
# exports in llama.cpp (tests/gguf/perplexity.js). Run by the CTest fixture `ggml_install`; does nothing
# when DEST already holds that version. --omit=optional skips node-llama-cpp's
# GPU builds, --ignore-scripts its post-install download: the CPU library ships
# inside the package.
set -eu
dest=${1:?usage: install.sh DEST_DIR}
here=$(cd "$(dirname "$0")" && pwd)
npm=${QUANTSCOPE_NPM:-npm}
want=$(sed -n 's/.*"@node-llama-cpp\/linux-x64": *"\([^"]*\)".*/\1/p' "$here/package.json")
pkg="$dest/node_modules/@node-llama-cpp/linux-x64"
lib="$pkg/bins/linux-x64/libggml-base.so"

installed() {
    [ -f "$pkg/package.json" ] && [ -f "$lib" ] && [ -f "$dest/node_modules/node-llama-cpp/dist/index.js" ] &&
        [ "$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pkg/package.json" | head -n 1)" = "$want" ]
}

mkdir -p "$dest"
if installed; then
    echo "@node-llama-cpp/linux-x64 $want already installed in $dest"
    exit 0
fi
command -v "$npm" >/dev/null 2>&1 || { echo "install.sh: npm ('$npm') not found; install Debian's npm (packaging/install-deps.sh)" >&2; exit 1; }
cp "$here/package.json" "$dest/package.json"
if ! (cd "$dest" && "$npm" install --omit=optional --ignore-scripts --no-audit --no-fund --no-save --loglevel=error >npm-install.log 2>&1); then
    echo "install.sh: 'npm install --omit=optional --ignore-scripts @node-llama-cpp/linux-x64@$want' failed in $dest (is the npm registry reachable?):" >&2
    tail -n 20 "$dest/npm-install.log" >&2
    exit 1
fi
if ! installed; then
    echo "install.sh: @node-llama-cpp/linux-x64 $want installed in $dest but $lib is missing" >&2
    exit 1
fi
echo "@node-llama-cpp/linux-x64 $want installed in $dest"
