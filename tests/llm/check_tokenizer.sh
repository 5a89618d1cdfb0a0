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
python=${QUANTSCOPE_SYSTEM_PYTHON:-/usr/bin/python3}
sh "$here/../npm_install.sh" "$here/package.json" "$dest"
PATH="$(dirname "$(command -v "$node")"):$PATH" exec "$python" "$here/make_llama.py" --check-tokenizer "$dest/node_modules"
