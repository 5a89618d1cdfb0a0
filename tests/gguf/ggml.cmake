# llama.cpp's ggml (npm @node-llama-cpp/linux-x64, pinned in tests/gguf/package.json)
# as the reference for the GGUF block formats. Included by tests/CMakeLists.txt.
#
# CTest fixture `ggml`: its setup test `ggml_install` installs the package into
# ${QUANTSCOPE_GGML_DIR}/node_modules (the build tree, never the sources), once
# per build tree. tst_gguf_blocks dlopens its libggml-base.so.

find_program(QUANTSCOPE_NPM NAMES npm)
if(NOT QUANTSCOPE_NPM)
  set(QUANTSCOPE_NPM npm) # ggml_install then fails saying npm is missing
endif()

set(QUANTSCOPE_GGML_DIR ${CMAKE_CURRENT_BINARY_DIR}/ggml)
set(QUANTSCOPE_GGML_LIBRARY ${QUANTSCOPE_GGML_DIR}/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so)

add_test(NAME ggml_install COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gguf/install.sh ${QUANTSCOPE_GGML_DIR})
set_tests_properties(ggml_install PROPERTIES
  LABELS conformance FIXTURES_SETUP ggml TIMEOUT 600
  ENVIRONMENT "QUANTSCOPE_NPM=${QUANTSCOPE_NPM}")

quantscope_add_test(tst_gguf_blocks conformance quantscope_quantization quantscope_graph ${CMAKE_DL_LIBS})
target_compile_definitions(tst_gguf_blocks PRIVATE QUANTSCOPE_GGML_LIBRARY="${QUANTSCOPE_GGML_LIBRARY}")
set_tests_properties(tst_gguf_blocks PROPERTIES FIXTURES_REQUIRED ggml TIMEOUT 600)

