#pragma once
// What Arm NN 20.08's CpuRef backend computes for the int8 operators of a
// LiteRT program: the arithmetic of TfliteArithmetic::ArmnnReference
// (export/tflite_integer.h), which runs the rest (the moves of codes).
//
// CpuRef runs no integer kernel. Each int8 input code is decoded to float,
// float(code − zero point) × scale (a per-channel weight: code × its channel's
// scale; an int32 bias: float(value) × its scale); the operator is computed in
// float in the order of the reference workloads; the result is encoded as
// clamp(zero point + round(x / scale)), round being half away from zero. A
// fused activation is a layer of its own after the operator (the TfLite
// parser adds it), so the result is encoded, decoded, activated in float and
// encoded again. The float orders that matter:
// - CONV_2D: for each output, the sum over input channel, filter row, filter
//   column (in that nesting) of weight × input, then + bias;
//   DEPTHWISE_CONV_2D the same over filter row and column;
// - FULLY_CONNECTED: the sum over the input's depth, then + bias;
// - AVERAGE_POOL_2D: the sum over the taps inside the input, row by row,
//   divided by their count; MAX_POOL_2D the maximum of those taps;
// - MEAN: the sum in the input's row-major order divided by the count;
// - SOFTMAX: exp((x − max) × beta) in float, summed, each divided by the sum;
// - LOGISTIC 1 / (1 + expf(−x)); HARD_SWISH x × min(max(x + 3, 0), 6) / 6;
// - ADD, SUB, MUL: a + b, a − b, a × b; CONCATENATION and QUANTIZE: decoded and encoded;
// - TRANSPOSE_CONV: each product added in float to the output it lands on, input pixel by input
//   pixel (row-major), input channel innermost;
// - RESIZE_BILINEAR: float lerps of the decoded corners at coordinate index × in / out (align_corners:
//   × (in − 1) / (out − 1)); RESIZE_NEAREST_NEIGHBOR the code at floor(index × in / out), re-encoded.
//   The TfLite parser never reads half_pixel_centers, so Arm NN (and this simulation of it) computes
//   those asymmetric coordinates for a model that asks for half-pixel ones: a fault reproduced, as
//   PAD's is.
// PAD fills the int8 codes it adds with 0, not with the zero point (a fault
// of 20.08), except a PAD whose only reader is a CONV_2D: the optimizer folds
// it into the convolution, whose padding is the value 0.0.
// Learned from Arm NN 20.08's src/backends/reference/workloads and its
// TfLite parser (facts only).

#include <cstdint>
#include <string>
#include <vector>

#include "export/tflite_program.h"

namespace qs::armnn_reference {

// What Arm NN 20.08 cannot run as the file says, as an Error naming `label`: a grouped CONV_2D
// (its parser ignores the groups), FULLY_CONNECTED with per-channel weights (it aborts), PADV2
// (its parser has none), a TRANSPOSE_CONV with a bias input (its parser takes exactly three). Also
// refused: what the simulation does not know Arm NN's arithmetic for (a TRANSPOSE_CONV with SAME
// padding, RESIZE_NEAREST_NEIGHBOR with align_corners, any operator neither computed here nor a
// move of codes): no operator falls back to LiteRT's arithmetic.
void check(const TfliteProgram& program, size_t operation, const std::string& label);

// The operators whose codes CpuRef only moves (RESHAPE, TRANSPOSE, SLICE, STRIDED_SLICE,
// DEQUANTIZE): run() leaves them to the caller.
bool movesCodes(tflite::BuiltinOperator op);

// Whether the PAD `operation` is folded into the one CONV_2D that reads it.
bool padFolded(const TfliteProgram& program, size_t operation);

// Runs one operation on the int8 codes `q` (and float tensors `f`) as CpuRef computes it; false
// when the operation only moves codes and is left to the caller.
bool run(const TfliteProgram::Operation& op, const std::vector<TfliteProgram::TensorSpec>& tensors,
         std::vector<std::vector<int8_t>>& q, std::vector<std::vector<float>>& f, bool padFolded);

} // namespace qs::armnn_reference
