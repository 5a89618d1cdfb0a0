# ONNX Runtime (onnxruntime-node, pinned in tests/ort/package.json) as the
# reference runtime of the tests. Included by tests/CMakeLists.txt.
#
# CTest fixture `onnxruntime`: its setup test `ort_install` installs the package
# into ${QUANTSCOPE_ORT_DIR}/node_modules (the build tree, never the sources).
# quantscope_use_ort(target) lets a test use tests/ort_support.h.

find_program(QUANTSCOPE_NODE NAMES node nodejs)
find_program(QUANTSCOPE_NPM NAMES npm)
if(NOT QUANTSCOPE_NODE)
  set(QUANTSCOPE_NODE node) # ort_install then fails saying node is missing
endif()
if(NOT QUANTSCOPE_NPM)
  set(QUANTSCOPE_NPM npm)
endif()
# Debian's python3, which holds python3-torch and python3-onnx (a pyenv or venv
# python3 first on PATH would not).
find_program(QUANTSCOPE_SYSTEM_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT QUANTSCOPE_SYSTEM_PYTHON)
  set(QUANTSCOPE_SYSTEM_PYTHON python3)
endif()

set(QUANTSCOPE_ORT_DIR ${CMAKE_CURRENT_BINARY_DIR}/ort)
set(QUANTSCOPE_ORT_MODELS ${CMAKE_CURRENT_BINARY_DIR}/ort/models)

add_test(NAME ort_install COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/ort/install.sh ${QUANTSCOPE_ORT_DIR})
set_tests_properties(ort_install PROPERTIES
  LABELS conformance FIXTURES_SETUP onnxruntime TIMEOUT 600
  ENVIRONMENT "QUANTSCOPE_NODE=${QUANTSCOPE_NODE};QUANTSCOPE_NPM=${QUANTSCOPE_NPM}")

function(quantscope_use_ort target)
  target_compile_definitions(${target} PRIVATE
    QUANTSCOPE_NODE="${QUANTSCOPE_NODE}"
    QUANTSCOPE_ORT_DIR="${QUANTSCOPE_ORT_DIR}"
    QUANTSCOPE_ORT_SCRIPT="${CMAKE_CURRENT_SOURCE_DIR}/ort/run_model.js")
  target_link_libraries(${target} PRIVATE quantscope_io)
  set_tests_properties(${target} PROPERTIES FIXTURES_REQUIRED onnxruntime)
endfunction()

# The whole-model comparison: models exported at test time into the build tree
# by the fixture `ort_models` (too large to commit).
add_test(NAME ort_models COMMAND ${QUANTSCOPE_SYSTEM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/ort/export_models.py
                                 ${QUANTSCOPE_ORT_MODELS})
set_tests_properties(ort_models PROPERTIES LABELS conformance FIXTURES_SETUP ort_models TIMEOUT 600)
quantscope_add_test(tst_ort_compare conformance quantscope_runtime quantscope_io)
quantscope_use_ort(tst_ort_compare)
target_compile_definitions(tst_ort_compare PRIVATE
  QUANTSCOPE_ORT_MODELS="${QUANTSCOPE_ORT_MODELS}"
  QUANTSCOPE_DEMO_MODEL="${PROJECT_SOURCE_DIR}/resources/demo/digits/digits_cnn.onnx")
set_tests_properties(tst_ort_compare PROPERTIES FIXTURES_REQUIRED "onnxruntime;ort_models" TIMEOUT 600)
# Conv's AVX2 kernels on whole models too, where the CPU would pick AVX-512.
add_test(NAME tst_ort_compare_avx2 COMMAND tst_ort_compare)
set_tests_properties(tst_ort_compare_avx2 PROPERTIES LABELS conformance FIXTURES_REQUIRED "onnxruntime;ort_models"
                                                     TIMEOUT 600 ENVIRONMENT "QUANTSCOPE_MAX_CPU_ISA=avx2")
