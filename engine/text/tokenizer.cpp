#include "text/tokenizer.h"

#include <algorithm>
#include <fstream>

#include "core/error.h"
#include "text/tokenizer_pipeline.h"

namespace qs {

using namespace text;

namespace {

std::string normalize(const Pipeline& p, std::string_view text)
{
    std::string s(text);
    for (const NormalizerStep& step : p.normalizers) {
        switch (step.kind) {
        case NormalizerStep::Unicode:
            s = normalized(s, step.form);
            break;
        case NormalizerStep::Prepend:
            s.insert(0, step.text);
            break;
        case NormalizerStep::Replace:
            replaceAll(s, step.text, step.content);
            break;
        }
    }
    return s;
}

std::vector<std::string> preTokenize(const Pipeline& p, std::string_view text, size_t sectionIndex)
{
    std::vector<std::string> words{std::string(text)};
    std::vector<std::string_view> pieces;
    for (const PreTokenizerStep& step : p.preTokenizers) {
        std::vector<std::string> next;
        for (std::string& word : words) {
            switch (step.kind) {
            case PreTokenizerStep::Split:
                pieces.clear();
                splitIsolated(word, step.pattern, pieces);
                for (std::string_view piece : pieces)
                    next.emplace_back(piece);
                break;
            case PreTokenizerStep::ByteLevel: {
                if (step.addPrefixSpace && (word.empty() || word[0] != ' '))
                    word.insert(word.begin(), ' ');
                pieces.clear();
                if (step.useRegex)
                    splitIsolated(word, SplitPattern::Gpt2, pieces);
                else
                    pieces.push_back(word);
                const ByteAlphabet& alphabet = byteAlphabet();
                for (std::string_view piece : pieces) {
                    std::string mapped;
                    mapped.reserve(piece.size() * 2);
                    for (char c : piece)
                        mapped += alphabet.utf8[static_cast<unsigned char>(c)];
                    next.push_back(std::move(mapped));
                }
                break;
            }
            case PreTokenizerStep::Metaspace: {
                replaceAll(word, " ", step.replacement);
                const bool prepend = step.prepend == PreTokenizerStep::Always ||
                                     (step.prepend == PreTokenizerStep::First && sectionIndex == 0);
                if (prepend && !word.starts_with(step.replacement))
                    word.insert(0, step.replacement);
                next.push_back(std::move(word));
                break;
            }
            }
        }
        words = std::move(next);
    }
    return words;
}

// The code point that ends `s` (valid UTF-8, not empty).
char32_t lastCodePoint(std::string_view s, size_t& start)
{
    start = s.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
        --start;
    size_t pos = start;
    return nextCodePoint(s, pos, "text");
}

// Removes whitespace (White_Space) from the end or the start of a part, for
// added tokens with lstrip or rstrip.
std::string_view trimmedEnd(std::string_view s)
{
    while (!s.empty()) {
        size_t start = 0;
        if (!isWhiteSpace(lastCodePoint(s, start)))
            break;
        s = s.substr(0, start);
    }
    return s;
}

std::string_view trimmedStart(std::string_view s)
{
    while (!s.empty()) {
        size_t pos = 0;
        if (!isWhiteSpace(nextCodePoint(s, pos, "text")))
            break;
        s = s.substr(pos);
    }
    return s;
}

void applyStrips(const Pipeline& p, std::vector<AddedTokenMatcher::Part>& parts)
{
    for (size_t i = 0; i < parts.size(); ++i) {
        if (parts[i].added < 0)
            continue;
        const AddedToken& token = p.added[size_t(parts[i].added)];
        if (token.lstrip && i > 0 && parts[i - 1].added < 0)
            parts[i - 1].text = trimmedEnd(parts[i - 1].text);
        if (token.rstrip && i + 1 < parts.size() && parts[i + 1].added < 0)
            parts[i + 1].text = trimmedStart(parts[i + 1].text);
    }
}

} // namespace

void AddedTokenMatcher::add(const std::string& content, int32_t addedIndex, bool singleWord)
{
    if (content.empty())
        return;
    byContent_.emplace(content, Entry{addedIndex, singleWord});
    if (std::find(lengths_.begin(), lengths_.end(), content.size()) == lengths_.end()) {
        lengths_.push_back(content.size());
        std::sort(lengths_.begin(), lengths_.end(), std::greater<>());
    }
    firstBytes_[static_cast<unsigned char>(content[0])] = true;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Part>& parts) const
{
    size_t start = 0;
    size_t i = 0;
    while (i < text.size()) {
        const Entry* found = nullptr;
        size_t foundLength = 0;
        if (firstBytes_[static_cast<unsigned char>(text[i])]) {
            for (size_t length : lengths_) {
                if (length > text.size() - i)
                    continue;
                const auto it = byContent_.find(text.substr(i, length));
                if (it != byContent_.end()) {
                    found = &it->second;
                    foundLength = length;
                    break;
                }
            }
        }
        if (!found) {
            ++i;
            continue;
        }
        if (found->singleWord) {
            size_t ignored = 0;
            const bool wordBefore = i > 0 && isWordCharacter(lastCodePoint(text.substr(0, i), ignored));
            size_t after = i + foundLength;
            const bool wordAfter = after < text.size() && isWordCharacter(nextCodePoint(text, after, "text"));
            if (wordBefore || wordAfter) {
                i += foundLength; // stays text; the search resumes after it
                continue;
            }
        }
        if (i > start)
            parts.push_back({text.substr(start, i - start), -1});
        parts.push_back({text.substr(i, foundLength), found->added});
        i += foundLength;
        start = i;
    }
    if (start < text.size())
        parts.push_back({text.substr(start), -1});
}

Tokenizer::Tokenizer(std::unique_ptr<Pipeline> pipeline) : pipeline_(std::move(pipeline)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::fromJson(std::string_view json, const std::string& name, std::string_view configJson)
{
    return Tokenizer(readPipeline(json, name, configJson));
}

namespace {

std::string readWholeFile(const std::filesystem::path& path, uintmax_t limit)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw Error(path.string() + ": not a readable file");
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec)
        throw Error(path.string() + ": " + ec.message());
    if (size > limit)
        throw Error(path.string() + ": " + std::to_string(size) + " bytes, more than a tokenizer file may hold (" +
                    std::to_string(limit) + ")");
    std::ifstream in(path, std::ios::binary);
    std::string text(size_t(size), '\0');
    if (!in.read(text.data(), std::streamsize(size)))
        throw Error(path.string() + ": cannot be read");
    return text;
}

} // namespace

Tokenizer Tokenizer::load(const std::filesystem::path& path)
{
    // The largest published tokenizer.json files are a few tens of MB (Gemma's,
    // about 33 MB). Parsing takes about ten times the file in memory, so the
    // limit keeps a hostile file under about 1.5 GB.
    constexpr uintmax_t maxTokenizerBytes = uintmax_t(128) << 20;
    const std::string json = readWholeFile(path, maxTokenizerBytes);
    const std::filesystem::path configPath = path.parent_path() / "tokenizer_config.json";
    std::string config;
    std::error_code ec;
    if (std::filesystem::exists(configPath, ec))
        config = readWholeFile(configPath, maxTokenizerBytes);
    return Tokenizer(readPipeline(json, path.string(), config));
}

std::vector<int32_t> Tokenizer::encode(std::string_view utf8, EncodeOptions options) const
{
    const Pipeline& p = *pipeline_;
    checkUtf8(utf8, "text");
    std::vector<int32_t> ids;
    ids.reserve(utf8.size() / 3 + 4);
    if (options.addSpecialTokens)
        ids.insert(ids.end(), p.prefix.begin(), p.prefix.end());

    std::vector<AddedTokenMatcher::Part> sections;
    p.rawMatcher.split(utf8, sections);
    applyStrips(p, sections);
    std::vector<AddedTokenMatcher::Part> subsections;
    std::vector<std::string_view> views;
    for (size_t si = 0; si < sections.size(); ++si) {
        const AddedTokenMatcher::Part& section = sections[si];
        if (section.text.empty())
            continue;
        if (section.added >= 0) {
            ids.push_back(p.added[size_t(section.added)].id);
            continue;
        }
        const std::string text = normalize(p, section.text);
        if (text.empty())
            continue;
        subsections.clear();
        p.normalizedMatcher.split(text, subsections);
        applyStrips(p, subsections);
        for (const AddedTokenMatcher::Part& sub : subsections) {
            if (sub.text.empty())
                continue;
            if (sub.added >= 0) {
                ids.push_back(p.added[size_t(sub.added)].id);
                continue;
            }
            const std::vector<std::string> words = preTokenize(p, sub.text, si);
            views.assign(words.begin(), words.end());
            p.model.encodeWords(views, ids);
        }
    }
    if (options.addSpecialTokens)
        ids.insert(ids.end(), p.suffix.begin(), p.suffix.end());
    return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skipSpecialTokens) const
{
    const Pipeline& p = *pipeline_;
    std::vector<std::string> tokens;
    std::vector<bool> isAdded;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
        if (id < 0 || size_t(id) >= p.tokens.size() || p.tokens[size_t(id)].empty())
            throw Error(p.name + ": token id " + std::to_string(id) + " is not in the vocabulary (" +
                        std::to_string(p.tokens.size()) + " ids)");
        if (skipSpecialTokens && p.special[size_t(id)])
            continue;
        tokens.push_back(p.tokens[size_t(id)]);
    }
    return runDecoders(p, std::move(tokens));
}

int32_t Tokenizer::vocabSize() const
{
    return int32_t(pipeline_->tokens.size());
}

std::string_view Tokenizer::tokenText(int32_t id) const
{
    if (id < 0 || size_t(id) >= pipeline_->tokens.size())
        return {};
    return pipeline_->tokens[size_t(id)];
}

std::optional<int32_t> Tokenizer::idOf(std::string_view token) const
{
    const auto added = pipeline_->addedIds.find(std::string(token));
    if (added != pipeline_->addedIds.end())
        return added->second;
    const int32_t id = pipeline_->model.idOf(token);
    return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

std::optional<int32_t> Tokenizer::bosId() const
{
    return pipeline_->bos;
}

std::optional<int32_t> Tokenizer::eosId() const
{
    return pipeline_->eos;
}

} // namespace qs
