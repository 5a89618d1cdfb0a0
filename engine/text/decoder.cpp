// The decoders of a tokenizer.json, run on the tokens of the ids to decode.

#include <cctype>
#include <cstdio>

#include "text/tokenizer_pipeline.h"

namespace qs::text {

std::string runDecoders(const Pipeline& p, std::vector<std::string> tokens)
{
    if (!p.hasDecoder) {
        std::string out;
        for (size_t i = 0; i < tokens.size(); ++i)
            out += (i ? " " : "") + tokens[i];
        return out;
    }
    const auto isAddedToken = [&](const std::string& t) { return p.addedIds.count(t) != 0; };
    for (const DecoderStep& step : p.decoders) {
        std::vector<std::string> next;
        switch (step.kind) {
        case DecoderStep::ByteLevel: {
            const ByteAlphabet& alphabet = byteAlphabet();
            std::string run;
            bool inRun = false;
            for (const std::string& t : tokens) {
                if (isAddedToken(t)) {
                    if (inRun)
                        next.push_back(std::move(run));
                    run.clear();
                    inRun = false;
                    next.push_back(t);
                    continue;
                }
                inRun = true;
                size_t pos = 0;
                while (pos < t.size()) {
                    const auto it = alphabet.byteOf.find(nextCodePoint(t, pos, "token"));
                    if (it != alphabet.byteOf.end())
                        run += char(it->second);
                }
            }
            if (inRun)
                next.push_back(std::move(run));
            break;
        }
        case DecoderStep::Replace:
            next = std::move(tokens);
            for (std::string& t : next)
                replaceAll(t, step.pattern, step.content);
            break;
        case DecoderStep::ByteFallback: {
            std::string bytes;
            for (std::string& t : tokens) {
                unsigned value = 0;
                const bool isByte = t.size() == 6 && t.starts_with("<0x") && t[5] == '>' &&
                                    std::isxdigit(static_cast<unsigned char>(t[3])) &&
                                    std::isxdigit(static_cast<unsigned char>(t[4])) &&
                                    std::sscanf(t.c_str() + 3, "%2x", &value) == 1;
                if (isByte) {
                    bytes += char(value);
                    continue;
                }
                if (!bytes.empty())
                    next.push_back(std::move(bytes));
                bytes.clear();
                next.push_back(std::move(t));
            }
            if (!bytes.empty())
                next.push_back(std::move(bytes));
            break;
        }
        case DecoderStep::Fuse: {
            std::string all;
            for (const std::string& t : tokens)
                all += t;
            next.push_back(std::move(all));
            break;
        }
        case DecoderStep::Strip:
            next = std::move(tokens);
            for (std::string& t : next) {
                const std::string& c = step.pattern;
                int cut = 0;
                while (cut < step.start && t.size() >= c.size() * size_t(cut + 1) &&
                       t.compare(c.size() * size_t(cut), c.size(), c) == 0)
                    ++cut;
                t.erase(0, c.size() * size_t(cut));
                for (int i = 0; i < step.stop && t.size() >= c.size() && t.ends_with(c); ++i)
                    t.resize(t.size() - c.size());
            }
            break;
        case DecoderStep::Metaspace:
            next = std::move(tokens);
            for (size_t i = 0; i < next.size(); ++i) {
                replaceAll(next[i], step.pattern, " ");
                if (i == 0 && next[i].starts_with(' '))
                    next[i].erase(0, 1);
            }
            break;
        }
        tokens = std::move(next);
    }
    std::string out;
    for (const std::string& t : tokens)
        out += t;
    return out;
}

} // namespace qs::text
