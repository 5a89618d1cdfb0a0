#pragma once
// The versions of the libraries the engine is built with, for the app's About
// box and `--version` style reports: read from each library's version macros
// when the engine is compiled (and, where the library says it, the version it
// runs with, which a shared library can make differ). RE2 is not listed: it has
// no version macro, and Debian's pkg-config file says 0.0.0.

#include <string>
#include <vector>

namespace qs {

struct LibraryVersion {
    std::string name;     // "oneTBB", "Eigen" ...
    std::string compiled; // from the headers the engine was compiled with
    std::string running;  // from the library at run time; empty where it cannot say
};

std::vector<LibraryVersion> engineLibraryVersions();

} // namespace qs
