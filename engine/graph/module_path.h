#pragma once
// Module paths: the stable, unique, human-readable `/`-separated names rules
// match (DESIGN.md "Module paths"). Pure functions of names, so the same file
// always gives the same paths.

#include <string>
#include <string_view>
#include <vector>

namespace qs {

// The path an ONNX node name gives, or "" when nothing readable is left:
// strips the leading `/`, a trailing component that is the op type (`Conv`,
// `MatMul_1`), collapses the PyTorch exporter's repeated prefixes (a component
// starting with the previous component plus a dot loses that prefix:
// `layer1/layer1.0` -> `layer1/0`), drops empty components and turns the
// remaining dots into `/`.
//   "/layer1/layer1.0/conv1/Conv", "Conv" -> "layer1/0/conv1"
//   "Conv_0", "Conv" -> ""
std::string modulePathFromNodeName(std::string_view nodeName, std::string_view opType);

// The module a parameter tensor belongs to, or "": the name minus a parameter
// suffix (`.weight`, `.bias`, `_weight`, `_bias`, `.kernel`, `/kernel:0`, ...),
// dots into `/`. Exporter-generated names (containing "::", e.g.
// "onnx::Conv_193") give "" since they say nothing about the module.
//   "layer1.0.conv1.weight" -> "layer1/0/conv1"
std::string modulePathFromParameterName(std::string_view tensorName);

// A checkpoint tensor's module: the name minus its last component (components
// split at `.` and `/`), joined with `/`. A name with a single component is its
// own module.
//   "model.layers.0.self_attn.q_proj.weight" -> "model/layers/0/self_attn/q_proj"
std::string checkpointModulePath(std::string_view tensorName);

// Makes paths unique in order: the first occurrence keeps its path, later ones
// get `_1`, `_2`, ... (skipping any suffix that is itself taken). Every loader
// passes its paths through here, so this is where over-long paths are refused:
// throws Error `module path "<its first 60 characters>..." is N bytes long; ...`
// for a path longer than kMaxModulePathLength (rules/regex_syntax.h; the caller
// adds the file name).
std::vector<std::string> uniqueModulePaths(std::vector<std::string> paths);

} // namespace qs
