#include "io/safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/load_budget.h"

namespace qs {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

// Plain nlohmann::json: its objects are std::maps (logarithmic insertion).
using Json = nlohmann::json;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what)
{
    throw Error(file.string() + ": " + what);
}

struct DtypeName {
    std::string_view name;
    DType dtype;
};
// The dtypes of the format this reader knows; F8 codes are kept as bytes.
constexpr std::array<DtypeName, 15> kDtypes{{
    {"F64", DType::F64},
    {"F32", DType::F32},
    {"F16", DType::F16},
    {"BF16", DType::BF16},
    {"I64", DType::I64},
    {"I32", DType::I32},
    {"I16", DType::I16},
    {"I8", DType::I8},
    {"U64", DType::U64},
    {"U32", DType::U32},
    {"U16", DType::U16},
    {"U8", DType::U8},
    {"BOOL", DType::Bool},
    {"F8_E4M3", DType::U8},
    {"F8_E5M2", DType::U8},
}};

std::optional<DType> dtypeOfName(std::string_view name)
{
    for (const auto& d : kDtypes)
        if (d.name == name)
            return d.dtype;
    return std::nullopt;
}

std::string fileDtypeName(DType dtype)
{
    for (const auto& d : kDtypes)
        if (d.dtype == dtype)
            return std::string(d.name);
    return {};
}

std::string knownDtypeList()
{
    std::string s;
    for (const auto& d : kDtypes)
        s += (s.empty() ? "" : ", ") + std::string(d.name);
    return s;
}

// Reads a header's top-level JSON object from SAX events and hands each member
// to `member` as it ends, in the file's order, with its value as a small Json.
// The top level is never built as one document: ordered_json inserts a key in
// time linear in the keys before it, which made a header of 100k tensors take
// seconds and one of 1e6 tensors hours. Duplicate keys are refused (nlohmann
// would silently keep the last), and so is nesting deeper than the format uses
// (the top object, a tensor's object, its shape or data_offsets array).
class HeaderReader {
public:
    using Member = std::function<void(std::string&& key, Json&& value)>;

    HeaderReader(const std::filesystem::path& file, uint64_t fileOffset, Member member)
        : file_(file), fileOffset_(fileOffset), member_(std::move(member))
    {
    }

    void read(std::string_view text)
    {
        Json::sax_parse(text.begin(), text.end(), this);
        if (!finished_) // sax_parse reports every malformation through parse_error
            fail(file_, "header JSON ends before its object does");
    }

    // The SAX interface of nlohmann::json.
    bool null() { return value(Json()); }
    bool boolean(bool v) { return value(Json(v)); }
    bool number_integer(Json::number_integer_t v) { return value(Json(v)); }
    bool number_unsigned(Json::number_unsigned_t v) { return value(Json(v)); }
    bool number_float(Json::number_float_t v, const std::string&) { return value(Json(v)); }
    bool string(std::string& v) { return value(Json(std::move(v))); }
    bool binary(Json::binary_t&) { return value(Json::binary({})); } // JSON text has none
    bool start_object(std::size_t) { return open(Json::object()); }
    bool start_array(std::size_t) { return open(Json::array()); }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool key(std::string& key)
    {
        if (depth_ == 1) {
            if (!topKeys_.insert(key).second)
                duplicate(key);
            memberKey_ = std::move(key);
        } else {
            if (stack_.back()->contains(key))
                duplicate(key);
            nestedKey_ = std::move(key);
        }
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e)
    {
        if (const auto* p = dynamic_cast<const Json::parse_error*>(&e)) {
            // byte counts from 1 within the header text.
            const uint64_t at = fileOffset_ + (p->byte > 0 ? p->byte - 1 : 0);
            fail(file_, "header is not valid JSON (at byte offset " + std::to_string(at) + "): " + e.what());
        }
        fail(file_, std::string("header JSON cannot be read: ") + e.what()); // e.g. a number no double holds
    }

private:
    static constexpr size_t kMaxDepth = 3; // containers open at once

    [[noreturn]] void duplicate(const std::string& key) const
    {
        fail(file_, "header JSON has the key \"" + key + "\" twice in one object");
    }

    // Places a finished value: a member of the top object, or an element of the
    // container being built.
    bool value(Json&& v)
    {
        if (depth_ == 0)
            fail(file_, "header must be a JSON object, found " + std::string(v.type_name()));
        if (depth_ == 1) {
            member_(std::move(memberKey_), std::move(v));
            return true;
        }
        Json& parent = *stack_.back();
        if (parent.is_array())
            parent.push_back(std::move(v));
        else
            parent[nestedKey_] = std::move(v);
        return true;
    }

    bool open(Json&& container)
    {
        if (depth_ == kMaxDepth)
            fail(file_, "header JSON nests deeper than safetensors allows");
        if (depth_ == 0 && !container.is_object())
            fail(file_, "header must be a JSON object, found " + std::string(container.type_name()));
        if (depth_ == 1) {
            current_ = std::move(container);
            stack_.assign(1, &current_);
        } else if (depth_ > 1) {
            Json& parent = *stack_.back();
            Json* child = nullptr;
            if (parent.is_array()) {
                parent.push_back(std::move(container));
                child = &parent.back();
            } else {
                child = &(parent[nestedKey_] = std::move(container));
            }
            stack_.push_back(child); // the parent grows no further until the child closes
        }
        ++depth_;
        return true;
    }

    bool close()
    {
        --depth_;
        if (depth_ == 0) {
            finished_ = true;
        } else if (depth_ == 1) {
            stack_.clear();
            member_(std::move(memberKey_), std::move(current_));
        } else {
            stack_.pop_back();
        }
        return true;
    }

    const std::filesystem::path& file_;
    uint64_t fileOffset_;
    Member member_;
    size_t depth_ = 0;
    bool finished_ = false;
    std::unordered_set<std::string> topKeys_;
    std::string memberKey_; // the top-level key whose value is being read
    std::string nestedKey_; // the key of the next value in the object being built
    Json current_;          // the member value being built
    std::vector<Json*> stack_;
};

uint64_t nonNegativeInteger(const Json& v, const std::string& what, const std::filesystem::path& file)
{
    if (v.is_number_unsigned())
        return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0)
        return uint64_t(v.get<int64_t>());
    fail(file, what + " must be a non-negative integer, found " + v.dump());
}

std::map<std::string, std::string> stringMap(const Json& v, const std::string& what, const std::filesystem::path& file)
{
    if (!v.is_object())
        fail(file, what + " must be an object of strings, found " + std::string(v.type_name()));
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : v.items()) {
        if (!value.is_string())
            fail(file, what + " entry \"" + key + "\" must be a string, found " + std::string(value.type_name()));
        out.emplace(key, value.get<std::string>());
    }
    return out;
}

SafetensorsEntry parseEntry(const std::string& name, const Json& v, const std::filesystem::path& file)
{
    const std::string where = "tensor \"" + name + "\"";
    if (!v.is_object())
        fail(file, where + " must be an object with dtype, shape and data_offsets");
    for (const auto& [key, value] : v.items())
        if (key != "dtype" && key != "shape" && key != "data_offsets")
            fail(file, where + " has an unknown field \"" + key + "\" (expected only dtype, shape, data_offsets)");
    for (const char* key : {"dtype", "shape", "data_offsets"})
        if (!v.contains(key))
            fail(file, where + " has no field \"" + std::string(key) + "\"");

    SafetensorsEntry e;
    e.name = name;
    const Json& dtype = v["dtype"];
    if (!dtype.is_string())
        fail(file, where + " field dtype must be a string, found " + dtype.dump());
    e.sourceDtype = dtype.get<std::string>();
    const auto d = dtypeOfName(e.sourceDtype);
    if (!d)
        fail(file, where + " has unknown dtype \"" + e.sourceDtype + "\" (known: " + knownDtypeList() + ")");
    e.dtype = *d;

    const Json& shape = v["shape"];
    if (!shape.is_array())
        fail(file, where + " field shape must be an array of integers, found " + shape.dump());
    for (size_t i = 0; i < shape.size(); ++i) {
        const uint64_t dim = nonNegativeInteger(shape[i], where + " shape[" + std::to_string(i) + "]", file);
        if (dim > uint64_t(std::numeric_limits<int64_t>::max()))
            fail(file, where + " shape[" + std::to_string(i) + "] is too large");
        e.shape.push_back(int64_t(dim));
    }

    const Json& offsets = v["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2)
        fail(file, where + " field data_offsets must be [begin, end], found " + offsets.dump());
    e.begin = nonNegativeInteger(offsets[0], where + " data_offsets[0]", file);
    e.end = nonNegativeInteger(offsets[1], where + " data_offsets[1]", file);
    if (e.begin > e.end)
        fail(file, where + " data_offsets begin " + std::to_string(e.begin) + " is after end " + std::to_string(e.end));

    int64_t count = 0;
    try {
        count = shapeElementCount(e.shape);
    } catch (const Error& err) {
        fail(file, where + ": " + err.what());
    }
    const uint64_t item = dtypeSize(e.dtype);
    if (uint64_t(count) > std::numeric_limits<uint64_t>::max() / item)
        fail(file, where + " shape " + shapeToString(e.shape) + " has a byte size that overflows 64 bits");
    const uint64_t bytes = uint64_t(count) * item;
    if (bytes != e.end - e.begin)
        fail(file, where + " shape " + shapeToString(e.shape) + " of " + e.sourceDtype + " needs " +
                       std::to_string(bytes) + " bytes but data_offsets [" + std::to_string(e.begin) + ", " +
                       std::to_string(e.end) + "] hold " + std::to_string(e.end - e.begin));
    checkTensorElements(count, e.shape, file.string(), where);
    return e;
}

// Reads and validates one data file; appends its entries (with `file` = index).
SafetensorsFile::Shard readShard(const std::filesystem::path& path, size_t index,
                                 std::vector<SafetensorsEntry>& entries)
{
    SafetensorsFile::Shard shard;
    shard.mapping = MappedFile::open(path);
    const auto bytes = shard.mapping->bytes();
    if (bytes.size() < 8)
        fail(path, "truncated: " + std::to_string(bytes.size()) +
                       " bytes, too short for the 8-byte header length of a safetensors file");
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    if (n > kSafetensorsMaxHeaderBytes)
        fail(path, "header length " + std::to_string(n) + " (at byte offset 0) exceeds the limit of " +
                       std::to_string(kSafetensorsMaxHeaderBytes) + " bytes" +
                       (bytes[0] == std::byte{'{'} ? " (the file looks like JSON; a sharded checkpoint's index must be "
                                                     "named *.index.json)"
                                                   : ""));
    if (n > bytes.size() - 8)
        fail(path, "header length " + std::to_string(n) + " (at byte offset 0) runs past the end of the file (" +
                       std::to_string(bytes.size()) + " bytes)");
    shard.dataOffset = 8 + n;
    const uint64_t dataSize = bytes.size() - shard.dataOffset;

    const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, size_t(n));
    const size_t first = entries.size();
    HeaderReader(path, 8, [&](std::string&& key, Json&& value) {
        if (key == "__metadata__") {
            shard.metadata = stringMap(value, "__metadata__", path);
            return;
        }
        SafetensorsEntry e = parseEntry(key, value, path);
        if (e.end > dataSize)
            fail(path, "tensor \"" + key + "\" data_offsets end " + std::to_string(e.end) +
                           " is past the end of the data section (" + std::to_string(dataSize) + " bytes)");
        e.file = index;
        entries.push_back(std::move(e));
    }).read(text);

    // The ranges, in data order, must tile [0, dataSize) exactly.
    std::vector<const SafetensorsEntry*> order;
    for (size_t i = first; i < entries.size(); ++i)
        order.push_back(&entries[i]);
    std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
        return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
    });
    uint64_t covered = 0;
    const SafetensorsEntry* previous = nullptr;
    for (const auto* e : order) {
        if (e->begin < covered)
            fail(path, "tensor \"" + e->name + "\" data_offsets [" + std::to_string(e->begin) + ", " +
                           std::to_string(e->end) + "] overlap tensor \"" + previous->name + "\" ending at " +
                           std::to_string(covered));
        if (e->begin > covered)
            fail(path, "the data section has a gap of " + std::to_string(e->begin - covered) +
                           " bytes at data offset " + std::to_string(covered) + " (before tensor \"" + e->name +
                           "\"); every byte must belong to a tensor");
        covered = e->end;
        previous = e;
    }
    if (covered != dataSize)
        fail(path, "the data section has " + std::to_string(dataSize - covered) +
                       " bytes after the last tensor (from data offset " + std::to_string(covered) +
                       "); every byte must belong to a tensor");
    return shard;
}

// A shard path from weight_map: relative, inside the index's folder.
std::filesystem::path shardPath(const std::string& relative, const std::filesystem::path& index)
{
    const std::filesystem::path rel(relative);
    if (relative.empty() || rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
        fail(index, "weight_map shard path \"" + relative + "\" must be a relative path inside the index's folder");
    for (const auto& part : rel)
        if (part == "..")
            fail(index, "weight_map shard path \"" + relative + "\" may not contain '..'");
    return index.parent_path() / rel;
}

std::map<std::string, std::string> indexMetadata(const Json& v, const std::filesystem::path& index)
{
    if (!v.is_object())
        fail(index, "metadata must be an object, found " + std::string(v.type_name()));
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : v.items())
        out.emplace(key, value.is_string() ? value.get<std::string>() : value.dump());
    return out;
}

bool endsWith(std::string_view s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

} // namespace

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path)
{
    SafetensorsFile f;
    f.path_ = path;
    if (!endsWith(path.filename().string(), ".index.json")) {
        f.shards_.push_back(readShard(path, 0, f.entries_));
        f.metadata_ = f.shards_[0].metadata;
    } else {
        f.sharded_ = true;
        const auto mapping = MappedFile::open(path);
        const auto bytes = mapping->bytes();
        if (bytes.size() > kSafetensorsMaxHeaderBytes)
            fail(path, "index of " + std::to_string(bytes.size()) + " bytes exceeds the limit of " +
                           std::to_string(kSafetensorsMaxHeaderBytes));
        std::optional<Json> weightMapJson;
        HeaderReader(path, 0, [&](std::string&& key, Json&& value) {
            if (key == "weight_map")
                weightMapJson = std::move(value);
            else if (key == "metadata")
                f.metadata_ = indexMetadata(value, path);
        }).read({reinterpret_cast<const char*>(bytes.data()), bytes.size()});
        if (!weightMapJson)
            fail(path, "a safetensors index must be a JSON object with a \"weight_map\"");
        const std::map<std::string, std::string> weightMap = stringMap(*weightMapJson, "weight_map", path);

        std::map<std::string, std::vector<std::string>> tensorsOfShard; // name order of shards
        for (const auto& [tensor, shard] : weightMap)
            tensorsOfShard[shard].push_back(tensor);
        for (const auto& [relative, mapped] : tensorsOfShard) {
            const size_t first = f.entries_.size();
            const auto shardFile = shardPath(relative, path);
            try {
                f.shards_.push_back(readShard(shardFile, f.shards_.size(), f.entries_));
            } catch (const Error& e) {
                fail(path, std::string("shard \"") + relative + "\": " + e.what());
            }
            std::set<std::string_view> inShard;
            for (size_t i = first; i < f.entries_.size(); ++i) {
                const std::string& name = f.entries_[i].name;
                inShard.insert(name);
                const auto it = weightMap.find(name);
                if (it == weightMap.end())
                    fail(path, "tensor \"" + name + "\" of shard \"" + relative + "\" is not in weight_map");
                if (it->second != relative)
                    fail(path, "tensor \"" + name + "\" is in shard \"" + relative + "\" but weight_map puts it in \"" +
                                   it->second + "\"");
            }
            for (const std::string& name : mapped)
                if (!inShard.count(name))
                    fail(path, "weight_map puts tensor \"" + name + "\" in shard \"" + relative +
                                   "\", which does not contain it");
        }
    }
    for (size_t i = 0; i < f.entries_.size(); ++i)
        if (!f.byName_.emplace(f.entries_[i].name, i).second)
            fail(path, "tensor \"" + f.entries_[i].name + "\" appears twice");
    return f;
}

std::vector<std::filesystem::path> SafetensorsFile::files() const
{
    std::vector<std::filesystem::path> out;
    for (const auto& s : shards_)
        out.push_back(s.mapping->path());
    return out;
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const
{
    const auto it = byName_.find(std::string(name));
    return it == byName_.end() ? nullptr : &entries_[it->second];
}

Tensor SafetensorsFile::tensor(std::string_view name) const
{
    const SafetensorsEntry* e = find(name);
    if (!e)
        fail(path_, "has no tensor \"" + std::string(name) + "\"");
    return tensor(*e);
}

const std::byte* SafetensorsFile::data(const SafetensorsEntry& e) const
{
    const Shard& shard = shards_.at(e.file);
    return shard.mapping->data() + shard.dataOffset + e.begin;
}

bool SafetensorsFile::borrows(const SafetensorsEntry& e) const
{
    const std::byte* p = data(e);
    const size_t bytes = size_t(e.end - e.begin);
    const bool aligned = reinterpret_cast<uintptr_t>(p) % dtypeSize(e.dtype) == 0;
    const bool cleanBools =
        e.dtype != DType::Bool || std::all_of(p, p + bytes, [](std::byte b) { return b <= std::byte{1}; });
    return bytes == 0 || (aligned && cleanBools);
}

uint64_t SafetensorsFile::allocatedBytes(const SafetensorsEntry& e) const
{
    return borrows(e) ? 0 : e.end - e.begin;
}

Tensor SafetensorsFile::tensor(const SafetensorsEntry& e) const
{
    const std::byte* p = data(e);
    const size_t bytes = size_t(e.end - e.begin);
    if (borrows(e))
        return Tensor::borrow(e.dtype, e.shape, bytes ? p : nullptr, shards_.at(e.file).mapping);
    Tensor t = allocateTensor(e.dtype, e.shape, files().at(e.file).string(), "tensor \"" + e.name + "\"");
    std::memcpy(t.mutableRawData(), p, bytes);
    if (e.dtype == DType::Bool)
        for (auto& v : t.mutableValues<uint8_t>())
            v = v != 0;
    return t;
}

void writeSafetensors(const std::filesystem::path& path, const std::vector<SafetensorsTensor>& tensors,
                      const std::map<std::string, std::string>& metadata)
{
    std::vector<std::string> dtypes;
    std::set<std::string_view> names;
    for (const auto& t : tensors) {
        if (t.name.empty() || t.name == "__metadata__")
            fail(path, "cannot write a tensor named \"" + t.name + "\"");
        if (!names.insert(t.name).second)
            fail(path, "tensor \"" + t.name + "\" is given twice");
        std::string dtype = t.dtype.empty() ? fileDtypeName(t.tensor.dtype()) : t.dtype;
        const auto stored = dtypeOfName(dtype);
        if (!stored || *stored != t.tensor.dtype())
            fail(path, "tensor \"" + t.name + "\" of " + std::string(dtypeName(t.tensor.dtype())) +
                           " cannot be written as safetensors dtype \"" + dtype + "\"");
        dtypes.push_back(std::move(dtype));
    }
    // Data by decreasing item size keeps every offset a multiple of its item size.
    std::vector<size_t> dataOrder(tensors.size());
    for (size_t i = 0; i < dataOrder.size(); ++i)
        dataOrder[i] = i;
    std::stable_sort(dataOrder.begin(), dataOrder.end(), [&](size_t a, size_t b) {
        return dtypeSize(tensors[a].tensor.dtype()) > dtypeSize(tensors[b].tensor.dtype());
    });
    std::vector<std::array<uint64_t, 2>> offsets(tensors.size());
    uint64_t offset = 0;
    for (size_t i : dataOrder) {
        offsets[i] = {offset, offset + tensors[i].tensor.nbytes()};
        offset += tensors[i].tensor.nbytes();
    }

    // The header text is appended member by member: building it as one
    // ordered_json would insert each name in time linear in the names before it.
    std::string text = "{";
    if (!metadata.empty())
        text += "\"__metadata__\":" + Json(metadata).dump();
    for (size_t i = 0; i < tensors.size(); ++i) {
        const nlohmann::ordered_json entry = {{"dtype", dtypes[i]},
                                              {"shape", tensors[i].tensor.shape()},
                                              {"data_offsets", {offsets[i][0], offsets[i][1]}}};
        if (text.size() > 1)
            text += ',';
        text += Json(tensors[i].name).dump();
        text += ':';
        text += entry.dump();
    }
    text += "}";
    text.append((8 - (8 + text.size()) % 8) % 8, ' ');
    const uint64_t n = text.size();

    AtomicFile out(path);
    out.write(&n, 8);
    out.write(text.data(), text.size());
    for (size_t i : dataOrder)
        out.write(tensors[i].tensor.rawData(), tensors[i].tensor.nbytes());
    out.commit();
}

} // namespace qs
