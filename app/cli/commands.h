#pragma once
// The commands of quantscope-cli: each is a spec (options, help) and a function
// that runs it and returns the exit status. One file per command.

#include <functional>
#include <vector>

#include "cli/arguments.h"

namespace qs::cli {

// Exit statuses (DESIGN.md, "Command line").
inline constexpr int kExitOk = 0;
inline constexpr int kExitUserError = 1; // bad file, bad value: one line on stderr naming it
inline constexpr int kExitUsage = 2;     // bad command line

struct Command {
    CommandSpec spec;
    std::function<int(const Arguments&)> run; // throws qs::Error for user errors
};

Command inspectCommand();
Command runCommand();
Command quantizeCommand();
Command fakeQuantCommand();
Command compareMethodsCommand();
Command compareRulesCommand();
Command benchCommand();
Command benchModelCommand();

// Every command, in the order --help lists them.
const std::vector<Command>& allCommands();

} // namespace qs::cli
