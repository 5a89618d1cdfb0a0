#pragma once
// A small FlatBuffers writer and a bounds-checked reader, enough for the
// LiteRT model schema (export/tflite_schema.h): tables of scalars, strings,
// scalar vectors, byte vectors with an alignment, tables and vectors of
// tables. Unions are a type field plus a table field, as the schema lays them
// out. Hand-written rather than flatc-generated: the LiteRT schema is large
// (160 ops, 120 option tables) and the exporter writes a dozen tables; a
// builder over field ids keeps the subset in one header (tflite_schema.h)
// without a generated 20k-line header or a build-time flatc step.
//
// The binary layout (flatbuffers.dev, "Internals"): little-endian; a root
// uoffset_t at byte 0 and a 4-byte file identifier at byte 4; a table starts
// with a soffset_t to its vtable (vtable position = table position − soffset),
// the vtable is [uint16 vtable bytes, uint16 table bytes, uint16 offset of
// field 0, ...] with 0 for an absent field; an offset field holds a uoffset_t
// relative to its own position; vectors are a uint32 count followed by the
// elements, strings the same with a trailing NUL. This writer lays parents
// out before their children, so every uoffset_t points forward.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace qs::flatbuffer {

class Table {
public:
    // A scalar field (bool, int8…int64, uint8…uint64, float, double); written
    // even when it equals the schema default.
    template <typename T> void scalar(int field, T value)
    {
        static_assert(std::is_arithmetic_v<T>);
        Field& f = add(field, Field::Kind::Scalar);
        f.size = sizeof(T);
        std::memcpy(f.inlineBytes, &value, sizeof(T));
    }
    void table(int field, Table child);
    void tables(int field, std::vector<Table> children);
    void string(int field, std::string_view text);
    // A vector of scalars, its elements aligned to `alignment` bytes (at least their size).
    template <typename T> void vector(int field, std::span<const T> values, size_t alignment = sizeof(T))
    {
        static_assert(std::is_arithmetic_v<T>);
        Field& f = add(field, Field::Kind::Vector);
        f.elementSize = sizeof(T);
        f.alignment = alignment < sizeof(T) ? sizeof(T) : alignment;
        f.data.resize(values.size_bytes());
        if (!values.empty())
            std::memcpy(f.data.data(), values.data(), values.size_bytes());
    }
    template <typename T> void vector(int field, const std::vector<T>& values, size_t alignment = sizeof(T))
    {
        vector(field, std::span<const T>(values), alignment);
    }
    bool empty() const { return fields_.empty(); }

private:
    friend class Writer;
    struct Field {
        enum class Kind : uint8_t { Scalar, Table, Tables, String, Vector } kind = Kind::Scalar;
        int id = 0;
        uint8_t size = 0; // inline bytes: the scalar's size, 4 for an offset
        unsigned char inlineBytes[8] = {};
        std::vector<Table> children; // Table (one) and Tables
        std::vector<uint8_t> data;   // String and Vector
        size_t elementSize = 1, alignment = 1;
    };
    Field& add(int field, Field::Kind kind);
    std::vector<Field> fields_;
};

// The whole buffer: `root` with the 4-character file identifier.
std::vector<uint8_t> serialize(const Table& root, std::string_view fileIdentifier);

// Reading back, every offset, count and length checked against the buffer;
// a violation is an Error naming `what` (the file) and the byte position.
class Reader;
class TableView {
public:
    bool has(int field) const { return fieldPosition(field) != 0; }
    template <typename T> T scalar(int field, T defaultValue) const
    {
        const size_t at = fieldPosition(field);
        if (at == 0)
            return defaultValue;
        T value;
        std::memcpy(&value, bytes(at, sizeof(T)), sizeof(T));
        return value;
    }
    TableView table(int field) const;   // Error when absent
    size_t vectorSize(int field) const; // 0 when absent
    TableView tableAt(int field, size_t index) const;
    std::string string(int field) const; // empty when absent
    // A scalar vector's bytes (count × elementSize); empty when absent.
    std::span<const uint8_t> vectorBytes(int field, size_t elementSize) const;
    template <typename T> std::vector<T> vector(int field) const
    {
        const std::span<const uint8_t> b = vectorBytes(field, sizeof(T));
        std::vector<T> out(b.size() / sizeof(T));
        if (!b.empty())
            std::memcpy(out.data(), b.data(), b.size());
        return out;
    }

private:
    friend class Reader;
    TableView(const Reader* reader, size_t position) : reader_(reader), position_(position) {}
    size_t fieldPosition(int field) const; // absolute position of the field's bytes; 0 when absent
    const uint8_t* bytes(size_t at, size_t n) const;
    size_t follow(size_t at) const; // the position a uoffset_t at `at` points to
    const Reader* reader_;
    size_t position_;
};

class Reader {
public:
    // Checks the header: size, root offset and, when given, the identifier.
    Reader(std::span<const uint8_t> buffer, std::string what, std::string_view fileIdentifier);
    TableView root() const;

private:
    friend class TableView;
    const uint8_t* bytes(size_t at, size_t n) const;
    std::span<const uint8_t> buffer_;
    std::string what_;
};

} // namespace qs::flatbuffer
