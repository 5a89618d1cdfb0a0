#include "export/flatbuffer.h"

#include <algorithm>
#include <deque>
#include <limits>

#include "core/error.h"

namespace qs::flatbuffer {

Table::Field& Table::add(int field, Field::Kind kind)
{
    if (field < 0 || field > 255)
        throw Error("flatbuffer: field id " + std::to_string(field) + " out of range");
    for (const Field& f : fields_)
        if (f.id == field)
            throw Error("flatbuffer: field " + std::to_string(field) + " set twice");
    Field& f = fields_.emplace_back();
    f.kind = kind;
    f.id = field;
    f.size = 4; // offsets; scalar() overwrites
    return f;
}

void Table::table(int field, Table child)
{
    add(field, Field::Kind::Table).children.push_back(std::move(child));
}

void Table::tables(int field, std::vector<Table> children)
{
    add(field, Field::Kind::Tables).children = std::move(children);
}

void Table::string(int field, std::string_view text)
{
    Field& f = add(field, Field::Kind::String);
    f.data.assign(text.begin(), text.end());
}

// Lays tables out breadth first: a table, then (queued) what its offset fields point to.
class Writer {
public:
    explicit Writer(std::vector<uint8_t>& out) : out_(out) {}

    void writeRootAt(size_t patch, const Table& root)
    {
        pending_.push_back({patch, Pending::Kind::Table, &root, nullptr});
        while (!pending_.empty()) {
            const Pending p = pending_.front();
            pending_.pop_front();
            size_t at = 0;
            switch (p.kind) {
            case Pending::Kind::Table:
                at = writeTable(*p.table);
                break;
            case Pending::Kind::Tables:
                at = writeTableVector(p.field->children);
                break;
            case Pending::Kind::Data:
                at = writeData(*p.field);
                break;
            }
            patch32(p.patch, at);
        }
    }

private:
    struct Pending {
        size_t patch; // position of the uoffset_t to point at what is written
        enum class Kind : uint8_t { Table, Tables, Data } kind;
        const Table* table;
        const Table::Field* field;
    };

    void pad(size_t alignment)
    {
        while (out_.size() % alignment != 0)
            out_.push_back(0);
    }
    void put(const void* data, size_t n)
    {
        const auto* b = static_cast<const uint8_t*>(data);
        out_.insert(out_.end(), b, b + n);
    }
    void put32(uint32_t v) { put(&v, 4); }
    void patch32(size_t at, size_t target)
    {
        if (target <= at || target - at > std::numeric_limits<uint32_t>::max())
            throw Error("flatbuffer: an offset does not point forward");
        const uint32_t v = uint32_t(target - at);
        std::memcpy(out_.data() + at, &v, 4);
    }

    size_t writeTable(const Table& t)
    {
        std::vector<const Table::Field*> fields;
        int maxId = -1;
        size_t tableAlign = 4;
        for (const Table::Field& f : t.fields_) {
            fields.push_back(&f);
            maxId = std::max(maxId, f.id);
            tableAlign = std::max<size_t>(tableAlign, f.size);
        }
        // Largest first, so fields need no padding between them.
        std::stable_sort(fields.begin(), fields.end(),
                         [](const Table::Field* a, const Table::Field* b) { return a->size > b->size; });
        std::vector<uint16_t> vtable(size_t(maxId + 1) + 2, 0);
        size_t inlineSize = 4;
        std::vector<size_t> fieldOffset;
        for (const Table::Field* f : fields) {
            inlineSize = (inlineSize + f->size - 1) / f->size * f->size;
            fieldOffset.push_back(inlineSize);
            vtable[size_t(f->id) + 2] = uint16_t(inlineSize);
            inlineSize += f->size;
        }
        vtable[0] = uint16_t(vtable.size() * 2);
        vtable[1] = uint16_t(inlineSize);
        pad(2);
        const size_t vtablePos = out_.size();
        put(vtable.data(), vtable.size() * 2);
        pad(tableAlign);
        const size_t tablePos = out_.size();
        const int32_t soffset = int32_t(tablePos - vtablePos);
        out_.resize(tablePos + inlineSize, 0);
        std::memcpy(out_.data() + tablePos, &soffset, 4);
        for (size_t k = 0; k < fields.size(); ++k) {
            const Table::Field& f = *fields[k];
            const size_t at = tablePos + fieldOffset[k];
            switch (f.kind) {
            case Table::Field::Kind::Scalar:
                std::memcpy(out_.data() + at, f.inlineBytes, f.size);
                break;
            case Table::Field::Kind::Table:
                pending_.push_back({at, Pending::Kind::Table, &f.children[0], nullptr});
                break;
            case Table::Field::Kind::Tables:
                pending_.push_back({at, Pending::Kind::Tables, nullptr, &f});
                break;
            case Table::Field::Kind::String:
            case Table::Field::Kind::Vector:
                pending_.push_back({at, Pending::Kind::Data, nullptr, &f});
                break;
            }
        }
        return tablePos;
    }

    size_t writeTableVector(const std::vector<Table>& tables)
    {
        pad(4);
        const size_t at = out_.size();
        put32(uint32_t(tables.size()));
        for (const Table& t : tables) {
            pending_.push_back({out_.size(), Pending::Kind::Table, &t, nullptr});
            put32(0);
        }
        return at;
    }

    // A string or a scalar vector: the count sits right before elements aligned to f.alignment.
    size_t writeData(const Table::Field& f)
    {
        const size_t alignment = std::max<size_t>(f.alignment, 4);
        while ((out_.size() + 4) % alignment != 0)
            out_.push_back(0);
        const size_t at = out_.size();
        put32(uint32_t(f.data.size() / f.elementSize));
        put(f.data.data(), f.data.size());
        if (f.kind == Table::Field::Kind::String)
            out_.push_back(0);
        return at;
    }

    std::vector<uint8_t>& out_;
    std::deque<Pending> pending_;
};

std::vector<uint8_t> serialize(const Table& root, std::string_view fileIdentifier)
{
    if (fileIdentifier.size() != 4)
        throw Error("flatbuffer: a file identifier has 4 characters");
    std::vector<uint8_t> out(8, 0);
    std::memcpy(out.data() + 4, fileIdentifier.data(), 4);
    Writer(out).writeRootAt(0, root);
    return out;
}

// ---- reading

Reader::Reader(std::span<const uint8_t> buffer, std::string what, std::string_view fileIdentifier)
    : buffer_(buffer), what_(std::move(what))
{
    if (buffer_.size() < 8)
        throw Error(what_ + ": " + std::to_string(buffer_.size()) + " bytes, too short for a flatbuffer");
    if (!fileIdentifier.empty() && std::memcmp(buffer_.data() + 4, fileIdentifier.data(), 4) != 0)
        throw Error(what_ + ": the file identifier is not '" + std::string(fileIdentifier) + "'");
}

const uint8_t* Reader::bytes(size_t at, size_t n) const
{
    if (at > buffer_.size() || n > buffer_.size() - at)
        throw Error(what_ + ": " + std::to_string(n) + " bytes at byte " + std::to_string(at) +
                    " run past the end of the file (" + std::to_string(buffer_.size()) + " bytes)");
    return buffer_.data() + at;
}

TableView Reader::root() const
{
    TableView root(this, 0);
    return TableView(this, root.follow(0));
}

const uint8_t* TableView::bytes(size_t at, size_t n) const
{
    return reader_->bytes(at, n);
}

size_t TableView::follow(size_t at) const
{
    uint32_t offset;
    std::memcpy(&offset, bytes(at, 4), 4);
    if (offset == 0)
        throw Error(reader_->what_ + ": a zero offset at byte " + std::to_string(at));
    bytes(at + offset, 4);
    return at + offset;
}

size_t TableView::fieldPosition(int field) const
{
    int32_t soffset;
    std::memcpy(&soffset, bytes(position_, 4), 4);
    const int64_t vtablePos = int64_t(position_) - soffset;
    if (vtablePos < 0)
        throw Error(reader_->what_ + ": the table at byte " + std::to_string(position_) +
                    " has its vtable before the file");
    uint16_t header[2];
    std::memcpy(header, bytes(size_t(vtablePos), 4), 4);
    const size_t slot = 4 + 2 * size_t(field);
    if (slot + 2 > header[0])
        return 0;
    uint16_t offset;
    std::memcpy(&offset, bytes(size_t(vtablePos) + slot, 2), 2);
    if (offset == 0)
        return 0;
    if (offset >= header[1])
        throw Error(reader_->what_ + ": field " + std::to_string(field) + " of the table at byte " +
                    std::to_string(position_) + " lies outside the table");
    return position_ + offset;
}

TableView TableView::table(int field) const
{
    const size_t at = fieldPosition(field);
    if (at == 0)
        throw Error(reader_->what_ + ": the table at byte " + std::to_string(position_) + " lacks field " +
                    std::to_string(field));
    return TableView(reader_, follow(at));
}

size_t TableView::vectorSize(int field) const
{
    const size_t at = fieldPosition(field);
    if (at == 0)
        return 0;
    uint32_t n;
    std::memcpy(&n, bytes(follow(at), 4), 4);
    return n;
}

TableView TableView::tableAt(int field, size_t index) const
{
    const size_t n = vectorSize(field);
    if (index >= n)
        throw Error(reader_->what_ + ": element " + std::to_string(index) + " of a vector of " + std::to_string(n));
    const size_t vec = follow(fieldPosition(field));
    return TableView(reader_, follow(vec + 4 + 4 * index));
}

std::span<const uint8_t> TableView::vectorBytes(int field, size_t elementSize) const
{
    const size_t at = fieldPosition(field);
    if (at == 0)
        return {};
    const size_t vec = follow(at);
    uint32_t n;
    std::memcpy(&n, bytes(vec, 4), 4);
    const size_t size = size_t(n) * elementSize;
    return {bytes(vec + 4, size), size};
}

std::string TableView::string(int field) const
{
    const std::span<const uint8_t> b = vectorBytes(field, 1);
    return {b.begin(), b.end()};
}

} // namespace qs::flatbuffer
