#!/bin/sh
# The interpreter against ONNX Runtime across the model zoo's architectures, at
# batch 1 and 8, 2 threads in both, round by round interleaved
# (tests/bench/bench_zoo; docs/benchmarks.md says what it measures).
#
# usage: tests/ort/bench_models.sh [BUILD_DIR [RUNS]] [bench_zoo options...]
#        (defaults: build, 20; e.g. --models resnet18,detection_head --batch 8 --json)
#
# The build must hold tests/bench_zoo (cmake --build BUILD_DIR --target bench_zoo).
# ONNX Runtime comes from the CTest fixture ort_install, run here first; the
# zoo with a dynamic batch from tests/zoo/make_zoo.py --dynamic-batch, written
# into BUILD_DIR/tests/zoo_dynamic_batch (kept while up to date).
# Until the zoo benchmark, this script timed tst_ort_compare's models
# (docs/benchmarks.md's earlier rounds); that is still
#     QUANTSCOPE_ORT_BENCH=RUNS BUILD_DIR/tests/tst_ort_compare modelsAgreeWithOnnxRuntime
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=build
runs=20
case ${1:-} in -*|'') ;; *) build=$1; shift ;; esac
case ${1:-} in -*|'') ;; *) runs=$1; shift ;; esac
log=${TMPDIR:-/tmp}/bench_models.$$.log
trap 'rm -f "$log"' EXIT
[ -x "$build/tests/bench_zoo" ] || { echo "bench_models.sh: $build/tests/bench_zoo is not built" >&2; exit 1; }
if ! ctest --test-dir "$build" -R '^ort_install$' >"$log" 2>&1; then
    echo "bench_models.sh: the fixture ort_install failed:" >&2
    cat "$log" >&2
    exit 1
fi
if ! /usr/bin/python3 "$here/../zoo/make_zoo.py" --dynamic-batch "$build/tests/zoo_dynamic_batch" >"$log" 2>&1; then
    echo "bench_models.sh: tests/zoo/make_zoo.py --dynamic-batch failed:" >&2
    cat "$log" >&2
    exit 1
fi
"$build/tests/bench_zoo" --zoo "$build/tests/zoo_dynamic_batch" --runs "$runs" "$@"
