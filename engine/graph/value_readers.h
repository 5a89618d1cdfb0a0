#pragma once
// Who reads each value of a graph: what the rewrites of the float model
// (equalization, smoothing) check before they change a producer or a weight,
// since a value read elsewhere would see the change too.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/model.h"

namespace qs {

// Every value of the main graph that a node reads, with its readers: (node index, input index).
using ValueReaders = std::map<std::string, std::vector<std::pair<size_t, size_t>>>;

ValueReaders valueReaders(const Model& model);

// How many node inputs read `value` (0 when none does).
size_t readerCount(const ValueReaders& readers, const std::string& value);

// Whether `value` is one of the model's graph outputs.
bool isGraphOutput(const Model& model, const std::string& value);

} // namespace qs
