#!/bin/sh
# Where one model's time goes, in our interpreter and in ONNX Runtime, on the
# same inputs: per op type (ms per run, share, node count) side by side, each
# side's total, and each side's slowest nodes.
#
# usage: tests/ort/profile_side_by_side.sh MODEL [--batch B] [--threads T] [--runs N]
#            [--level all|extended|basic|disabled] [--top K] [--build DIR] [--ort-dir DIR] [--keep DIR]
#
# Ours: `quantscope-cli bench-model MODEL --profile --json --save-inputs`
# (seeded inputs; --batch B sets a dynamic axis 0). ONNX Runtime:
# tests/ort/profile_model.js on the inputs bench-model saved, with
# enableProfiling, T intra-op threads, one inter-op thread, sequential, at
# graph optimisation level L (default all, what users get; basic leaves out
# the layout and fusion rewrites). Defaults: T 2, N 20, K 15, DIR build,
# ONNX Runtime from DIR/tests/ort (the CTest fixture ort_install puts it
# there). --keep DIR keeps the inputs and both JSON profiles in DIR.
# Op types are each runtime's own: ONNX Runtime fuses nodes (FusedConv, ...),
# so its rows need not be the model's op types.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
usage() { sed -n 's/^# usage: //p; s/^#            /            /p' "$0" | head -2 >&2; exit 2; }
[ $# -ge 1 ] || usage
model=$1
shift
build=build threads=2 runs=20 level=all top=15 ortdir= keep= batch=
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case $1 in
    --batch) batch=$2 ;;
    --threads) threads=$2 ;;
    --runs) runs=$2 ;;
    --level) level=$2 ;;
    --top) top=$2 ;;
    --build) build=$2 ;;
    --ort-dir) ortdir=$2 ;;
    --keep) keep=$2 ;;
    *) usage ;;
    esac
    shift 2
done
ortdir=${ortdir:-$build/tests/ort}
cli=$build/app/quantscope-cli
node=${QUANTSCOPE_NODE:-node}
[ -f "$model" ] || { echo "profile_side_by_side.sh: $model: no such file" >&2; exit 1; }
[ -x "$cli" ] || { echo "profile_side_by_side.sh: $cli is not built (cmake --build $build --target quantscope-cli)" >&2; exit 1; }
[ -f "$ortdir/node_modules/onnxruntime-node/package.json" ] ||
    { echo "profile_side_by_side.sh: no ONNX Runtime in $ortdir (run: ctest --test-dir $build -R ort_install)" >&2; exit 1; }

if [ -n "$keep" ]; then
    work=$keep
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/profile_side_by_side.XXXXXX")
    trap 'rm -rf "$work"' EXIT
fi
set -- --threads "$threads" --runs "$runs" --profile --top "$top" --json --save-inputs "$work/inputs"
[ -z "$batch" ] || set -- "$@" --batch-size "$batch"
"$cli" bench-model "$model" "$@" >"$work/ours.json"
"$node" "$here/profile_model.js" --ort-dir "$ortdir" --model "$model" --inputs "$work/inputs/inputs.json" \
    --threads "$threads" --runs "$runs" --level "$level" --top "$top" >"$work/ort.json"
"$node" "$here/side_by_side.js" "$work/ours.json" "$work/ort.json"
