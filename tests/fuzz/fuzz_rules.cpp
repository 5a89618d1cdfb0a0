// Fuzz target: rule-file text through RuleSet::fromJson. An accepted rule set
// must survive a round trip: toJson() parsed again is the same RuleSet.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include "core/error.h"
#include "rules/ruleset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    try {
        const qs::RuleSet rules = qs::RuleSet::fromJson(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
        if (qs::RuleSet::fromJson(rules.toJson(), "round-trip.json") != rules)
            std::abort();
    } catch (const qs::Error&) {
    }
    return 0;
}
