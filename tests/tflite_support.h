#pragma once
// Small LiteRT models written field by field in the tests (export/flatbuffer.h
// over export/tflite_schema.h): one operator with its tensors, for the integer
// simulation's per-operator checks and for running the same model in LiteRT.js.

#include <cstring>
#include <string>
#include <vector>

#include "export/flatbuffer.h"
#include "export/tflite_schema.h"

namespace qs::test {

class TinyTflite {
public:
    // An int8 tensor per tensor (scale, zero point); `codes` makes it a constant.
    int32_t int8(const std::string& name, std::vector<int32_t> shape, float scale, int64_t zeroPoint,
                 std::vector<int8_t> codes = {})
    {
        return add({name, tflite::TensorType::Int8, std::move(shape), {scale}, {zeroPoint}, 0, bytes(codes)});
    }
    // An int8 constant per channel along `dimension`.
    int32_t int8PerChannel(const std::string& name, std::vector<int32_t> shape, std::vector<float> scales,
                           int32_t dimension, std::vector<int8_t> codes)
    {
        std::vector<int64_t> zeros(scales.size(), 0);
        return add(
            {name, tflite::TensorType::Int8, std::move(shape), std::move(scales), zeros, dimension, bytes(codes)});
    }
    int32_t int32(const std::string& name, std::vector<int32_t> shape, std::vector<int32_t> values,
                  std::vector<float> scales = {})
    {
        std::vector<int64_t> zeros(scales.size(), 0);
        return add({name, tflite::TensorType::Int32, std::move(shape), std::move(scales), zeros, 0, bytes(values)});
    }
    int32_t float32(const std::string& name, std::vector<int32_t> shape)
    {
        return add({name, tflite::TensorType::Float32, std::move(shape), {}, {}, 0, {}});
    }
    void op(tflite::BuiltinOperator code, std::vector<int32_t> inputs, std::vector<int32_t> outputs,
            tflite::BuiltinOptions optionsType = tflite::BuiltinOptions::None, flatbuffer::Table options = {})
    {
        ops_.push_back({code, std::move(inputs), std::move(outputs), optionsType, std::move(options)});
    }
    const std::vector<int32_t>& shape(int32_t tensor) const { return tensors_.at(size_t(tensor)).shape; }
    std::vector<int32_t> inputs, outputs;

    std::vector<uint8_t> serialize() const
    {
        namespace tf = tflite;
        std::vector<tf::BuiltinOperator> codes;
        std::vector<flatbuffer::Table> operators;
        for (const Op& o : ops_) {
            size_t index = 0;
            while (index < codes.size() && codes[index] != o.code)
                ++index;
            if (index == codes.size())
                codes.push_back(o.code);
            flatbuffer::Table t;
            t.scalar<uint32_t>(tf::op::opcode_index, uint32_t(index));
            t.vector(tf::op::inputs, o.inputs);
            t.vector(tf::op::outputs, o.outputs);
            if (o.optionsType != tf::BuiltinOptions::None) {
                t.scalar<uint8_t>(tf::op::builtin_options_type, uint8_t(o.optionsType));
                t.table(tf::op::builtin_options, o.options);
            }
            operators.push_back(std::move(t));
        }
        std::vector<flatbuffer::Table> opcodes;
        for (tf::BuiltinOperator c : codes) {
            flatbuffer::Table t;
            t.scalar<int8_t>(tf::operator_code::deprecated_builtin_code, int8_t(std::min<int32_t>(int32_t(c), 127)));
            // The versions the exporter writes (export/tflite.cpp, int8Version).
            int32_t version = 2;
            if (c == tf::BuiltinOperator::Conv2D || c == tf::BuiltinOperator::DepthwiseConv2D ||
                c == tf::BuiltinOperator::TransposeConv || c == tf::BuiltinOperator::ResizeBilinear)
                version = 3;
            else if (c == tf::BuiltinOperator::FullyConnected)
                version = 4;
            else if (c == tf::BuiltinOperator::Reshape || c == tf::BuiltinOperator::HardSwish ||
                     c == tf::BuiltinOperator::Quantize)
                version = 1;
            t.scalar<int32_t>(tf::operator_code::version, version);
            t.scalar<int32_t>(tf::operator_code::builtin_code, int32_t(c));
            opcodes.push_back(std::move(t));
        }
        std::vector<flatbuffer::Table> tensors, buffers(1);
        for (const Entry& d : tensors_) {
            flatbuffer::Table t;
            t.vector(tf::tensor::shape, d.shape);
            t.scalar<int8_t>(tf::tensor::type, int8_t(d.type));
            uint32_t buffer = 0;
            if (!d.data.empty()) {
                flatbuffer::Table b;
                b.vector(tf::buffer::data, d.data, 16);
                buffers.push_back(std::move(b));
                buffer = uint32_t(buffers.size() - 1);
            }
            t.scalar<uint32_t>(tf::tensor::buffer, buffer);
            t.string(tf::tensor::name, d.name);
            if (!d.scales.empty()) {
                flatbuffer::Table q;
                q.vector(tf::quantization::scale, d.scales);
                q.vector(tf::quantization::zero_point, d.zeroPoints);
                q.scalar<int32_t>(tf::quantization::quantized_dimension, d.dimension);
                t.table(tf::tensor::quantization, std::move(q));
            }
            tensors.push_back(std::move(t));
        }
        flatbuffer::Table subgraph;
        subgraph.tables(tf::subgraph::tensors, std::move(tensors));
        subgraph.vector(tf::subgraph::inputs, inputs);
        subgraph.vector(tf::subgraph::outputs, outputs);
        subgraph.tables(tf::subgraph::operators, std::move(operators));
        flatbuffer::Table model;
        model.scalar<uint32_t>(tf::model::version, tf::kSchemaVersion);
        model.tables(tf::model::operator_codes, std::move(opcodes));
        std::vector<flatbuffer::Table> subgraphs(1);
        subgraphs[0] = std::move(subgraph);
        model.tables(tf::model::subgraphs, std::move(subgraphs));
        model.tables(tf::model::buffers, std::move(buffers));
        return flatbuffer::serialize(model, tf::kFileIdentifier);
    }

private:
    struct Entry {
        std::string name;
        tflite::TensorType type;
        std::vector<int32_t> shape;
        std::vector<float> scales;
        std::vector<int64_t> zeroPoints;
        int32_t dimension = 0;
        std::vector<uint8_t> data;
    };
    struct Op {
        tflite::BuiltinOperator code;
        std::vector<int32_t> inputs, outputs;
        tflite::BuiltinOptions optionsType;
        flatbuffer::Table options;
    };
    template <typename T> static std::vector<uint8_t> bytes(const std::vector<T>& values)
    {
        std::vector<uint8_t> b(values.size() * sizeof(T));
        if (!b.empty())
            std::memcpy(b.data(), values.data(), b.size());
        return b;
    }
    int32_t add(Entry t)
    {
        tensors_.push_back(std::move(t));
        return int32_t(tensors_.size() - 1);
    }
    std::vector<Entry> tensors_;
    std::vector<Op> ops_;
};

} // namespace qs::test
