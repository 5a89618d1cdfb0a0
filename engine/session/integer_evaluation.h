#pragma once
// ODML mode's output figures from the integer program: the LiteRT model the
// export writes for the plan (export/tflite.h, buildTflite: the same
// calibration and conversion as `quantize --export-tflite`), run by the
// integer simulation (export/tflite_integer.h) on the evaluation data. What
// the evaluation then shows as the quantized output (SQNR against float,
// top-1, top-1 agreement) is what LiteRT computes; the per-layer figures stay
// the fake-quant ones.

#include <string>

#include "core/cancellation.h"
#include "io/data_source.h"
#include "runtime/interpreter.h"
#include "session/evaluation.h"

namespace qs {

class TfliteIntegerExecutor;

// Runs `data` (rewound first; at most options.maxBatches) through the float
// model and through `program`, whose inputs and outputs are the model's in
// order (4-D ones NHWC, converted here; a batch is cut into the program's
// batch size, a short last piece filled with copies of its last row).
// Replaces `result`'s outputs, quantized accuracy and agreement with the
// program's, keeps the replaced outputs in fakeQuantOutputs and sets
// outputSimulation to "integer". An Error names what does not fit.
void evaluateIntegerProgram(const Interpreter& interpreter, const TfliteIntegerExecutor& program, DataSource& data,
                            const EvaluationOptions& options, EvaluationResult& result,
                            const CancellationToken& cancel = {}, const ProgressCallback& progress = {});

} // namespace qs
