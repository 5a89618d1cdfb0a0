#pragma once
// Internal to the Keras loader: the variables read from a Keras file, and the
// builder that turns a supported `model_config` into graph nodes.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "graph/model.h"

namespace qs {

struct KerasVariable {
    std::string module;      // module path: "conv2d", "mha/query", "head/inner"
    std::string variable;    // "kernel", "bias", "gamma", ... (no ":0")
    std::string initializer; // the Model initializer's name
    std::string dataset;     // the HDF5 dataset path, for error messages
    Shape shape;
};

// The variables of one top-level Keras layer (one group of `model_weights`).
struct KerasLayerWeights {
    std::string name;
    std::string group; // HDF5 group path
    std::vector<KerasVariable> variables;

    // The variable `variable` of the layer itself (module == name), or nullptr.
    const KerasVariable* find(const std::string& variable) const;
};

// Where a quantizable weight is consumed in the graph: node and input index.
struct KerasWeightUse {
    size_t node = 0;
    size_t input = 0;
};

// Appends the nodes, inputs and outputs of the model `config` describes to
// `model` (whose initializers hold the weights) and returns where each
// quantizable kernel is used, keyed by initializer name. Returns an empty
// optional, with `whyNot` set and `model` unchanged, when the config uses
// something without a graph mapping. Throws an Error naming `file` when a
// weight contradicts the shapes flowing through the graph.
std::optional<std::map<std::string, KerasWeightUse>>
buildKerasGraph(const nlohmann::json& config, const std::map<std::string, KerasLayerWeights>& weights,
                const std::string& file, Model& model, std::string& whyNot);

} // namespace qs
