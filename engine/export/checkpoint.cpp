#include "export/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <malloc.h>
#include <numeric>
#include <set>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/sha256.h"
#include "export/checkpoint_sinks.h"
#include "io/safetensors.h"
#include "numerics/float_formats.h"
#include "numerics/packing.h"
#include "quant/kernels.h"

namespace qs {

namespace {

// out.shape[i] = t.shape[perm[i]]; any dtype (bytes are moved as they are).

// Where the weights come from. A weights-only safetensors model is read from
// its file with pread, tensor by tensor, instead of through the mapping the
// model borrows from: touched mapped pages count as resident memory, so a
// multi-GB checkpoint would otherwise end up resident as a whole.
class WeightSource {
public:
    explicit WeightSource(const Model& model) : model_(model)
    {
        if (model.weightsOnly && model.format == "safetensors" && !model.sourcePath.empty()) {
            file_.emplace(SafetensorsFile::open(model.sourcePath));
            for (const std::filesystem::path& f : file_->files())
                dataOffsets_.push_back(dataOffsetOf(f));
        }
    }

    bool streaming() const { return file_.has_value(); }

    // Gives the memory of the tensors released so far back to the system.
    // glibc raises its mmap threshold after the first large free, so later
    // tensor-sized buffers come from per-thread heaps that keep freed pages:
    // without this, resident memory grows to several tensors (measured: 96 MiB
    // instead of 21 MiB for 16 MiB tensors), with it stays near one.
    void releaseFreedMemory() const
    {
        if (file_)
            malloc_trim(0);
    }

    std::string dtypeName(const std::string& name, const Tensor& t) const
    {
        if (file_)
            if (const SafetensorsEntry* e = file_->find(name))
                return e->sourceDtype;
        return std::string(safetensorsDTypeName(t.dtype()));
    }

    // A tensor read from the model's own storage (a mapped checkpoint) is not
    // needed again by this export: its pages may leave the resident set.
    void release(const std::string& name) const
    {
        if (const Tensor* t = model_.initializer(name); t && !file_)
            releaseResidentPages(*t);
    }

    // The tensor, in memory owned by the caller when streaming.
    Tensor read(const std::string& name) const
    {
        const Tensor* t = model_.initializer(name);
        if (!t)
            throw Error("tensor '" + name + "': not a constant of the model, so it cannot be exported");
        if (!file_)
            return *t;
        const SafetensorsEntry* e = file_->find(name);
        if (!e)
            return *t;
        Tensor out(e->dtype, e->shape);
        const std::filesystem::path path = file_->files().at(e->file);
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            throw Error(path.string() + ": cannot be opened to read tensor '" + name + "'");
        auto* p = static_cast<char*>(out.mutableRawData());
        uint64_t done = 0, size = e->end - e->begin, at = dataOffsets_.at(e->file) + e->begin;
        while (done < size) {
            const ssize_t n =
                ::pread(fd, p + done, size_t(std::min<uint64_t>(size - done, 1u << 30)), off_t(at + done));
            if (n <= 0) {
                ::close(fd);
                throw Error(path.string() + ": cannot read tensor '" + name + "'");
            }
            done += uint64_t(n);
        }
        ::close(fd);
        return out;
    }

private:
    static uint64_t dataOffsetOf(const std::filesystem::path& file)
    {
        uint8_t b[8] = {};
        const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
        const bool ok = fd >= 0 && ::pread(fd, b, 8, 0) == 8;
        if (fd >= 0)
            ::close(fd);
        if (!ok)
            throw Error(file.string() + ": cannot read the safetensors header length");
        uint64_t n = 0;
        for (int i = 7; i >= 0; --i)
            n = n << 8 | b[i];
        return 8 + n;
    }

    const Model& model_;
    std::optional<SafetensorsFile> file_;
    std::vector<uint64_t> dataOffsets_;
};

// One weight written quantized. Its parameters are known before any data is
// read (the header needs the shapes); they are computed on first use.
struct WeightJob {
    size_t layer = 0;
    const QuantizableLayer* info = nullptr;
    const LayerQuantization* plan = nullptr;
    std::shared_ptr<const QuantizedWeight> cached;
    Shape shape;           // the weight's own shape
    std::vector<int> perm; // the quantization layout's axis order: layout axis i = weight axis perm[i]
    BlockLayout layout;    // the layout over the permuted weight
    Shape block, grid;     // block and scale shape in the weight's own axis order
    std::optional<QuantParams> params;
};

DType zeroPointDType(QType t)
{
    const QuantTypeInfo& q = qtypeInfo(t);
    return q.bits > 8 ? DType::I16 : q.isSigned ? DType::I8 : DType::U8;
}

// The weight's parameters, from the cache or computed here exactly as the
// weight quantizer does (quantization/weight_quantizer.cpp: the weight permuted
// to the plan's weightAxes, the channel axis renumbered), and the block and
// scale shape in the weight's own axis order.
const QuantParams& paramsOf(WeightJob& job, const WeightSource& source)
{
    if (job.params)
        return *job.params;
    const std::string& name = job.info->weightName;
    const int rank = int(job.shape.size());
    job.perm.resize(size_t(rank));
    std::iota(job.perm.begin(), job.perm.end(), 0);
    if (job.cached) {
        if (!job.cached->transposedAxes.empty())
            job.perm = job.cached->transposedAxes;
        job.params = job.cached->quantization.params;
    } else {
        if (job.plan->weightAlgorithm.kind != WeightAlgorithmKind::Rtn)
            throw Error("tensor '" + name + "': its weight is rounded by algorithm " +
                        job.plan->weightAlgorithm.toString() + ", which the weight quantizer computes; it has none");
        if (!job.plan->weightAxes.empty())
            job.perm = job.plan->weightAxes;
        QuantizationSpec spec = *job.plan->weight;
        if (rank > 0) {
            const int axis = normalizeAxis(spec.axis, rank, "channel axis");
            spec.axis = int(std::find(job.perm.begin(), job.perm.end(), axis) - job.perm.begin());
        }
        const Tensor w = source.read(name).permuted(job.perm);
        job.params = computeQuantization(w, spec, name).params;
    }
    job.layout = job.params->layout;
    if (job.perm.size() != size_t(rank) || job.layout.shape.size() != size_t(rank))
        throw Error("tensor '" + name + "': its quantization does not match the weight's rank");
    job.block.assign(size_t(rank), 1);
    job.grid.assign(size_t(rank), 1);
    const Shape grid = job.layout.gridShape();
    for (int i = 0; i < rank; ++i) {
        const size_t a = size_t(job.perm[size_t(i)]);
        if (job.layout.shape[size_t(i)] != job.shape[a])
            throw Error("tensor '" + name + "': the cached quantization was computed for shape " +
                        shapeToString(job.layout.shape) + ", the weight is " + shapeToString(job.shape));
        job.block[a] = job.layout.block[size_t(i)];
        job.grid[a] = grid[size_t(i)];
    }
    return *job.params;
}

// The group values (scales or zero points, in layout order) in the weight's axis order.
template <class T> Tensor groupTensor(const WeightJob& job, DType dtype, const std::vector<T>& values)
{
    Tensor t = Tensor::fromVector(dtype, job.layout.gridShape(), values);
    return t.permuted(inversePermutation(job.perm));
}

// A lut weight's tables in the weight's axis order: the scale shape with a last
// axis of 2^bits entries.
Tensor lutTensor(const WeightJob& job)
{
    Shape shape = job.layout.gridShape();
    shape.push_back(int64_t(1) << qtypeInfo(job.params->qtype).bits);
    Tensor t = Tensor::fromVector(DType::F32, shape, job.params->lut);
    std::vector<int> perm = inversePermutation(job.perm);
    perm.push_back(int(perm.size()));
    return t.permuted(perm);
}

Shape lutShape(const WeightJob& job)
{
    Shape shape = job.grid;
    shape.push_back(int64_t(1) << qtypeInfo(job.params->qtype).bits);
    return shape;
}

// Codes per byte of W.qvalue: packed 1-, 2- and 4-bit codes; one code per element otherwise (int16 included).
int storedCodesPerByte(QType t)
{
    return codeDType(t) == DType::U8 ? codesPerByte(qtypeInfo(t).bits) : 1;
}

Shape qvalueShape(const WeightJob& job)
{
    const QType t = job.plan->weight->qtype;
    const int perByte = storedCodesPerByte(t);
    const int64_t n = shapeElementCount(job.shape);
    if (perByte == 1)
        return job.shape;
    if (!job.shape.empty() && job.shape.back() % perByte == 0) {
        Shape s = job.shape;
        s.back() /= perByte;
        return s;
    }
    return {int64_t(packedByteCount(size_t(n), qtypeInfo(t).bits))};
}

Tensor qvalueOf(WeightJob& job, const WeightSource& source)
{
    const QuantParams& params = paramsOf(job, source);
    // An algorithm other than rtn chose grid values that are not the float
    // weight's nearest ones: its fake-quantized weight quantizes back to exactly them
    // (awq: the grid values of the scaled weight, before the division by its input scales).
    const bool chosen = job.cached && job.cached->algorithm.kind != WeightAlgorithmKind::Rtn;
    const bool awq = chosen && job.cached->algorithm.kind == WeightAlgorithmKind::Awq;
    const Tensor w = (awq      ? job.cached->grid
                      : chosen ? job.cached->fakeQuant
                               : source.read(job.info->weightName))
                         .permuted(job.perm);
    const Tensor codes = quantize(w, params, job.plan->weightRounding, job.plan->weightSeed, job.info->weightName)
                             .permuted(inversePermutation(job.perm));
    source.release(job.info->weightName);
    const QType t = params.qtype;
    if (storedCodesPerByte(t) == 1)
        return codes;
    Tensor packed(DType::U8, qvalueShape(job));
    packCodes(codes.values<uint8_t>(), qtypeInfo(t).bits, packed.mutableValues<uint8_t>());
    return packed;
}

std::string granularityName(const WeightJob& job)
{
    if (isMicroscaling(job.plan->weight->qtype))
        return "microscaling";
    if (job.layout.isPerTensor())
        return "per_tensor";
    return job.plan->weight->tileSize ? "tile" : "per_channel";
}

nlohmann::ordered_json manifestEntry(const WeightJob& job, const std::string& sourceDtype)
{
    const QuantizationSpec& spec = *job.plan->weight;
    const QuantTypeInfo& q = qtypeInfo(spec.qtype);
    const std::string& w = job.info->weightName;
    const std::string granularity = granularityName(job);
    const int rank = int(job.shape.size());
    nlohmann::ordered_json e;
    e["qtype"] = std::string(q.name);
    e["bits"] = q.bits;
    e["shape"] = job.shape;
    e["dtype"] = sourceDtype;
    e["code_dtype"] = std::string(safetensorsDTypeName(codeDType(spec.qtype)));
    e["packed"] = storedCodesPerByte(spec.qtype) > 1;
    e["codes_per_byte"] = storedCodesPerByte(spec.qtype);
    e["granularity"] = granularity;
    e["axis"] = granularity == "per_channel" || granularity == "tile"
                    ? nlohmann::ordered_json(normalizeAxis(spec.axis, rank, "channel axis"))
                    : nlohmann::ordered_json(nullptr);
    const int lastLayoutAxis = rank > 0 ? job.perm.back() : 0;
    e["tile_axis"] = granularity == "tile" ? nlohmann::ordered_json(lastLayoutAxis) : nlohmann::ordered_json(nullptr);
    e["tile_size"] = granularity == "tile" ? nlohmann::ordered_json(job.block[size_t(lastLayoutAxis)])
                                           : nlohmann::ordered_json(nullptr);
    e["block"] = job.block;
    e["scale_shape"] = job.grid;
    e["symmetric"] = job.params ? job.params->symmetric : true;
    e["narrow_range"] = spec.options.narrowRange;
    e["scale_restriction"] = std::string(scaleRestrictionName(spec.options.restriction));
    e["method"] = spec.method.toString();
    e["rounding"] = std::string(roundingName(job.plan->weightRounding));
    e["seed"] = job.plan->weightSeed;
    e["algorithm"] = job.plan->weightAlgorithm.toString();
    // bias_correction: the layer's bias to use in place of its own, float32 [O].
    e["corrected_bias"] = job.cached && job.cached->correctedBias.rawData() && job.cached->layer == job.plan->layer
                              ? nlohmann::ordered_json(w + ".corrected_bias")
                              : nlohmann::ordered_json(nullptr);
    // awq: the weight is dequantize(qvalue) / input_scale, broadcast over the weight's axes.
    e["input_scale"] = job.cached && job.cached->inputScale.rawData() ? nlohmann::ordered_json(w + ".input_scale")
                                                                      : nlohmann::ordered_json(nullptr);
    e["module_path"] = job.info->modulePath;
    e["op_type"] = job.info->opType;
    const bool lut = isLut(spec.qtype);
    e["qvalue"] = lut ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(w + ".qvalue");
    e["scale"] = lut ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(w + ".scale");
    // lut types: the codes (indices into the group's table) and the tables.
    e["codes"] = lut ? nlohmann::ordered_json(w + ".codes") : nlohmann::ordered_json(nullptr);
    e["lut"] = lut ? nlohmann::ordered_json(w + ".lut") : nlohmann::ordered_json(nullptr);
    e["lut_shape"] = lut ? nlohmann::ordered_json(lutShape(job)) : nlohmann::ordered_json(nullptr);
    e["zero_point"] = job.params && !job.params->symmetric ? nlohmann::ordered_json(w + ".zero_point")
                                                           : nlohmann::ordered_json(nullptr);
    e["block_scale"] =
        isMicroscaling(spec.qtype) ? nlohmann::ordered_json(w + ".block_scale") : nlohmann::ordered_json(nullptr);
    if (spec.qtype == QType::NvFp4) {
        e["global_scale"] = w + ".global_scale";
        e["global_scale_value"] = job.params->globalScale;
    } else {
        e["global_scale"] = nullptr;
    }
    return e;
}

} // namespace

std::optional<CheckpointFormat> checkpointFormatForPath(const std::filesystem::path& path)
{
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (ext == ".safetensors")
        return CheckpointFormat::Safetensors;
    if (ext == ".h5" || ext == ".hdf5")
        return CheckpointFormat::Hdf5;
    return std::nullopt;
}

ExportSummary exportCheckpoint(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
                               const RuleSet& rules, const std::filesystem::path& out,
                               const CheckpointExportOptions& options, const CancellationToken& cancel,
                               const ProgressCallback& progress)
{
    const std::optional<CheckpointFormat> format = checkpointFormatForPath(out);
    if (!format)
        throw Error(out.string() + ": a quantized checkpoint is written as .safetensors, .h5 or .hdf5");
    ExportSummary summary;
    summary.path = out;
    const WeightSource source(model);

    // The weights to quantize, by tensor name (a weight shared by two layers is written once).
    std::vector<WeightJob> jobs;
    std::map<std::string, size_t> jobByTensor;
    for (const LayerQuantization& lq : plan.layers()) {
        const QuantizableLayer& info = model.layers.at(lq.layer);
        if (!lq.problem.empty()) {
            summary.notes.push_back("layer '" + info.modulePath + "' stays float: " + lq.problem);
            continue;
        }
        if (!lq.weight)
            continue;
        if (jobByTensor.count(info.weightName)) {
            summary.notes.push_back("layer '" + info.modulePath + "' shares the weight '" + info.weightName +
                                    "', written once with the rule of layer '" +
                                    jobs[jobByTensor[info.weightName]].info->modulePath + "'");
            continue;
        }
        const Tensor* w = model.initializer(info.weightName);
        if (!w)
            throw Error("tensor '" + info.weightName + "' (layer '" + info.modulePath +
                        "'): not a constant of the model, so it cannot be exported");
        WeightJob job;
        job.layer = lq.layer;
        job.info = &info;
        job.plan = &lq;
        job.cached = weights.find(lq.layer);
        job.shape = w->shape();
        jobByTensor[info.weightName] = jobs.size();
        jobs.push_back(std::move(job));
    }

    // Parameters first: the manifest in the header states them. Weights the
    // cache lacks are read once here and once more when their codes are written.
    for (size_t i = 0; i < jobs.size(); ++i) {
        cancel.check();
        if (progress)
            progress(0.5 * double(i) / double(std::max<size_t>(jobs.size(), 1)), jobs[i].info->weightName);
        paramsOf(jobs[i], source);
        source.releaseFreedMemory();
    }

    nlohmann::ordered_json manifest;
    manifest["format"] = "quantscope-checkpoint";
    manifest["format_version"] = 1;
    manifest["tool_version"] = QUANTSCOPE_VERSION;
    manifest["mode"] = std::string(quantizationModeName(plan.mode()));
    manifest["source"] = {
        {"file", model.sourcePath.filename().string()},
        {"format", model.format},
        {"sha256", options.hashSource && !model.sourcePath.empty() && std::filesystem::is_regular_file(model.sourcePath)
                       ? nlohmann::ordered_json(sha256OfModel(model.sourcePath))
                       : nlohmann::ordered_json(nullptr)}};
    manifest["rules"] = nlohmann::ordered_json::parse(rules.toJson());
    manifest["tensors"] = nlohmann::ordered_json::object();
    manifest["float_tensors"] = nlohmann::ordered_json::array();

    std::vector<CheckpointEntry> entries;
    for (const NamedTensor& nt : model.initializers()) {
        const auto found = jobByTensor.find(nt.name);
        const std::string dtype = source.dtypeName(nt.name, nt.tensor);
        if (found == jobByTensor.end()) {
            if (!options.includeFloatTensors)
                continue;
            manifest["float_tensors"].push_back(nt.name);
            const std::string name = nt.name;
            entries.push_back({name, dtype, nt.tensor.shape(), [&source, name] { return source.read(name); }, ""});
            continue;
        }
        WeightJob& job = jobs[found->second];
        const QuantParams& params = *job.params;
        const nlohmann::ordered_json entry = manifestEntry(job, dtype);
        manifest["tensors"][nt.name] = entry;
        summary.floatBytes += int64_t(nt.tensor.nbytes());
        ++summary.quantizedWeights;
        const QType t = params.qtype;
        const size_t firstEntry = entries.size();
        if (isLut(t)) {
            entries.push_back({nt.name + ".codes", "U8", qvalueShape(job),
                               [&job, &source] { return qvalueOf(job, source); }, entry.dump()});
            entries.push_back({nt.name + ".lut", "F32", lutShape(job), [&job] { return lutTensor(job); }, ""});
        } else {
            entries.push_back({nt.name + ".qvalue", std::string(safetensorsDTypeName(codeDType(t))), qvalueShape(job),
                               [&job, &source] { return qvalueOf(job, source); }, entry.dump()});
            entries.push_back({nt.name + ".scale", "F32", job.grid,
                               [&job] { return groupTensor(job, DType::F32, job.params->scales); }, ""});
        }
        if (!params.symmetric) {
            entries.push_back({nt.name + ".zero_point", std::string(safetensorsDTypeName(zeroPointDType(t))), job.grid,
                               [&job] {
                                   const Tensor zp = groupTensor(job, DType::I32, job.params->zeroPoints);
                                   Tensor out(zeroPointDType(job.params->qtype), zp.shape());
                                   const auto z = zp.values<int32_t>();
                                   for (size_t i = 0; i < z.size(); ++i) {
                                       if (out.dtype() == DType::I16)
                                           out.mutableValues<int16_t>()[i] = int16_t(z[i]);
                                       else if (out.dtype() == DType::I8)
                                           out.mutableValues<int8_t>()[i] = int8_t(z[i]);
                                       else
                                           out.mutableValues<uint8_t>()[i] = uint8_t(z[i]);
                                   }
                                   return out;
                               },
                               ""});
        }
        if (isMicroscaling(t)) {
            std::vector<uint8_t> codes(params.scales.size());
            for (size_t g = 0; g < codes.size(); ++g)
                codes[g] = t == QType::NvFp4 ? encodeFp8E4M3(params.scales[g] / params.globalScale)
                                             : encodeE8M0(std::ilogb(params.scales[g]));
            entries.push_back({nt.name + ".block_scale", t == QType::NvFp4 ? "F8_E4M3" : "U8", job.grid,
                               [&job, codes] { return groupTensor(job, DType::U8, codes); }, ""});
        }
        if (t == QType::NvFp4) {
            const float g = params.globalScale;
            entries.push_back({nt.name + ".global_scale",
                               "F32",
                               {1},
                               [g] { return Tensor::fromVector(DType::F32, {1}, std::vector<float>{g}); },
                               ""});
        }
        if (job.cached && job.cached->correctedBias.rawData() && job.cached->layer == job.plan->layer) {
            const Tensor b = job.cached->correctedBias;
            entries.push_back({nt.name + ".corrected_bias", "F32", b.shape(), [b] { return b; }, ""});
        }
        if (job.cached && job.cached->inputScale.rawData()) {
            const Tensor s = job.cached->inputScale;
            entries.push_back({nt.name + ".input_scale", "F32", s.shape(), [s] { return s; }, ""});
        }
        for (size_t i = firstEntry; i < entries.size(); ++i)
            summary.quantizedBytes +=
                shapeElementCount(entries[i].shape) * int64_t(checkpointItemSize(entries[i].dtype));
    }
    summary.tensors = int64_t(entries.size());
    if (source.streaming())
        for (CheckpointEntry& e : entries)
            e.bytes = [&source, produce = std::move(e.bytes)] {
                source.releaseFreedMemory(); // the previous entry's tensors are gone by now
                return produce();
            };

    const std::string manifestText = manifest.dump();
    const ProgressCallback dataProgress = [&progress](double f, std::string_view step) {
        if (progress)
            progress(0.5 + 0.5 * f, step);
    };
    if (*format == CheckpointFormat::Safetensors) {
        std::map<std::string, std::string> metadata =
            model.format == "safetensors" ? model.metadata : std::map<std::string, std::string>{};
        metadata["quantscope"] = manifestText;
        writeSafetensorsCheckpoint(out, entries, metadata, cancel, dataProgress);
    } else {
        writeHdf5Checkpoint(out, entries, manifestText, cancel, dataProgress);
    }
    return summary;
}

} // namespace qs
