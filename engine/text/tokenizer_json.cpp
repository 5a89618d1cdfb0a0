// Reading tokenizer.json into a Pipeline. Every field is checked before use;
// anything this tokenizer does not implement is refused by name rather than
// approximated.

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/tokenizer_pipeline.h"

namespace qs::text {

namespace {

using Json = nlohmann::json;

class Reader {
public:
    Reader(std::string name, size_t fileBytes) : name_(std::move(name)), fileBytes_(fileBytes) {}

    [[noreturn]] void fail(const std::string& field, const std::string& what) const
    {
        throw Error(name_ + ": " + field + ": " + what);
    }

    static std::string shown(const Json& v)
    {
        std::string text = v.dump();
        if (text.size() > 60)
            text = text.substr(0, 57) + "...";
        return std::string(v.type_name()) + " " + text;
    }

    const Json& member(const Json& object, const std::string& /*field*/, const char* key) const
    {
        static const Json null;
        const auto it = object.find(key);
        return it == object.end() ? null : *it;
    }

    const std::string& string(const Json& v, const std::string& field) const
    {
        if (!v.is_string())
            fail(field, "expected a string, got " + shown(v));
        return v.get_ref<const std::string&>();
    }

    bool boolean(const Json& v, const std::string& field, bool fallback) const
    {
        if (v.is_null())
            return fallback;
        if (!v.is_boolean())
            fail(field, "expected true or false, got " + shown(v));
        return v.get<bool>();
    }

    // A token id: a non-negative integer below the file's size in bytes (each
    // id is written in the file, so no honest file has a larger one; this
    // bounds the id table).
    int32_t id(const Json& v, const std::string& field) const
    {
        if (!v.is_number_integer())
            fail(field, "expected a token id (an integer), got " + shown(v));
        const auto value = v.get<int64_t>();
        if (value < 0 || uint64_t(value) >= fileBytes_ || value > std::numeric_limits<int32_t>::max())
            fail(field, "token id " + std::to_string(value) + " is out of range (a file of " +
                            std::to_string(fileBytes_) + " bytes)");
        return int32_t(value);
    }

    void utf8(const std::string& s, const std::string& field) const
    {
        try {
            checkUtf8(s, "string");
        } catch (const Error&) {
            fail(field, "not valid UTF-8");
        }
    }

    const std::string& name() const { return name_; }

private:
    std::string name_;
    size_t fileBytes_;
};

// Sequences inside Sequences: real files nest one deep; the limit keeps a
// hostile file from recursing through the stack.
constexpr size_t maxSequenceDepth = 8;

void checkDepth(const Reader& r, const std::string& field)
{
    if (size_t(std::count(field.begin(), field.end(), '[')) > maxSequenceDepth)
        r.fail(field, "Sequences nested more than " + std::to_string(maxSequenceDepth) + " deep");
}

std::string typeOf(const Reader& r, const Json& v, const std::string& field)
{
    checkDepth(r, field);
    if (!v.is_object())
        r.fail(field, "expected an object, got " + Reader::shown(v));
    return r.string(r.member(v, field + ".type", "type"), field + ".type");
}

// The String of a {"String": ...} pattern; a Regex pattern is refused.
std::string stringPattern(const Reader& r, const Json& v, const std::string& field)
{
    if (!v.is_object())
        r.fail(field, "expected an object, got " + Reader::shown(v));
    if (v.contains("String"))
        return r.string(v["String"], field + ".String");
    if (v.contains("Regex"))
        r.fail(field + ".Regex", "regex patterns are not supported here (only a String pattern)");
    r.fail(field, "expected {\"String\": ...}");
}

void readNormalizer(const Reader& r, const Json& v, const std::string& field, std::vector<NormalizerStep>& steps)
{
    if (v.is_null())
        return;
    const std::string type = typeOf(r, v, field);
    NormalizerStep step;
    if (type == "Sequence") {
        const Json& list = r.member(v, field, "normalizers");
        if (!list.is_array())
            r.fail(field + ".normalizers", "expected a list, got " + Reader::shown(list));
        for (size_t i = 0; i < list.size(); ++i)
            readNormalizer(r, list[i], field + ".normalizers[" + std::to_string(i) + "]", steps);
        return;
    } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
        step.kind = NormalizerStep::Unicode;
        step.form = type == "NFC"    ? NormalForm::Nfc
                    : type == "NFD"  ? NormalForm::Nfd
                    : type == "NFKC" ? NormalForm::Nfkc
                                     : NormalForm::Nfkd;
    } else if (type == "Prepend") {
        step.kind = NormalizerStep::Prepend;
        step.text = r.string(r.member(v, field, "prepend"), field + ".prepend");
        r.utf8(step.text, field + ".prepend");
    } else if (type == "Replace") {
        step.kind = NormalizerStep::Replace;
        step.text = stringPattern(r, r.member(v, field, "pattern"), field + ".pattern");
        step.content = r.string(r.member(v, field, "content"), field + ".content");
        r.utf8(step.text, field + ".pattern");
        r.utf8(step.content, field + ".content");
        if (step.text.empty())
            r.fail(field + ".pattern", "an empty String pattern");
    } else {
        r.fail(field + ".type", "normalizer \"" + type +
                                    "\" is not supported (NFC, NFD, NFKC, NFKD, Prepend, Replace and Sequence are)");
    }
    steps.push_back(std::move(step));
}

void readPreTokenizer(const Reader& r, const Json& v, const std::string& field, std::vector<PreTokenizerStep>& steps)
{
    if (v.is_null())
        return;
    const std::string type = typeOf(r, v, field);
    PreTokenizerStep step;
    if (type == "Sequence") {
        const Json& list = r.member(v, field, "pretokenizers");
        if (!list.is_array())
            r.fail(field + ".pretokenizers", "expected a list, got " + Reader::shown(list));
        for (size_t i = 0; i < list.size(); ++i)
            readPreTokenizer(r, list[i], field + ".pretokenizers[" + std::to_string(i) + "]", steps);
        return;
    } else if (type == "Split") {
        step.kind = PreTokenizerStep::Split;
        const Json& pattern = r.member(v, field, "pattern");
        if (!pattern.is_object() || !pattern.contains("Regex"))
            r.fail(field + ".pattern", "expected {\"Regex\": ...}, got " + Reader::shown(pattern));
        const std::string& regex = r.string(pattern["Regex"], field + ".pattern.Regex");
        const auto known = recognizedSplitPattern(regex);
        if (!known)
            r.fail(field + ".pattern.Regex",
                   "the split pattern " + Reader::shown(pattern["Regex"]) +
                       " is not one this tokenizer implements (GPT-2's, Llama 3's, Qwen 2's)");
        step.pattern = *known;
        const Json& behavior = r.member(v, field, "behavior");
        if (r.string(behavior, field + ".behavior") != "Isolated")
            r.fail(field + ".behavior",
                   "split behavior " + Reader::shown(behavior) + " is not supported (Isolated is)");
        if (r.boolean(r.member(v, field, "invert"), field + ".invert", false))
            r.fail(field + ".invert", "an inverted split is not supported");
    } else if (type == "ByteLevel") {
        step.kind = PreTokenizerStep::ByteLevel;
        step.addPrefixSpace = r.boolean(r.member(v, field, "add_prefix_space"), field + ".add_prefix_space", false);
        step.useRegex = r.boolean(r.member(v, field, "use_regex"), field + ".use_regex", true);
    } else if (type == "Metaspace") {
        step.kind = PreTokenizerStep::Metaspace;
        const Json& replacement = r.member(v, field, "replacement");
        step.replacement = replacement.is_null() ? "\xE2\x96\x81" : r.string(replacement, field + ".replacement");
        r.utf8(step.replacement, field + ".replacement");
        if (step.replacement.empty())
            r.fail(field + ".replacement", "empty");
        const Json& scheme = r.member(v, field, "prepend_scheme");
        const std::string s = scheme.is_null() ? "always" : r.string(scheme, field + ".prepend_scheme");
        if (s == "always")
            step.prepend = PreTokenizerStep::Always;
        else if (s == "first")
            step.prepend = PreTokenizerStep::First;
        else if (s == "never")
            step.prepend = PreTokenizerStep::Never;
        else
            r.fail(field + ".prepend_scheme", "expected always, first or never, got " + Reader::shown(scheme));
        if (r.boolean(r.member(v, field, "split"), field + ".split", false))
            r.fail(field + ".split", "a Metaspace that splits words is not supported (split: false is)");
    } else {
        r.fail(field + ".type",
               "pre-tokenizer \"" + type + "\" is not supported (Split, ByteLevel, Metaspace and Sequence are)");
    }
    steps.push_back(std::move(step));
}

void readDecoder(const Reader& r, const Json& v, const std::string& field, std::vector<DecoderStep>& steps)
{
    const std::string type = typeOf(r, v, field);
    DecoderStep step;
    if (type == "Sequence") {
        const Json& list = r.member(v, field, "decoders");
        if (!list.is_array())
            r.fail(field + ".decoders", "expected a list, got " + Reader::shown(list));
        for (size_t i = 0; i < list.size(); ++i)
            readDecoder(r, list[i], field + ".decoders[" + std::to_string(i) + "]", steps);
        return;
    } else if (type == "ByteLevel") {
        step.kind = DecoderStep::ByteLevel;
    } else if (type == "Replace") {
        step.kind = DecoderStep::Replace;
        step.pattern = stringPattern(r, r.member(v, field, "pattern"), field + ".pattern");
        step.content = r.string(r.member(v, field, "content"), field + ".content");
    } else if (type == "ByteFallback") {
        step.kind = DecoderStep::ByteFallback;
    } else if (type == "Fuse") {
        step.kind = DecoderStep::Fuse;
    } else if (type == "Strip") {
        step.kind = DecoderStep::Strip;
        step.pattern = r.string(r.member(v, field, "content"), field + ".content");
        for (auto [key, target] : {std::pair{"start", &step.start}, std::pair{"stop", &step.stop}}) {
            const Json& n = r.member(v, field, key);
            if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > 1024)
                r.fail(field + "." + key, "expected a count from 0 to 1024, got " + Reader::shown(n));
            *target = int(n.get<int64_t>());
        }
        if (step.pattern.empty())
            r.fail(field + ".content", "empty");
    } else if (type == "Metaspace") {
        step.kind = DecoderStep::Metaspace;
        const Json& replacement = r.member(v, field, "replacement");
        step.pattern = replacement.is_null() ? "\xE2\x96\x81" : r.string(replacement, field + ".replacement");
        if (step.pattern.empty())
            r.fail(field + ".replacement", "empty");
    } else {
        r.fail(field + ".type", "decoder \"" + type +
                                    "\" is not supported (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace "
                                    "and Sequence are)");
    }
    steps.push_back(std::move(step));
}

void readPostProcessor(const Reader& r, const Json& v, const std::string& field, Pipeline& p, bool& haveTemplate)
{
    if (v.is_null())
        return;
    const std::string type = typeOf(r, v, field);
    if (type == "ByteLevel")
        return; // moves offsets only; ids are untouched
    if (type == "Sequence") {
        const Json& list = r.member(v, field, "processors");
        if (!list.is_array())
            r.fail(field + ".processors", "expected a list, got " + Reader::shown(list));
        for (size_t i = 0; i < list.size(); ++i)
            readPostProcessor(r, list[i], field + ".processors[" + std::to_string(i) + "]", p, haveTemplate);
        return;
    }
    if (type != "TemplateProcessing")
        r.fail(field + ".type",
               "post-processor \"" + type + "\" is not supported (TemplateProcessing, ByteLevel and Sequence are)");
    if (haveTemplate)
        r.fail(field, "a second TemplateProcessing");
    haveTemplate = true;
    const Json& special = r.member(v, field, "special_tokens");
    if (!special.is_object())
        r.fail(field + ".special_tokens", "expected an object, got " + Reader::shown(special));
    const Json& single = r.member(v, field, "single");
    if (!single.is_array())
        r.fail(field + ".single", "expected a list, got " + Reader::shown(single));
    bool seenText = false;
    for (size_t i = 0; i < single.size(); ++i) {
        const std::string item = field + ".single[" + std::to_string(i) + "]";
        const Json& piece = single[i];
        if (piece.is_object() && piece.contains("Sequence")) {
            const Json& seq = piece["Sequence"];
            if (!seq.is_object() || r.string(r.member(seq, item, "id"), item + ".Sequence.id") != "A")
                r.fail(item + ".Sequence.id", "expected \"A\" in the single template");
            if (seenText)
                r.fail(item, "the text appears twice in the single template");
            seenText = true;
        } else if (piece.is_object() && piece.contains("SpecialToken")) {
            const Json& tok = piece["SpecialToken"];
            if (!tok.is_object())
                r.fail(item + ".SpecialToken", "expected an object, got " + Reader::shown(tok));
            const std::string& name = r.string(r.member(tok, item, "id"), item + ".SpecialToken.id");
            const auto entry = special.find(name);
            if (entry == special.end())
                r.fail(item + ".SpecialToken.id", "\"" + name + "\" is not among " + field + ".special_tokens");
            const std::string idsField = field + ".special_tokens." + name + ".ids";
            const Json& ids = entry->is_object() ? r.member(*entry, idsField, "ids") : *entry;
            if (!ids.is_array())
                r.fail(idsField, "expected a list of ids, got " + Reader::shown(ids));
            for (size_t k = 0; k < ids.size(); ++k) {
                const int32_t id = r.id(ids[k], idsField + "[" + std::to_string(k) + "]");
                (seenText ? p.suffix : p.prefix).push_back(id);
            }
        } else {
            r.fail(item, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}, got " + Reader::shown(piece));
        }
    }
    if (!seenText)
        r.fail(field + ".single", "the template has no {\"Sequence\": {\"id\": \"A\"}}");
}

void readModel(const Reader& r, const Json& model, Pipeline& p, Vocab& vocab)
{
    const std::string type = typeOf(r, model, "model");
    if (type != "BPE")
        r.fail("model.type",
               "model type \"" + type + "\" is not supported (BPE is: byte-level BPE and SentencePiece-style BPE)");
    const auto noAffix = [&](const char* key) {
        const Json& v = r.member(model, "model", key);
        if (!v.is_null() && !(v.is_string() && v.get_ref<const std::string&>().empty()))
            r.fail(std::string("model.") + key, "not supported (must be null or \"\"), got " + Reader::shown(v));
    };
    noAffix("continuing_subword_prefix");
    noAffix("end_of_word_suffix");
    const Json& dropout = r.member(model, "model", "dropout");
    if (!dropout.is_null() && !(dropout.is_number() && dropout.get<double>() == 0.0))
        r.fail("model.dropout", "BPE dropout is not supported (must be null), got " + Reader::shown(dropout));

    const Json& vocabJson = r.member(model, "model", "vocab");
    if (!vocabJson.is_object())
        r.fail("model.vocab", "expected an object of token: id, got " + Reader::shown(vocabJson));
    vocab.reserve(vocabJson.size());
    for (auto it = vocabJson.begin(); it != vocabJson.end(); ++it) {
        const std::string field = "model.vocab[\"" + it.key().substr(0, 40) + "\"]";
        r.utf8(it.key(), "model.vocab");
        const int32_t id = r.id(it.value(), field);
        if (size_t(id) >= p.tokens.size())
            p.tokens.resize(size_t(id) + 1);
        if (!p.tokens[size_t(id)].empty())
            r.fail(field,
                   "id " + std::to_string(id) + " is also the id of \"" + p.tokens[size_t(id)].substr(0, 40) + "\"");
        if (it.key().empty())
            r.fail("model.vocab", "an empty token");
        p.tokens[size_t(id)] = it.key();
        vocab.emplace(it.key(), id);
    }
}

std::vector<BpeModel::Merge> readMerges(const Reader& r, const Json& model, const Vocab& vocab)
{
    const Json& merges = r.member(model, "model", "merges");
    if (!merges.is_array())
        r.fail("model.merges", "expected a list, got " + Reader::shown(merges));
    std::vector<BpeModel::Merge> out;
    out.reserve(merges.size());
    std::string joined;
    for (size_t i = 0; i < merges.size(); ++i) {
        const std::string field = "model.merges[" + std::to_string(i) + "]";
        const Json& m = merges[i];
        std::string_view left, right;
        if (m.is_string()) {
            const std::string& s = m.get_ref<const std::string&>();
            const size_t space = s.find(' ');
            if (space == std::string::npos || space == 0 || space + 1 == s.size() ||
                s.find(' ', space + 1) != std::string::npos)
                r.fail(field, "expected \"left right\", got " + Reader::shown(m));
            left = std::string_view(s).substr(0, space);
            right = std::string_view(s).substr(space + 1);
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            left = m[0].get_ref<const std::string&>();
            right = m[1].get_ref<const std::string&>();
        } else {
            r.fail(field, "expected \"left right\" or [\"left\", \"right\"], got " + Reader::shown(m));
        }
        const auto find = [&](std::string_view token) {
            const auto it = vocab.find(token);
            if (it == vocab.end())
                r.fail(field, "merges \"" + std::string(token.substr(0, 40)) + "\", which is not in model.vocab");
            return it->second;
        };
        const int32_t a = find(left);
        const int32_t b = find(right);
        joined.assign(left);
        joined.append(right);
        out.push_back({a, b, find(joined)});
    }
    return out;
}

void readAddedTokens(const Reader& r, const Json& list, Pipeline& p, Vocab& vocab)
{
    if (list.is_null())
        return;
    if (!list.is_array())
        r.fail("added_tokens", "expected a list, got " + Reader::shown(list));
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string field = "added_tokens[" + std::to_string(i) + "]";
        const Json& t = list[i];
        if (!t.is_object())
            r.fail(field, "expected an object, got " + Reader::shown(t));
        AddedToken token;
        token.id = r.id(r.member(t, field, "id"), field + ".id");
        token.content = r.string(r.member(t, field, "content"), field + ".content");
        r.utf8(token.content, field + ".content");
        if (token.content.empty())
            r.fail(field + ".content", "empty");
        token.special = r.boolean(r.member(t, field, "special"), field + ".special", false);
        token.lstrip = r.boolean(r.member(t, field, "lstrip"), field + ".lstrip", false);
        token.rstrip = r.boolean(r.member(t, field, "rstrip"), field + ".rstrip", false);
        token.singleWord = r.boolean(r.member(t, field, "single_word"), field + ".single_word", false);
        token.normalized = r.boolean(r.member(t, field, "normalized"), field + ".normalized", !token.special);
        if (size_t(token.id) >= p.tokens.size())
            p.tokens.resize(size_t(token.id) + 1);
        if (!p.tokens[size_t(token.id)].empty() && p.tokens[size_t(token.id)] != token.content)
            r.fail(field + ".id", "id " + std::to_string(token.id) + " is also the id of \"" +
                                      p.tokens[size_t(token.id)].substr(0, 40) + "\"");
        p.tokens[size_t(token.id)] = token.content;
        vocab[token.content] = token.id; // an added token's id wins, as in the reference
        p.addedIds[token.content] = token.id;
        p.added.push_back(std::move(token));
    }
}

// tokenizer_config.json's bos_token / eos_token: a string, an object with
// "content", or null.
std::optional<int32_t> configToken(const Reader& r, const Json& config, const char* key, const Pipeline& p,
                                   const Vocab& vocab)
{
    const Json& v = r.member(config, key, key);
    if (v.is_null())
        return std::nullopt;
    const std::string field = std::string("tokenizer_config.json ") + key;
    const Json& content = v.is_object() ? r.member(v, field, "content") : v;
    const std::string& text = r.string(content, field);
    const auto added = p.addedIds.find(text);
    if (added != p.addedIds.end())
        return added->second;
    const auto it = vocab.find(text);
    if (it == vocab.end())
        r.fail(field, "\"" + text.substr(0, 40) + "\" is not a token of the vocabulary");
    return it->second;
}

} // namespace

std::unique_ptr<Pipeline> readPipeline(std::string_view json, const std::string& name, std::string_view configJson)
{
    Json root = Json::parse(json.begin(), json.end(), nullptr, false);
    if (root.is_discarded())
        throw Error(name + ": not valid JSON");
    if (!root.is_object())
        throw Error(name + ": expected a JSON object at the top, got " + std::string(root.type_name()));
    const Reader r(name, json.size());
    auto p = std::make_unique<Pipeline>();
    p->name = name;

    const Json& model = r.member(root, "model", "model");
    Vocab vocab;
    readModel(r, model, *p, vocab);
    const std::vector<BpeModel::Merge> merges = readMerges(r, model, vocab);
    readAddedTokens(r, r.member(root, "added_tokens", "added_tokens"), *p, vocab);

    BpeOptions options;
    options.byteFallback =
        r.boolean(r.member(model, "model.byte_fallback", "byte_fallback"), "model.byte_fallback", false);
    options.fuseUnknown = r.boolean(r.member(model, "model.fuse_unk", "fuse_unk"), "model.fuse_unk", false);
    options.ignoreMerges =
        r.boolean(r.member(model, "model.ignore_merges", "ignore_merges"), "model.ignore_merges", false);
    const Json& unk = r.member(model, "model.unk_token", "unk_token");
    if (!unk.is_null()) {
        const std::string& text = r.string(unk, "model.unk_token");
        const auto it = vocab.find(text);
        if (it == vocab.end())
            r.fail("model.unk_token", "\"" + text.substr(0, 40) + "\" is not in model.vocab");
        options.unknownId = it->second;
    }

    readNormalizer(r, r.member(root, "normalizer", "normalizer"), "normalizer", p->normalizers);
    readPreTokenizer(r, r.member(root, "pre_tokenizer", "pre_tokenizer"), "pre_tokenizer", p->preTokenizers);
    bool haveTemplate = false;
    readPostProcessor(r, r.member(root, "post_processor", "post_processor"), "post_processor", *p, haveTemplate);
    const Json& decoder = r.member(root, "decoder", "decoder");
    if (!decoder.is_null()) {
        p->hasDecoder = true;
        readDecoder(r, decoder, "decoder", p->decoders);
    }

    for (int32_t id : p->prefix)
        if (size_t(id) >= p->tokens.size() || p->tokens[size_t(id)].empty())
            r.fail("post_processor", "special token id " + std::to_string(id) + " is not in the vocabulary");
    for (int32_t id : p->suffix)
        if (size_t(id) >= p->tokens.size() || p->tokens[size_t(id)].empty())
            r.fail("post_processor", "special token id " + std::to_string(id) + " is not in the vocabulary");

    p->special.assign(p->tokens.size(), false);
    for (size_t i = 0; i < p->added.size(); ++i) {
        const AddedToken& t = p->added[i];
        p->special[size_t(t.id)] = t.special;
        // As the reference: a token is matched in the normalized text only when
        // it asks for that and there is a normalizer.
        if (t.normalized && !p->normalizers.empty()) {
            std::string content = t.content;
            for (const NormalizerStep& step : p->normalizers) {
                if (step.kind == NormalizerStep::Unicode)
                    content = normalized(content, step.form);
                else if (step.kind == NormalizerStep::Prepend)
                    content.insert(0, step.text);
                else
                    for (size_t pos = 0; (pos = content.find(step.text, pos)) != std::string::npos;
                         pos += step.content.size())
                        content.replace(pos, step.text.size(), step.content);
            }
            p->normalizedMatcher.add(content, int32_t(i), t.singleWord);
        } else {
            p->rawMatcher.add(t.content, int32_t(i), t.singleWord);
        }
    }

    if (!p->prefix.empty())
        p->bos = p->prefix.front();
    if (!p->suffix.empty())
        p->eos = p->suffix.back();
    if (!configJson.empty()) {
        const Json config = Json::parse(configJson.begin(), configJson.end(), nullptr, false);
        if (config.is_discarded() || !config.is_object())
            throw Error(name + ": the tokenizer_config.json beside it is not a JSON object");
        if (config.contains("bos_token"))
            p->bos = configToken(r, config, "bos_token", *p, vocab);
        if (config.contains("eos_token"))
            p->eos = configToken(r, config, "eos_token", *p, vocab);
    }

    p->model = BpeModel(std::move(vocab), merges, options);
    return p;
}

} // namespace qs::text
