// Runs a .tflite model with Arm NN's TfLite parser on its CpuRef backend
// (Debian's libarmnn, a dynamic backend loaded from BACKENDS_DIR):
//   run_tflite_armnn BACKENDS_DIR MODEL.tflite OUT_DIR IN0.npy [IN1.npy ...]
// Inputs are float32 .npy arrays in the model's input order; outputs are
// written as OUT_DIR/output_<i>.npy (float32). Exit 1 with a message on
// stderr when Arm NN refuses or fails to run the model.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <armnn/ArmNN.hpp>
#include <armnnTfLiteParser/ITfLiteParser.hpp>

#include "core/tensor.h"
#include "io/npy.h"

int main(int argc, char** argv)
{
    if (argc < 4) {
        std::fprintf(stderr, "usage: run_tflite_armnn BACKENDS_DIR MODEL.tflite OUT_DIR IN0.npy [IN1.npy ...]\n");
        return 2;
    }
    try {
        armnn::IRuntime::CreationOptions options;
        options.m_DynamicBackendsPath = argv[1];
        armnn::IRuntimePtr runtime = armnn::IRuntime::Create(options);
        armnnTfLiteParser::ITfLiteParserPtr parser = armnnTfLiteParser::ITfLiteParser::Create();
        armnn::INetworkPtr network = parser->CreateNetworkFromBinaryFile(argv[2]);
        const std::vector<std::string> inputNames = parser->GetSubgraphInputTensorNames(0);
        const std::vector<std::string> outputNames = parser->GetSubgraphOutputTensorNames(0);
        if (inputNames.size() != size_t(argc - 4)) {
            std::fprintf(stderr, "%s: the model takes %zu inputs, %d given\n", argv[2], inputNames.size(), argc - 4);
            return 1;
        }
        armnn::IOptimizedNetworkPtr optimized =
            armnn::Optimize(*network, {armnn::Compute::CpuRef}, runtime->GetDeviceSpec());
        armnn::NetworkId id = 0;
        if (runtime->LoadNetwork(id, std::move(optimized)) != armnn::Status::Success) {
            std::fprintf(stderr, "%s: Arm NN could not load the network on CpuRef\n", argv[2]);
            return 1;
        }
        std::vector<qs::Tensor> inputs;
        inputs.reserve(inputNames.size());
        armnn::InputTensors in;
        for (size_t k = 0; k < inputNames.size(); ++k) {
            inputs.push_back(qs::readNpy(argv[4 + k]).toFloat32());
            const armnnTfLiteParser::BindingPointInfo b = parser->GetNetworkInputBindingInfo(0, inputNames[k]);
            if (b.second.GetNumElements() != size_t(inputs.back().numel())) {
                std::fprintf(stderr, "%s: input '%s' has %u elements, %s holds %lld\n", argv[2], inputNames[k].c_str(),
                             b.second.GetNumElements(), argv[4 + k], static_cast<long long>(inputs.back().numel()));
                return 1;
            }
            in.emplace_back(b.first, armnn::ConstTensor(b.second, inputs.back().values<float>().data()));
        }
        std::vector<qs::Tensor> outputs;
        outputs.reserve(outputNames.size());
        armnn::OutputTensors out;
        for (const std::string& name : outputNames) {
            const armnnTfLiteParser::BindingPointInfo b = parser->GetNetworkOutputBindingInfo(0, name);
            qs::Shape shape;
            for (unsigned d = 0; d < b.second.GetNumDimensions(); ++d)
                shape.push_back(b.second.GetShape()[d]);
            outputs.emplace_back(qs::DType::F32, shape);
            out.emplace_back(b.first, armnn::Tensor(b.second, outputs.back().mutableValues<float>().data()));
        }
        if (runtime->EnqueueWorkload(id, in, out) != armnn::Status::Success) {
            std::fprintf(stderr, "%s: Arm NN failed to run the network\n", argv[2]);
            return 1;
        }
        std::filesystem::create_directories(argv[3]);
        for (size_t k = 0; k < outputs.size(); ++k)
            qs::writeNpy(std::filesystem::path(argv[3]) / ("output_" + std::to_string(k) + ".npy"), outputs[k]);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", argv[2], e.what());
        return 1;
    }
}
