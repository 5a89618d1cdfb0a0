#pragma once
// The one exception type of the engine. Its message is written for the user:
// it names the file, field, tensor or position and says what was expected.

#include <stdexcept>
#include <string>

namespace qs {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

} // namespace qs
