#!/bin/sh
# Latency of the interpreter against ONNX Runtime on the models of
# tst_ort_compare (batch 2, 2 threads in both, fastest of RUNS runs after one
# warm-up; same inputs, same process run), one line per model:
#     model ours_ms ort_ms ratio
# usage: tests/ort/bench_models.sh [BUILD_DIR [RUNS]]   (defaults: build, 20)
# The build must hold tests/tst_ort_compare (cmake --build BUILD_DIR --target
# tst_ort_compare); ONNX Runtime and the exported models come from the CTest
# fixtures ort_install and ort_models, run here first.
set -eu
build=${1:-build}
runs=${2:-20}
[ -x "$build/tests/tst_ort_compare" ] || { echo "bench_models.sh: $build/tests/tst_ort_compare is not built" >&2; exit 1; }
if ! ctest --test-dir "$build" -R '^(ort_install|ort_models)$' >"${TMPDIR:-/tmp}/bench_models_fixtures.log" 2>&1; then
    echo "bench_models.sh: the fixtures ort_install / ort_models failed:" >&2
    cat "${TMPDIR:-/tmp}/bench_models_fixtures.log" >&2
    exit 1
fi
echo "model ours_ms ort_ms ratio"
QUANTSCOPE_ORT_BENCH=$runs "$build/tests/tst_ort_compare" modelsAgreeWithOnnxRuntime >"${TMPDIR:-/tmp}/bench_models.log" 2>&1 ||
    { cat "${TMPDIR:-/tmp}/bench_models.log" >&2; exit 1; }
sed -n 's/^BENCH //p' "${TMPDIR:-/tmp}/bench_models.log"
