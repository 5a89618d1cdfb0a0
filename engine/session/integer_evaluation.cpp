#include "session/integer_evaluation.h"

#include <cstring>
#include <map>

#include "core/error.h"
#include "export/tflite_integer.h"

namespace qs {

namespace {

// [N, C, H, W] → [N, H, W, C] (`toNhwc`) or back.
Tensor permute4(const Tensor& x, bool toNhwc)
{
    const Tensor f = x.toFloat32();
    const int64_t n = f.dim(0);
    // Read as [n, a, b, c] and write [n, b, c, a] (to NHWC) or [n, c, a, b] (back).
    const int64_t a = f.dim(1), b = f.dim(2), c = f.dim(3);
    Tensor out(DType::F32, toNhwc ? Shape{n, b, c, a} : Shape{n, c, a, b});
    const auto src = f.values<float>();
    auto dst = out.mutableValues<float>();
    for (int64_t i = 0; i < n; ++i)
        for (int64_t p = 0; p < a; ++p)
            for (int64_t q = 0; q < b; ++q)
                for (int64_t r = 0; r < c; ++r) {
                    const size_t from = size_t(((i * a + p) * b + q) * c + r);
                    dst[toNhwc ? size_t(((i * b + q) * c + r) * a + p) : size_t(((i * c + r) * a + p) * b + q)] =
                        src[from];
                }
    return out;
}

Tensor rows(const Tensor& x, int64_t first, int64_t count)
{
    const Tensor f = x.toFloat32();
    Shape shape = f.shape();
    const int64_t per = f.numel() / std::max<int64_t>(shape.at(0), 1);
    shape[0] = count;
    Tensor out(DType::F32, shape);
    std::memcpy(out.mutableValues<float>().data(), f.values<float>().data() + first * per, size_t(count * per) * 4);
    return out;
}

Tensor concatRows(const std::vector<Tensor>& parts)
{
    Shape shape = parts.at(0).shape();
    int64_t total = 0;
    for (const Tensor& p : parts)
        total += p.dim(0);
    shape[0] = total;
    Tensor out(DType::F32, shape);
    size_t at = 0;
    for (const Tensor& p : parts) {
        const auto v = p.values<float>();
        std::memcpy(out.mutableValues<float>().data() + at, v.data(), v.size() * 4);
        at += v.size();
    }
    return out;
}

} // namespace

void evaluateIntegerProgram(const Interpreter& interpreter, const TfliteIntegerExecutor& program, DataSource& data,
                            const EvaluationOptions& options, EvaluationResult& result, const CancellationToken& cancel,
                            const ProgressCallback& progress)
{
    const Model& model = interpreter.model();
    const TfliteProgram& p = program.program();
    std::vector<std::string> inputNames;
    for (const ValueInfo& v : model.inputs)
        if (!model.initializer(v.name))
            inputNames.push_back(v.name);
    if (inputNames.size() != p.inputs.size() || model.outputs.size() != p.outputs.size())
        throw Error("the LiteRT program has " + std::to_string(p.inputs.size()) + " inputs and " +
                    std::to_string(p.outputs.size()) + " outputs; the model " + std::to_string(inputNames.size()) +
                    " and " + std::to_string(model.outputs.size()));
    const std::string scored = scoredOutput(model, options.labelsOutput);
    std::map<std::string, ErrorAccumulator> outputs;
    TopOneAgreement agreement;
    bool agreementMeasured = true, labelled = true;
    int64_t quantizedTop1 = 0, quantizedTop5 = 0, labelledSamples = 0;
    bool top5 = true;
    data.rewind();
    const int64_t total = std::min(data.batchCount(), options.maxBatches.value_or(data.batchCount()));
    for (int64_t b = 0; b < total; ++b) {
        cancel.check();
        if (progress)
            progress(double(b) / double(std::max<int64_t>(total, 1)),
                     "integer program, batch " + std::to_string(b + 1) + "/" + std::to_string(total));
        std::optional<Batch> batch = data.next();
        if (!batch)
            break;
        const std::map<std::string, Tensor> floatOut = interpreter.run(batch->inputs, {cancel, nullptr});
        // The program's batch size is its first input's axis 0 (the calibration batch): the batch is
        // run in pieces of it, a short last piece filled up with copies of its last row (every
        // operator the export writes treats rows independently) whose outputs are dropped.
        const int64_t per =
            p.tensors.at(size_t(p.inputs[0])).shape.empty() ? 1 : p.tensors.at(size_t(p.inputs[0])).shape[0];
        const int64_t n = batch->inputs.at(inputNames[0]).dim(0);
        if (per < 1)
            throw Error("the LiteRT program's input has batch " + std::to_string(per));
        std::vector<std::vector<Tensor>> pieces(p.outputs.size());
        for (int64_t first = 0; first < n; first += per) {
            const int64_t real = std::min(per, n - first);
            std::vector<Tensor> in;
            for (const std::string& name : inputNames) {
                Tensor x = rows(batch->inputs.at(name), first, real);
                if (real < per) {
                    std::vector<Tensor> filled = {x};
                    for (int64_t k = real; k < per; ++k)
                        filled.push_back(rows(x, real - 1, 1));
                    x = concatRows(filled);
                }
                in.push_back(x.rank() == 4 ? permute4(x, true) : std::move(x));
            }
            std::vector<Tensor> out = program.run(in);
            for (size_t o = 0; o < out.size(); ++o) {
                Tensor y = out[o].rank() == 4 ? permute4(out[o], false) : out[o].toFloat32();
                if (y.rank() == 0 || y.dim(0) != per)
                    throw Error("the LiteRT program's output " + std::to_string(o) + " does not keep the batch axis");
                pieces[o].push_back(real < per ? rows(y, 0, real) : std::move(y));
            }
        }
        std::map<std::string, Tensor> quantizedOut;
        for (size_t o = 0; o < p.outputs.size(); ++o) {
            const std::string& name = model.outputs[o].name;
            Tensor q = concatRows(pieces[o]);
            const Tensor f = floatOut.at(name).toFloat32();
            if (q.numel() != f.numel())
                throw Error("output '" + name + "': the LiteRT program gives " + std::to_string(q.numel()) +
                            " values, the model " + std::to_string(f.numel()));
            q = q.reshaped(f.shape());
            outputs[name].add(f.values<float>(), q.values<float>());
            quantizedOut.emplace(name, std::move(q));
        }
        const Tensor& fs = floatOut.at(scored);
        if (agreementMeasured && fs.rank() >= 2 && fs.dim(0) > 0 && fs.numel() / fs.dim(0) >= 2) {
            try {
                addTopOneAgreement(agreement, fs.toFloat32(), quantizedOut.at(scored), fs.numel() / fs.dim(0), scored);
            } catch (const Error&) {
                agreementMeasured = false;
            }
        } else {
            agreementMeasured = false;
        }
        if (batch->labels && labelled) {
            const ClassificationHits q =
                classificationHits(quantizedOut.at(scored), *batch->labels, scored, data.path().string() + ": labels");
            labelledSamples += q.samples;
            quantizedTop1 += q.top1;
            top5 = top5 && q.top5.has_value();
            quantizedTop5 += q.top5.value_or(0);
        } else {
            labelled = false;
        }
    }
    result.fakeQuantOutputs = std::move(result.outputs);
    result.outputs.clear();
    for (const ValueInfo& o : model.outputs)
        result.outputs.push_back({o.name, outputs[o.name].metrics()});
    if (result.accuracy && labelled && labelledSamples == result.accuracy->samples) {
        result.accuracy->quantizedTop1 = double(quantizedTop1) / double(labelledSamples);
        result.accuracy->quantizedTop5 = top5 && result.accuracy->floatTop5
                                             ? std::optional(double(quantizedTop5) / double(labelledSamples))
                                             : std::nullopt;
    }
    if (result.agreement) { // the fake-quant agreement is replaced, or dropped when it cannot be
        if (agreementMeasured && agreement.rows > 0)
            result.agreement = agreement;
        else
            result.agreement.reset();
    }
    result.outputSimulation = "integer";
    if (progress)
        progress(1.0, "integer program evaluated");
}

} // namespace qs
