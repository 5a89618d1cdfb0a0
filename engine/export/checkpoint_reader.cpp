#include "export/checkpoint_reader.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hdf5_file.h"
#include "io/safetensors.h"
#include "numerics/packing.h"
#include "quant/kernels.h"

namespace qs {

struct QuantizedCheckpoint::Storage {
    std::optional<SafetensorsFile> safetensors;
    std::optional<Hdf5File> hdf5;
};

namespace {

template <class T> T field(const nlohmann::json& j, const char* key, const std::string& where)
{
    if (!j.is_object() || !j.contains(key))
        throw Error(where + ": the manifest lacks the field '" + key + "'");
    try {
        return j.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
        throw Error(where + ": the manifest field '" + key + "' has the wrong type");
    }
}

} // namespace

QuantizedCheckpoint QuantizedCheckpoint::open(const std::filesystem::path& path)
{
    QuantizedCheckpoint c;
    c.path_ = path;
    const std::optional<CheckpointFormat> format = checkpointFormatForPath(path);
    if (!format)
        throw Error(path.string() + ": a quantized checkpoint is a .safetensors, .h5 or .hdf5 file");
    c.format_ = *format;
    auto storage = std::make_shared<Storage>();
    if (*format == CheckpointFormat::Safetensors) {
        storage->safetensors.emplace(SafetensorsFile::open(path));
        const auto& meta = storage->safetensors->metadata();
        const auto found = meta.find("quantscope");
        if (found == meta.end())
            throw Error(path.string() + ": no quantscope manifest (__metadata__[\"quantscope\"]); not a quantized "
                                        "checkpoint written by Quantscope");
        c.manifestText_ = found->second;
    } else {
        storage->hdf5.emplace(Hdf5File::open(path));
        const std::optional<std::string> text = storage->hdf5->stringAttribute("/", "quantscope");
        if (!text)
            throw Error(path.string() + ": no quantscope manifest (root attribute 'quantscope'); not a quantized "
                                        "checkpoint written by Quantscope");
        c.manifestText_ = *text;
    }
    c.storage_ = storage;

    const std::string where = path.string();
    nlohmann::ordered_json m;
    try {
        m = nlohmann::ordered_json::parse(c.manifestText_);
    } catch (const nlohmann::json::exception& e) {
        throw Error(where + ": the manifest is not valid JSON (" + e.what() + ")");
    }
    if (field<std::string>(m, "format", where) != "quantscope-checkpoint" ||
        field<int>(m, "format_version", where) != 1)
        throw Error(where + ": the manifest is not a quantscope-checkpoint of format_version 1");
    c.toolVersion_ = field<std::string>(m, "tool_version", where);
    const auto& source = m.at("source");
    if (source.is_object() && source.contains("sha256") && source.at("sha256").is_string())
        c.sourceSha256_ = source.at("sha256").get<std::string>();
    if (m.contains("rules"))
        c.rulesJson_ = m.at("rules").dump(2);
    c.floatNames_ = field<std::vector<std::string>>(m, "float_tensors", where);
    if (!m.contains("tensors") || !m.at("tensors").is_object())
        throw Error(where + ": the manifest lacks the object 'tensors'");
    for (const auto& [name, t] : m.at("tensors").items()) {
        const std::string at = where + ", tensor '" + name + "'";
        CheckpointTensorInfo info;
        info.name = name;
        const std::string qtype = field<std::string>(t, "qtype", at);
        const std::optional<QType> q = parseQType(qtype);
        if (!q)
            throw Error(at + ": unknown qtype '" + qtype + "'");
        info.qtype = *q;
        info.shape = field<Shape>(t, "shape", at);
        info.dtype = field<std::string>(t, "dtype", at);
        info.block = field<Shape>(t, "block", at);
        info.granularity = field<std::string>(t, "granularity", at);
        info.symmetric = field<bool>(t, "symmetric", at);
        info.narrowRange = field<bool>(t, "narrow_range", at);
        const std::optional<ScaleRestriction> r = parseScaleRestriction(field<std::string>(t, "scale_restriction", at));
        if (!r)
            throw Error(at + ": unknown scale_restriction");
        info.restriction = *r;
        if (info.qtype == QType::NvFp4)
            info.globalScale = field<float>(t, "global_scale_value", at);
        if (isLut(info.qtype)) {
            info.qvalueKey = field<std::string>(t, "codes", at);
            info.lutKey = field<std::string>(t, "lut", at);
        } else {
            info.qvalueKey = field<std::string>(t, "qvalue", at);
            info.scaleKey = field<std::string>(t, "scale", at);
        }
        if (!info.symmetric)
            info.zeroPointKey = field<std::string>(t, "zero_point", at);
        if (const auto it = t.find("corrected_bias"); it != t.end() && !it->is_null())
            info.correctedBiasKey = field<std::string>(t, "corrected_bias", at);
        if (const auto it = t.find("input_scale"); it != t.end() && !it->is_null())
            info.inputScaleKey = field<std::string>(t, "input_scale", at);
        if (info.block.size() != info.shape.size())
            throw Error(at + ": 'block' has " + std::to_string(info.block.size()) + " axes, the shape " +
                        std::to_string(info.shape.size()));
        c.quantizedNames_.push_back(name);
        c.infos_.emplace(name, std::move(info));
    }
    return c;
}

const CheckpointTensorInfo& QuantizedCheckpoint::info(const std::string& name) const
{
    const auto found = infos_.find(name);
    if (found == infos_.end())
        throw Error(path_.string() + ": tensor '" + name + "' is not a quantized weight of this checkpoint");
    return found->second;
}

Tensor QuantizedCheckpoint::stored(const std::string& key) const
{
    if (storage_->safetensors)
        return storage_->safetensors->tensor(key);
    // The writer strips leading slashes from keys to make dataset paths (ONNX names may start with one).
    std::string path = key.substr(std::min(key.find_first_not_of('/'), key.size()));
    path.insert(path.begin(), '/');
    return storage_->hdf5->read(path);
}

QuantParams QuantizedCheckpoint::params(const std::string& name) const
{
    const CheckpointTensorInfo& i = info(name);
    QuantParams p;
    p.qtype = i.qtype;
    p.layout = BlockLayout{i.shape, i.block};
    p.symmetric = i.symmetric;
    p.options = {i.narrowRange, i.restriction};
    p.globalScale = i.globalScale;
    if (isLut(i.qtype)) {
        Shape shape = p.layout.gridShape();
        shape.push_back(int64_t(1) << qtypeInfo(i.qtype).bits);
        const Tensor lut = stored(i.lutKey);
        if (lut.dtype() != DType::F32 || lut.shape() != shape)
            throw Error(path_.string() + ": '" + i.lutKey + "' must be float32 of shape " + shapeToString(shape) +
                        ", is " + std::string(dtypeName(lut.dtype())) + " " + shapeToString(lut.shape()));
        const auto v = lut.values<float>();
        p.lut.assign(v.begin(), v.end());
        const size_t k = size_t(shape.back());
        for (size_t g = 0; g < p.lut.size() / k; ++g) {
            const float largest = std::max(std::fabs(p.lut[g * k]), std::fabs(p.lut[g * k + k - 1]));
            p.scales.push_back(largest > 0 ? largest : 1.0f);
        }
        checkQuantParams(p, i.shape, name);
        return p;
    }
    const Tensor scale = stored(i.scaleKey);
    if (scale.dtype() != DType::F32 || scale.shape() != p.layout.gridShape())
        throw Error(path_.string() + ": '" + i.scaleKey + "' must be float32 of shape " +
                    shapeToString(p.layout.gridShape()) + ", is " + std::string(dtypeName(scale.dtype())) + " " +
                    shapeToString(scale.shape()));
    const auto s = scale.values<float>();
    p.scales.assign(s.begin(), s.end());
    if (!i.symmetric) {
        const Tensor zp = stored(i.zeroPointKey);
        if (zp.shape() != p.layout.gridShape())
            throw Error(path_.string() + ": '" + i.zeroPointKey + "' must have the shape " +
                        shapeToString(p.layout.gridShape()));
        const Tensor z = zp.toFloat32();
        for (const float v : z.values<float>())
            p.zeroPoints.push_back(int32_t(v));
    }
    checkQuantParams(p, i.shape, name);
    return p;
}

Tensor QuantizedCheckpoint::codes(const std::string& name) const
{
    const CheckpointTensorInfo& i = info(name);
    const Tensor q = stored(i.qvalueKey);
    const DType want = codeDType(i.qtype);
    const int bits = qtypeInfo(i.qtype).bits;
    const size_t n = size_t(shapeElementCount(i.shape));
    if (q.dtype() != want)
        throw Error(path_.string() + ": '" + i.qvalueKey + "' must hold " + std::string(dtypeName(want)) +
                    " codes, holds " + std::string(dtypeName(q.dtype())));
    if (want != DType::U8 || codesPerByte(bits) == 1) { // int16 codes are never packed
        if (size_t(q.numel()) != n)
            throw Error(path_.string() + ": '" + i.qvalueKey + "' holds " + std::to_string(q.numel()) +
                        " codes for a tensor of shape " + shapeToString(i.shape));
        return q.reshaped(i.shape);
    }
    if (size_t(q.numel()) != packedByteCount(n, bits))
        throw Error(path_.string() + ": '" + i.qvalueKey + "' holds " + std::to_string(q.numel()) + " bytes; " +
                    std::to_string(n) + " packed " + std::to_string(bits) + "-bit codes take " +
                    std::to_string(packedByteCount(n, bits)));
    Tensor out(DType::U8, i.shape);
    unpackCodes(q.values<uint8_t>(), bits, out.mutableValues<uint8_t>());
    return out;
}

Tensor QuantizedCheckpoint::dequantized(const std::string& name) const
{
    if (!isQuantized(name))
        return stored(name);
    Tensor w = dequantize(codes(name), params(name));
    const CheckpointTensorInfo& i = info(name);
    if (i.inputScaleKey.empty())
        return w;
    // awq: one scale per input channel, 1 on every other axis; a grouped Conv's [O, I, 1, …] (each output
    // channel its group's scales): every axis 1 or the weight's own, broadcast over the weight.
    const Tensor s = stored(i.inputScaleKey).toFloat32();
    const Shape& shape = w.shape();
    bool fits = s.rank() == int(shape.size());
    for (int a = 0; fits && a < s.rank(); ++a)
        fits = s.shape()[size_t(a)] == 1 || s.shape()[size_t(a)] == shape[size_t(a)];
    if (!fits)
        throw Error(path_.string() + ": '" + i.inputScaleKey + "' " + shapeToString(s.shape()) +
                    " is not one scale per input channel of the weight " + shapeToString(shape));
    const auto sv = s.values<float>();
    auto wv = w.mutableValues<float>();
    const size_t rank = shape.size();
    std::vector<int64_t> index(rank, 0);
    for (size_t k = 0; k < wv.size(); ++k) {
        int64_t at = 0; // the element of s that element k of the weight divides by
        for (size_t a = 0; a < rank; ++a)
            at = at * s.shape()[a] + (s.shape()[a] == 1 ? 0 : index[a]);
        wv[k] = wv[k] / sv[size_t(at)];
        for (size_t a = rank; a-- > 0;) {
            if (++index[a] < shape[a])
                break;
            index[a] = 0;
        }
    }
    return w;
}

} // namespace qs
