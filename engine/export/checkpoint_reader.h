#pragma once
// Reading a quantized checkpoint written by exportCheckpoint (export/checkpoint.h)
// back: the manifest, each weight's codes and parameters, and its dequantized
// values — bit for bit the fake-quant the weight quantizer computed.
// safetensors and HDF5 files are recognised by their extension.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "export/checkpoint.h"
#include "quant/scale.h"

namespace qs {

// What the manifest says of one quantized weight.
struct CheckpointTensorInfo {
    std::string name;
    QType qtype = QType::Int8;
    Shape shape;             // the weight's shape
    std::string dtype;       // the original weight's dtype ("F32", "BF16", ...)
    Shape block;             // elements per group along each axis of the weight
    std::string granularity; // "per_tensor", "per_channel", "tile", "microscaling"
    bool symmetric = true;
    bool narrowRange = false;
    ScaleRestriction restriction = ScaleRestriction::Float;
    float globalScale = 1.0f;                      // nvfp4
    std::string qvalueKey, scaleKey, zeroPointKey; // zeroPointKey empty when symmetric; lut types: qvalueKey
                                                   // is W.codes, scaleKey empty
    std::string lutKey;                            // lut types: W.lut (the tables); empty otherwise
    std::string correctedBiasKey;                  // bias_correction: the layer's bias, float32 [O]; empty otherwise
    std::string inputScaleKey; // awq: the weight is dequantize(codes) / input_scale (broadcast); empty otherwise
};

class QuantizedCheckpoint {
public:
    // Opens and checks the manifest; an Error names the file and the field
    // when it is missing or malformed.
    static QuantizedCheckpoint open(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return path_; }
    CheckpointFormat format() const { return format_; }
    const std::string& manifest() const { return manifestText_; } // the JSON text
    const std::string& toolVersion() const { return toolVersion_; }
    const std::string& sourceSha256() const { return sourceSha256_; } // empty when not recorded
    const std::string& rulesJson() const { return rulesJson_; }

    // Quantized weights, in manifest order, and tensors stored unchanged.
    const std::vector<std::string>& quantizedTensors() const { return quantizedNames_; }
    const std::vector<std::string>& floatTensors() const { return floatNames_; }
    bool isQuantized(const std::string& name) const { return infos_.count(name) != 0; }
    // Throws Error naming the tensor when it is not a quantized weight.
    const CheckpointTensorInfo& info(const std::string& name) const;

    // Scales and zero points (lut types: the tables) over the weight's own axes (layout {shape, block}).
    QuantParams params(const std::string& name) const;
    // One code per element, the weight's shape (unpacked), dtype codeDType(qtype).
    Tensor codes(const std::string& name) const;
    // Float32 values of a quantized weight (divided by its input scales when it
    // has them, float32 division as the simulation does); a float tensor as stored.
    Tensor dequantized(const std::string& name) const;
    // A stored key (safetensors) or dataset path without the leading `/` (HDF5), as stored.
    Tensor stored(const std::string& key) const;

private:
    struct Storage;
    std::filesystem::path path_;
    CheckpointFormat format_ = CheckpointFormat::Safetensors;
    std::shared_ptr<const Storage> storage_;
    std::string manifestText_, toolVersion_, sourceSha256_, rulesJson_;
    std::map<std::string, CheckpointTensorInfo> infos_;
    std::vector<std::string> quantizedNames_, floatNames_;
};

inline QuantizedCheckpoint readQuantizedCheckpoint(const std::filesystem::path& path)
{
    return QuantizedCheckpoint::open(path);
}

} // namespace qs
