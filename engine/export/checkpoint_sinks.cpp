#include "export/checkpoint_sinks.h"

#include <hdf5.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/hdf5_file.h"

namespace qs {

namespace {

struct DTypeName {
    std::string_view name;
    size_t size;
};
constexpr DTypeName kDTypes[] = {{"F64", 8}, {"I64", 8}, {"U64", 8}, {"F32", 4}, {"I32", 4},
                                 {"U32", 4}, {"F16", 2}, {"BF16", 2}, {"I16", 2}, {"U16", 2},
                                 {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};

void report(const ProgressCallback& progress, size_t done, size_t total, std::string_view step)
{
    if (progress)
        progress(total == 0 ? 1.0 : double(done) / double(total), step);
}

Tensor produce(const CheckpointEntry& e, const std::filesystem::path& out)
{
    Tensor t = e.bytes();
    const uint64_t expected = uint64_t(shapeElementCount(e.shape)) * checkpointItemSize(e.dtype);
    if (t.nbytes() != expected)
        throw Error(out.string() + ": tensor '" + e.name + "' produced " + std::to_string(t.nbytes()) +
                    " bytes where its header says " + std::to_string(expected));
    return t;
}

} // namespace

size_t checkpointItemSize(std::string_view dtype)
{
    for (const DTypeName& d : kDTypes)
        if (d.name == dtype)
            return d.size;
    throw Error("unknown checkpoint dtype '" + std::string(dtype) + "'");
}

std::string_view safetensorsDTypeName(DType t)
{
    switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F64: return "F64";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::I16: return "I16";
    case DType::U16: return "U16";
    case DType::I32: return "I32";
    case DType::U32: return "U32";
    case DType::I64: return "I64";
    case DType::U64: return "U64";
    case DType::Bool: return "BOOL";
    }
    return "U8";
}

void writeSafetensorsCheckpoint(const std::filesystem::path& out, const std::vector<CheckpointEntry>& entries,
                                const std::map<std::string, std::string>& metadata,
                                const CancellationToken& cancel, const ProgressCallback& progress)
{
    // Data order: by decreasing item size, so every tensor starts at a
    // multiple of its item size without gaps (the format forbids them).
    std::vector<size_t> order(entries.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return checkpointItemSize(entries[a].dtype) > checkpointItemSize(entries[b].dtype);
    });
    std::vector<std::pair<uint64_t, uint64_t>> offsets(entries.size());
    uint64_t position = 0;
    for (const size_t i : order) {
        const uint64_t bytes = uint64_t(shapeElementCount(entries[i].shape)) * checkpointItemSize(entries[i].dtype);
        offsets[i] = {position, position + bytes};
        position += bytes;
    }

    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata.empty()) {
        nlohmann::ordered_json meta = nlohmann::ordered_json::object();
        for (const auto& [key, value] : metadata)
            meta[key] = value;
        header["__metadata__"] = meta;
    }
    for (size_t i = 0; i < entries.size(); ++i) {
        const CheckpointEntry& e = entries[i];
        if (e.name.empty() || e.name == "__metadata__" || header.contains(e.name))
            throw Error(out.string() + ": tensor name '" + e.name + "' is empty, reserved or used twice");
        header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {offsets[i].first, offsets[i].second}}};
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    uint8_t length[8];
    for (int b = 0; b < 8; ++b)
        length[b] = uint8_t(uint64_t(text.size()) >> (8 * b));

    AtomicFile file(out);
    file.write(length, sizeof length);
    file.write(text.data(), text.size());
    for (size_t k = 0; k < order.size(); ++k) {
        cancel.check();
        const CheckpointEntry& e = entries[order[k]];
        report(progress, k, order.size(), e.name);
        const Tensor t = produce(e, out);
        file.write(t.rawData(), t.nbytes());
    }
    file.commit();
    report(progress, order.size(), order.size(), "done");
}

namespace {

// HDF5 identifiers closed when they go out of scope.
class Hid {
public:
    Hid(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
    ~Hid()
    {
        if (id_ >= 0)
            close_(id_);
    }
    Hid(const Hid&) = delete;
    Hid& operator=(const Hid&) = delete;
    hid_t get() const { return id_; }
    bool ok() const { return id_ >= 0; }

private:
    hid_t id_;
    herr_t (*close_)(hid_t);
};

// HDF5's automatic error printing off while writing; restored afterwards.
class QuietHdf5 {
public:
    QuietHdf5()
    {
        H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    }
    ~QuietHdf5()
    {
        H5Eclear2(H5E_DEFAULT);
        H5Eset_auto2(H5E_DEFAULT, func_, data_);
    }
    QuietHdf5(const QuietHdf5&) = delete;
    QuietHdf5& operator=(const QuietHdf5&) = delete;

private:
    H5E_auto2_t func_ = nullptr;
    void* data_ = nullptr;
};

// The file type of a dtype string (little-endian, as safetensors). fp8 codes
// are stored as U8; the manifest says what they are.
hid_t hdf5TypeOf(std::string_view dtype, const std::string& tensor, const std::filesystem::path& out)
{
    if (dtype == "F64") return H5Tcopy(H5T_IEEE_F64LE);
    if (dtype == "F32") return H5Tcopy(H5T_IEEE_F32LE);
    if (dtype == "I64") return H5Tcopy(H5T_STD_I64LE);
    if (dtype == "U64") return H5Tcopy(H5T_STD_U64LE);
    if (dtype == "I32") return H5Tcopy(H5T_STD_I32LE);
    if (dtype == "U32") return H5Tcopy(H5T_STD_U32LE);
    if (dtype == "I16") return H5Tcopy(H5T_STD_I16LE);
    if (dtype == "U16") return H5Tcopy(H5T_STD_U16LE);
    if (dtype == "I8") return H5Tcopy(H5T_STD_I8LE);
    if (dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return H5Tcopy(H5T_STD_U8LE);
    if (dtype == "F16" || dtype == "BF16") {
        // IEEE half (1-5-10, bias 15) or bfloat16 (1-8-7, bias 127), as h5py writes float16.
        const bool half = dtype == "F16";
        const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
        H5Tset_fields(t, 15, half ? 10 : 7, half ? 5 : 8, 0, half ? 10 : 7);
        H5Tset_size(t, 2);
        H5Tset_precision(t, 16);
        H5Tset_ebias(t, half ? 15 : 127);
        return t;
    }
    throw Error(out.string() + ": tensor '" + tensor + "' has dtype " + std::string(dtype) +
                ", which the HDF5 writer cannot store");
}

void writeStringAttribute(hid_t object, const char* name, const std::string& text, const std::string& where,
                          const std::filesystem::path& out)
{
    Hid type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.get(), std::max<size_t>(text.size(), 1));
    H5Tset_cset(type.get(), H5T_CSET_UTF8);
    Hid space(H5Screate(H5S_SCALAR), H5Sclose);
    Hid attr(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    std::string padded = text.empty() ? std::string(1, '\0') : text;
    if (!attr.ok() || H5Awrite(attr.get(), type.get(), padded.data()) < 0)
        throw Error(out.string() + ": cannot write the attribute '" + name + "' of " + where);
}

} // namespace

void writeHdf5Checkpoint(const std::filesystem::path& out, const std::vector<CheckpointEntry>& entries,
                         const std::string& manifest, const CancellationToken& cancel,
                         const ProgressCallback& progress)
{
    // libhdf5 opens files by name: a named temporary (removed on SIGTERM/SIGINT, cleaned after a SIGKILL).
    AtomicFile temporary(out, AtomicFile::Temporary::Named);
    {
        // libhdf5 runs here, in the process: no Hdf5File child may be forked meanwhile (io/hdf5_file.h).
        const std::lock_guard library(hdf5LibraryMutex());
        QuietHdf5 quiet;
        // Format 1.8 or later: attributes larger than 64 KiB (a big model's manifest) need dense storage.
        Hid fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
        H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST);
        Hid file(H5Fcreate(temporary.temporaryPath().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
        if (!file.ok())
            throw Error(out.string() + ": HDF5 cannot create the file");
        Hid lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
        H5Pset_create_intermediate_group(lcpl.get(), 1);
        writeStringAttribute(file.get(), "quantscope", manifest, "the root group", out);

        for (size_t k = 0; k < entries.size(); ++k) {
            cancel.check();
            const CheckpointEntry& e = entries[k];
            report(progress, k, entries.size(), e.name);
            std::string path = e.name;
            while (!path.empty() && path.front() == '/')
                path.erase(path.begin());
            if (path.empty() || path.find("//") != std::string::npos || path.back() == '/')
                throw Error(out.string() + ": tensor name '" + e.name + "' is not a valid HDF5 dataset path");
            const Tensor t = produce(e, out);
            Hid type(hdf5TypeOf(e.dtype, e.name, out), H5Tclose);
            std::vector<hsize_t> dims(e.shape.begin(), e.shape.end());
            Hid space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
                      H5Sclose);
            Hid set(H5Dcreate2(file.get(), path.c_str(), type.get(), space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
                    H5Dclose);
            if (!set.ok())
                throw Error(out.string() + ": HDF5 cannot create the dataset '/" + path +
                            "' (a name used twice, or a group of that name)");
            if (t.nbytes() > 0 && H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.rawData()) < 0)
                throw Error(out.string() + ": HDF5 cannot write the dataset '/" + path + "'");
            if (!e.attribute.empty())
                writeStringAttribute(set.get(), "quantscope", e.attribute, "'/" + path + "'", out);
        }
        if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0)
            throw Error(out.string() + ": HDF5 cannot flush the file");
    }
    temporary.commit();
    report(progress, entries.size(), entries.size(), "done");
}

} // namespace qs
