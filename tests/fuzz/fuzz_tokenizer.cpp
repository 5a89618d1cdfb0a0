// Fuzz target: tokenizer.json text through Tokenizer::fromJson. An accepted
// tokenizer must encode a fixed text and the input itself (when it is UTF-8)
// into ids it knows, and decode them without throwing.

#include "core/error.h"
#include "text/tokenizer.h"
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

void check(const qs::Tokenizer& tokenizer, std::string_view text)
{
    for (bool special : {true, false}) {
        const std::vector<int32_t> ids = tokenizer.encode(text, {.addSpecialTokens = special});
        for (int32_t id : ids)
            if (id < 0 || id >= tokenizer.vocabSize() || tokenizer.tokenText(id).empty())
                std::abort();
        tokenizer.decode(ids);
        tokenizer.decode(ids, true);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string_view json(reinterpret_cast<const char*>(data), size);
    try {
        const qs::Tokenizer tokenizer = qs::Tokenizer::fromJson(json, "fuzz.json");
        check(tokenizer,
              "Hello  world's 123456 caf\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80\t\r\n <s><|end|> ab");
        try {
            check(tokenizer, json);
        } catch (const qs::Error&) {
            // the input is not UTF-8: refused as text, which is right
        }
    } catch (const qs::Error&) {
    }
    return 0;
}
