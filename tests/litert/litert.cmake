# The real consumers of the .tflite export (export/tflite.h). Included by
# tests/CMakeLists.txt after ort/ort.cmake (QUANTSCOPE_NODE, QUANTSCOPE_NPM).
#
# LiteRT.js: the CTest fixture `litert` — its setup test `litert_install`
# installs npm @litertjs/core (pinned in tests/litert/package.json) into the
# build tree once and checks that its WebAssembly runtime loads under Node.
# Arm NN: Debian's TfLite parser and CpuRef backend (libarmnn-dev,
# libarmnntfliteparser-dev, libarmnn-cpuref-backend22); the runner
# tests/armnn/run_tflite_armnn.cpp is built only when they are found, and the
# test uses it only then.
set(QUANTSCOPE_LITERT_DIR ${CMAKE_CURRENT_BINARY_DIR}/litert)
add_test(NAME litert_install COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/litert/install.sh ${QUANTSCOPE_LITERT_DIR})
set_tests_properties(litert_install PROPERTIES
  LABELS conformance FIXTURES_SETUP litert TIMEOUT 600
  ENVIRONMENT "QUANTSCOPE_NODE=${QUANTSCOPE_NODE};QUANTSCOPE_NPM=${QUANTSCOPE_NPM}")

find_path(QUANTSCOPE_ARMNN_INCLUDE armnnTfLiteParser/ITfLiteParser.hpp)
find_library(QUANTSCOPE_ARMNN_LIB armnn)
find_library(QUANTSCOPE_ARMNN_TFLITE_LIB armnnTfLiteParser)
find_path(QUANTSCOPE_ARMNN_BACKENDS Arm_CpuRef_backend.so PATH_SUFFIXES armnn22 armnn
          PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE} NO_DEFAULT_PATH)

quantscope_add_test(tst_export_tflite conformance quantscope_export quantscope_io quantscope_session)
target_compile_definitions(tst_export_tflite PRIVATE
  QUANTSCOPE_ZOO_DIR="${QUANTSCOPE_ZOO_DIR}"
  QUANTSCOPE_NODE="${QUANTSCOPE_NODE}"
  QUANTSCOPE_LITERT_DIR="${QUANTSCOPE_LITERT_DIR}"
  QUANTSCOPE_LITERT_SCRIPT="${CMAKE_CURRENT_SOURCE_DIR}/litert/run_tflite.mjs"
  QUANTSCOPE_PYTHON="${QUANTSCOPE_SYSTEM_PYTHON}")
set_tests_properties(tst_export_tflite PROPERTIES FIXTURES_REQUIRED "litert;zoo_models" TIMEOUT 1800)
# zooModels runs 10 models through both consumers in one test function: past Qt Test's default
# function timeout (300 s) on a loaded machine. CTest's TIMEOUT above is the bound.
set_property(TEST tst_export_tflite APPEND PROPERTY ENVIRONMENT "QTEST_FUNCTION_TIMEOUT=1700000")
if(QUANTSCOPE_ARMNN_INCLUDE AND QUANTSCOPE_ARMNN_LIB AND QUANTSCOPE_ARMNN_TFLITE_LIB AND QUANTSCOPE_ARMNN_BACKENDS)
  message(STATUS "Arm NN TfLite parser found: tst_export_tflite runs the exports on its CpuRef backend too")
  add_executable(run_tflite_armnn armnn/run_tflite_armnn.cpp)
  target_include_directories(run_tflite_armnn PRIVATE ${QUANTSCOPE_ARMNN_INCLUDE})
  target_link_libraries(run_tflite_armnn PRIVATE quantscope_io ${QUANTSCOPE_ARMNN_TFLITE_LIB} ${QUANTSCOPE_ARMNN_LIB})
  add_dependencies(tst_export_tflite run_tflite_armnn)
  target_compile_definitions(tst_export_tflite PRIVATE
    QUANTSCOPE_ARMNN_RUNNER="$<TARGET_FILE:run_tflite_armnn>"
    QUANTSCOPE_ARMNN_BACKENDS="${QUANTSCOPE_ARMNN_BACKENDS}")
else()
  message(STATUS "Arm NN TfLite parser not found: tst_export_tflite runs the exports on LiteRT.js only")
endif()
