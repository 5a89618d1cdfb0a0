#!/bin/sh
# Installs npm @huggingface/tokenizers (the version pinned in tests/llm/package.json)
# into DEST/node_modules, then has make_llama.py compare its own tokenizer (the
# one that tokenized the fixture's training and evaluation text) with it. Run by
# the CTest test `llm_tokenizer_npm`; the install is skipped when DEST already
# holds that version. Pure JavaScript: nothing to build, --ignore-scripts.
set -eu
dest=${1:?usage: check_tokenizer.sh DEST_DIR}
here=$(cd "$(dirname "$0")" && pwd)
node=${QUANTSCOPE_NODE:-node}
npm=${QUANTSCOPE_NPM:-npm}
python=${QUANTSCOPE_SYSTEM_PYTHON:-/usr/bin/python3}
want=$(sed -n 's/.*"@huggingface\/tokenizers": *"\([^"]*\)".*/\1/p' "$here/package.json")
pkg="$dest/node_modules/@huggingface/tokenizers/package.json"

installed() {
    "$node" -e "const v = require('$pkg').version; process.exit(v === '$want' ? 0 : 1);" 2>/dev/null
}

command -v "$node" >/dev/null 2>&1 || { echo "check_tokenizer.sh: node ('$node') not found; install Debian's nodejs and npm (packaging/install-deps.sh)" >&2; exit 1; }
mkdir -p "$dest"
if ! installed; then
    command -v "$npm" >/dev/null 2>&1 || { echo "check_tokenizer.sh: npm ('$npm') not found; install Debian's npm (packaging/install-deps.sh)" >&2; exit 1; }
    cp "$here/package.json" "$dest/package.json"
    if ! (cd "$dest" && "$npm" install --ignore-scripts --no-audit --no-fund --no-save --loglevel=error >npm-install.log 2>&1); then
        echo "check_tokenizer.sh: 'npm install --ignore-scripts @huggingface/tokenizers@$want' failed in $dest (is the npm registry reachable?):" >&2
        tail -n 20 "$dest/npm-install.log" >&2
        exit 1
    fi
    installed || { echo "check_tokenizer.sh: @huggingface/tokenizers $want not found in $dest after npm install" >&2; exit 1; }
fi
PATH="$(dirname "$(command -v "$node")"):$PATH" exec "$python" "$here/make_llama.py" --check-tokenizer "$dest/node_modules"
