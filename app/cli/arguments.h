#pragma once
// Command-line arguments of one quantscope-cli command: the options it declares,
// parsed strictly. An unknown option, a missing value, a repeated option, a
// stray positional argument or a value that is not what the option takes is a
// UsageError (exit status 2); what the values mean for the data (an unknown
// qtype, a missing file) is for the command to judge (qs::Error, exit 1).

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace qs::cli {

// Bad usage: the message says what is wrong; main() adds the command's usage line.
class UsageError : public std::runtime_error {
public:
    explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

struct OptionSpec {
    std::string name;                 // "--qtype"
    std::string valueName;            // "Q"; empty for a flag
    std::string help;                 // one line
    std::vector<std::string> choices; // when not empty, the only values accepted
    bool required = false;
    bool repeatable = false; // may be given several times (values() returns them in order)
};

struct CommandSpec {
    std::string name;     // "fake-quant"
    std::string summary;  // one line for the command list
    std::string synopsis; // "fake-quant --npy IN --qtype Q ..."
    std::vector<OptionSpec> options;
    std::string positionalName; // "MODEL"; empty when the command takes none
    size_t positionalCount = 1; // how many positional arguments it takes at most
    std::string notes;          // paragraphs printed after the options in --help
};

// The --help text of a command, generated from its spec.
std::string helpText(const CommandSpec& spec);

class Arguments {
public:
    // Parses argv (the arguments after the command name). Throws UsageError.
    Arguments(const CommandSpec& spec, std::span<const std::string> argv);

    bool helpRequested() const { return help_; }
    bool flag(const std::string& name) const { return values_.count(name) != 0; }
    std::optional<std::string> value(const std::string& name) const;
    // The value of an option, or `fallback` when it was not given.
    std::string valueOr(const std::string& name, const std::string& fallback) const;
    // Every value of a repeatable option, in command-line order.
    std::vector<std::string> values(const std::string& name) const;
    const std::vector<std::string>& positionals() const { return positionals_; }

    // Typed values; a value that does not parse is a UsageError naming the option.
    std::optional<int64_t> integer(const std::string& name, int64_t min, int64_t max) const;
    std::optional<uint64_t> unsignedInteger(const std::string& name) const;
    std::optional<double> number(const std::string& name) const;

private:
    const CommandSpec& spec_;
    std::map<std::string, std::string> values_; // flags map to ""; a repeatable option: its last value
    std::map<std::string, std::vector<std::string>> repeated_;
    std::vector<std::string> positionals_;
    bool help_ = false;
};

} // namespace qs::cli
