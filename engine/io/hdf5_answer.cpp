#include "io/hdf5_answer.h"

#include <algorithm>
#include <limits>

#include "io/hdf5_library.h"

namespace qs::hdf5 {

void AnswerReader::garbled() const
{
    fail(file_, {}, "the HDF5 reading process sent a garbled answer");
}

void failContained(const std::filesystem::path& file, std::string_view object, const ContainedOutcome& outcome,
                   const std::string& doing)
{
    using Status = ContainedOutcome::Status;
    switch (outcome.status) {
    case Status::Crashed:
        fail(file, object, "the HDF5 library " + outcome.reason() + " while " + doing + ": the file is corrupted");
    case Status::OutOfMemory:
        fail(file, object,
             "the HDF5 library " + outcome.reason() + " while " + doing + ": the file is corrupted or too large");
    case Status::TimedOut:
        fail(file, object, "the HDF5 library " + outcome.reason() + " while " + doing + " (corrupted file?)");
    default:
        fail(file, object, "the HDF5 reading process " + outcome.reason() + " while " + doing);
    }
}

std::string encodeStructure(const std::vector<std::string>& groups, const std::vector<Hdf5Dataset>& datasets,
                            const Hdf5File::Attributes& attributes)
{
    AnswerWriter w;
    w.number(groups.size());
    for (const std::string& g : groups)
        w.text(g);
    w.number(datasets.size());
    for (const Hdf5Dataset& d : datasets) {
        w.text(d.path);
        w.number(d.shape.size());
        for (int64_t dim : d.shape)
            w.number(uint64_t(dim));
        w.number(d.dtype ? uint64_t(*d.dtype) + 1 : 0);
        w.text(d.skipReason);
        w.text(d.fileType);
        w.number(d.storedBytes);
    }
    w.number(attributes.byObject.size());
    for (const auto& [object, of] : attributes.byObject) {
        w.text(object);
        w.text(of.listError);
        w.number(of.attributes.size());
        for (const auto& a : of.attributes) {
            w.text(a.name);
            w.text(a.error);
            w.number(a.strings ? a.strings->size() + 1 : 0);
            if (a.strings)
                for (const std::string& s : *a.strings)
                    w.text(s);
        }
    }
    return w.take();
}

void decodeStructure(std::string_view bytes, const std::filesystem::path& path, std::vector<std::string>& groups,
                     std::vector<Hdf5Dataset>& datasets, Hdf5File::Attributes& attributes)
{
    AnswerReader r(bytes, path);
    for (size_t n = r.count(8); n > 0; --n)
        groups.push_back(r.text());
    for (size_t n = r.count(48); n > 0; --n) {
        Hdf5Dataset d;
        d.path = r.text();
        for (size_t rank = r.count(8); rank > 0; --rank)
            d.shape.push_back(int64_t(r.number() & uint64_t(std::numeric_limits<int64_t>::max())));
        const uint64_t dtype = r.number();
        if (dtype > 0)
            d.dtype = DType(uint8_t(std::min<uint64_t>(dtype - 1, uint64_t(DType::Bool))));
        d.skipReason = r.text();
        d.fileType = r.text();
        d.storedBytes = r.number();
        datasets.push_back(std::move(d));
    }
    for (size_t n = r.count(24); n > 0; --n) {
        const std::string object = r.text();
        Hdf5File::Attributes::OfObject& of = attributes.byObject[object];
        of.listError = r.text();
        for (size_t count = r.count(24); count > 0; --count) {
            Hdf5File::Attributes::Attribute a;
            a.name = r.text();
            a.error = r.text();
            if (const uint64_t strings = r.number(); strings > 0) {
                a.strings.emplace();
                for (uint64_t i = 1; i < strings; ++i)
                    a.strings->push_back(r.text());
            }
            of.attributes.push_back(std::move(a));
        }
    }
    if (!r.done())
        fail(path, {}, "the HDF5 reading process sent a garbled answer");
}

} // namespace qs::hdf5
