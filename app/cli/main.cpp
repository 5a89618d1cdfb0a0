// quantscope-cli: dispatches to one command and maps its outcome to an exit
// status: 0 success, 1 a user error (one line on stderr), 2 bad usage.
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/allocator.h"
#include "core/error.h"

using namespace qs::cli;

namespace {

const std::vector<Command>& commands()
{
    static const std::vector<Command> list{
        inspectCommand(),        runCommand(),   quantizeCommand(),  fakeQuantCommand(),
        compareMethodsCommand(), compareRulesCommand(), benchCommand(), benchModelCommand()};
    return list;
}

std::string programHelp()
{
    std::string text = "usage: quantscope-cli --version\n";
    for (const Command& c : commands())
        text += "       quantscope-cli " + c.spec.synopsis + "\n";
    text += "\nCommands:\n";
    for (const Command& c : commands())
        text += "  " + c.spec.name + std::string(18 - c.spec.name.size(), ' ') + c.spec.summary + "\n";
    text += "\nRun 'quantscope-cli COMMAND --help' for a command's options.\n"
            "Exit status: 0 success, 1 a user error (bad file, value or tensor), 2 bad usage.\n";
    return text;
}

// Keeps a user-error message on one line.
std::string oneLine(std::string s)
{
    for (char& c : s)
        if (c == '\n' || c == '\r')
            c = ' ';
    return s;
}

} // namespace

namespace qs::cli {
const std::vector<Command>& allCommands()
{
    return commands();
}
} // namespace qs::cli

int main(int argc, char** argv)
{
    qs::keepFreedMemoryForReuse();
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) {
        std::fputs(programHelp().c_str(), stderr);
        return kExitUsage;
    }
    if (args[0] == "--version") {
        std::printf("quantscope-cli %s\n", QUANTSCOPE_VERSION);
        return kExitOk;
    }
    if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
        std::fputs(programHelp().c_str(), stdout);
        return kExitOk;
    }
    const Command* command = nullptr;
    for (const Command& c : commands())
        if (c.spec.name == args[0])
            command = &c;
    if (!command) {
        std::fprintf(stderr, "quantscope-cli: unknown command '%s'\nusage: quantscope-cli --version | %s",
                     args[0].c_str(), "COMMAND [OPTIONS] (see 'quantscope-cli --help')\n");
        return kExitUsage;
    }
    try {
        const Arguments parsed(command->spec, std::span(args).subspan(1));
        if (parsed.helpRequested()) {
            std::fputs(helpText(command->spec).c_str(), stdout);
            return kExitOk;
        }
        return command->run(parsed);
    } catch (const UsageError& e) {
        std::fprintf(stderr, "quantscope-cli %s: %s\nusage: quantscope-cli %s\n", command->spec.name.c_str(), e.what(),
                     command->spec.synopsis.c_str());
        return kExitUsage;
    } catch (const qs::Error& e) {
        std::fprintf(stderr, "quantscope-cli %s: error: %s\n", command->spec.name.c_str(), oneLine(e.what()).c_str());
        return kExitUserError;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "quantscope-cli %s: error: out of memory\n", command->spec.name.c_str());
        return kExitUserError;
    } catch (const std::exception& e) {
        // Not a qs::Error: a check the engine is missing. Say so, and on what, rather
        // than pass on a bare library message ("map::at").
        std::string subject;
        for (size_t i = 1; i < args.size() && subject.empty(); ++i)
            if (args[i] == "--npy" && i + 1 < args.size())
                subject = args[i + 1];
            else if (!args[i].starts_with("-") && !args[i - 1].starts_with("-"))
                subject = args[i];
        std::fprintf(stderr, "quantscope-cli %s: error: internal error while running %s%s: %s\n",
                     command->spec.name.c_str(), command->spec.name.c_str(),
                     subject.empty() ? "" : (" on " + subject).c_str(), oneLine(e.what()).c_str());
        return kExitUserError;
    }
}
