#pragma once
// Loads an ONNX model (.onnx, protobuf) into the model IR (graph/model.h).
//
// What is accepted:
// - Any op, in any domain: every node is loaded whether or not the runtime can
//   run it; Model::opTypes() lists them so the runtime can name the unsupported.
// - Opsets: 7 to 21 of the default domain are the supported range. A model
//   outside it still loads, with a warning on Model::warnings (the IR does not
//   depend on op semantics; the runtime decides what it can run).
// - Files up to 2 GiB (protobuf's limit); larger weights must be stored as
//   external data: `location` relative to the model's folder (no absolute paths,
//   nothing leaving the folder, symbolic links included), `offset`/`length`
//   checked against the external file's size. External data is memory-mapped,
//   not copied.
// - Initializers of every numeric element type the engine has a DType for, and
//   int4/uint4 (widened to int8/uint8) and the four float8 types (widened to
//   float32) that quantized exports hold; string and complex initializers are
//   refused with an Error.
//
// Checks run on load:
// - This loader's own: element counts against byte counts before any
//   allocation, names, node inputs produced before use (topological order).
// - ONNX's checker (libonnx). Its failure is an Error with the checker's
//   message, except (a) "No Op registered" for an op the library does not know
//   (an unknown or custom op: the model is still loaded), and (b) any failure
//   on a model whose opset is newer than the library's newest (libonnx 1.12
//   knows opset 17): the checker would judge ops by the wrong schema. Both
//   become warnings.
// - ONNX shape inference: its failure is a warning, not an error; what it infers
//   fills Model::valueInfos.
// Subgraphs (If/Loop/Scan bodies) are parsed into Model::subgraphs and their
// layers listed after the main graph's (io/onnx_subgraph.h).
// Every Error names the file and the node, initializer or attribute at fault.

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

#include "graph/model.h"

namespace qs {

struct OnnxLoadOptions {
    bool runChecker = true;        // run onnx::checker on the graph (see above for what it may reject)
    bool runShapeInference = true; // run ONNX shape inference and keep its value types
    bool loadSubgraphs = true;     // parse If/Loop/Scan bodies into Model::subgraphs and list their layers
};

// Protobuf cannot parse a message larger than this.
inline constexpr size_t kMaxOnnxProtobufBytes = size_t(2147483647);

Model loadOnnx(const std::filesystem::path& file, const OnnxLoadOptions& options = {});

// The same for bytes in memory (tests, fuzzing). `sourceName` prefixes errors;
// external data is resolved inside `folder`, and refused when `folder` is empty.
Model loadOnnxBytes(std::span<const std::byte> bytes, const std::string& sourceName,
                    const std::filesystem::path& folder = {}, const OnnxLoadOptions& options = {});

} // namespace qs
