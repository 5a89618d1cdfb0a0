#!/bin/sh
# Installs the npm packages a test reference pins in PACKAGE_JSON's
# "dependencies" into DEST/node_modules, once per build tree: does nothing when
# every one of them is already there at its pinned version. NPM_FLAG... go to
# `npm install` after --ignore-scripts (no package here needs a post-install
# step: their Linux x64 binaries ship inside them), e.g. --omit=optional.
# Used by tests/ort/install.sh, tests/tokenizer/install.sh,
# tests/gguf/install.sh and tests/llm/check_tokenizer.sh, which add their own
# check that what they need loads.
set -eu
package=${1:?usage: npm_install.sh PACKAGE_JSON DEST_DIR [NPM_FLAG...]}
dest=${2:?usage: npm_install.sh PACKAGE_JSON DEST_DIR [NPM_FLAG...]}
shift 2
node=${QUANTSCOPE_NODE:-node}
npm=${QUANTSCOPE_NPM:-npm}

pinned() {
    "$node" -e "
const want = require(process.argv[1]).dependencies;
for (const [name, version] of Object.entries(want)) {
  let got = 'missing';
  try { got = require(process.argv[2] + '/node_modules/' + name + '/package.json').version; } catch (e) {}
  if (got !== version) { console.error(name + ' is ' + got + ', want ' + version); process.exit(1); }
}" "$package" "$dest" 2>"$dest/npm-check.log"
}

command -v "$node" >/dev/null 2>&1 || { echo "npm_install.sh: node ('$node') not found; install Debian's nodejs and npm (packaging/install-deps.sh)" >&2; exit 1; }
mkdir -p "$dest"
if pinned; then
    echo "$package: already installed in $dest"
    exit 0
fi
command -v "$npm" >/dev/null 2>&1 || { echo "npm_install.sh: npm ('$npm') not found; install Debian's npm (packaging/install-deps.sh)" >&2; exit 1; }
cp "$package" "$dest/package.json"
if ! (cd "$dest" && "$npm" install --ignore-scripts "$@" --no-audit --no-fund --no-save --loglevel=error >npm-install.log 2>&1); then
    echo "npm_install.sh: 'npm install' of $package failed in $dest (is the npm registry reachable?):" >&2
    tail -n 20 "$dest/npm-install.log" >&2
    exit 1
fi
if ! pinned; then
    echo "npm_install.sh: after 'npm install' in $dest the pinned versions of $package are not all there:" >&2
    cat "$dest/npm-check.log" >&2
    exit 1
fi
echo "$package: installed in $dest"
