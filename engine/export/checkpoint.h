#pragma once
// Quantized checkpoints: for every weight a plan quantizes, its integer (or
// float-format) codes, its scales and, when asymmetric, its zero points; every
// other tensor as it was; and a JSON manifest that says how to read them back.
// docs/formats.md, "Quantized checkpoints", is the user-facing description.
//
// For a quantized weight W (shape S, rank r) the file holds:
//   W.qvalue      the codes in W's own axis order, row-major. int8 → I8, uint8 →
//                 U8, int16 → I16; every other type → U8 codes (numerics'
//                 code of the grid value). 1-, 2- and 4-bit codes are packed
//                 (numerics/packing.h: little-endian within a byte, element 0 in
//                 the lowest bits) over the flat row-major order; the dataset's
//                 shape is S with the last axis divided by the codes per byte
//                 when it divides, else 1-D.
//   W.scale       F32, the per-group scale in tensor units, shape G of rank r with
//                 G[i] = ceil(S[i] / block[i]). Element x[i0, …] uses
//                 scale[i0 / block[0], …] — each scale repeated block[i] times
//                 along axis i (ONNX blocked quantization). Per-tensor: all ones;
//                 per-channel conv [O, I, kh, kw]: [O, 1, 1, 1]; tiles of t along
//                 a contraction axis a: G[a] = ceil(S[a] / t), whatever a is
//                 (the tile axis need not be last: a conv tiled along I gives
//                 [O, I/t, 1, 1]).
//   W.zero_point  asymmetric only: the zero point per group, shape G, dtype I8
//                 for signed types, U8 for unsigned ones, I16 for int16.
//   W.block_scale mxfp8/mxfp4: E8M0 codes (U8) of the block scales; nvfp4: the
//                 e4m3 block scale codes (F8_E4M3). Informative: W.scale already
//                 holds their decoded value (times the global scale for nvfp4).
//   W.global_scale nvfp4 only: F32 [1], the per-tensor scale.
//   W.codes, W.lut lut1 … lut8 in place of W.qvalue and W.scale: W.codes the
//                 group's table index of every element (U8, packed as W.qvalue
//                 is: 1-, 2- and 4-bit codes share bytes, 3-, 5-, 6-, 7- and
//                 8-bit codes take a byte each); W.lut F32, the tables, shape
//                 G + [2^bits] (G as W.scale's), each ascending. Element x[i0, …]
//                 is lut[i0 / block[0], …, code].
// value = (grid(code) − zero_point) · scale for integer-like types,
//         grid(code) · scale for float formats, nf4 and microscaling elements,
// which is bit for bit the weight quantizer's fake-quant (quant/kernels.h).
//
// Manifest (JSON): safetensors `__metadata__["quantscope"]`; HDF5 the root
// attribute `quantscope`. Keys: format ("quantscope-checkpoint"),
// format_version (1), tool_version, mode, source {file, format, sha256},
// rules (the rule file), tensors {W: {qtype, bits, shape, dtype (of the
// original), code_dtype, packed, codes_per_byte, granularity, axis, tile_axis,
// tile_size, block, scale_shape, symmetric, narrow_range, scale_restriction,
// method, rounding, seed, module_path, op_type, qvalue, scale, zero_point,
// block_scale, global_scale, codes, lut, lut_shape}} (lut types: qvalue and
// scale null, codes and lut the keys), float_tensors [names written unchanged].
//
// HDF5 layout: one dataset per safetensors key, at `/` + key (a `/` inside a
// key makes groups); each W.qvalue dataset also carries its tensor's manifest
// entry as the attribute `quantscope`.
//
// Weights-only safetensors models are streamed: each tensor is read from the
// file (not the mapping) when it is written and released right after, so the
// memory used stays near the largest tensor, whatever the file size.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/cancellation.h"
#include "graph/model.h"
#include "rules/ruleset.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"

namespace qs {

enum class CheckpointFormat { Safetensors, Hdf5 };
// By extension: `.safetensors`; `.h5`, `.hdf5`. Empty for anything else.
std::optional<CheckpointFormat> checkpointFormatForPath(const std::filesystem::path& path);

struct CheckpointExportOptions {
    bool includeFloatTensors = true; // also write the tensors no quantized layer owns, unchanged
    bool hashSource = true;          // record the SHA-256 of the model file (reads it once more)
};

struct ExportSummary {
    std::filesystem::path path;     // the file written
    int64_t floatBytes = 0;         // bytes the quantized weights take in the model
    int64_t quantizedBytes = 0;     // bytes of their codes, scales, zero points in the file
    int64_t tensors = 0;            // tensors (keys/datasets) written
    int64_t quantizedWeights = 0;   // weights written quantized
    std::vector<std::string> notes; // plan layers left float and why (a rule's problem, a shared weight)
};

// Writes `model`'s weights quantized as `plan` says, in the format of `out`'s
// extension, atomically (nothing is left at `out` on error or cancellation).
// Weights `weights` holds are written from its parameters; the others are
// quantized here with the plan's spec (same results). Throws Error naming the
// tensor for a weight that cannot be quantized, naming `out` for an
// unsupported extension or a write failure; Cancelled when `cancel` is set.
ExportSummary exportCheckpoint(const Model& model, const QuantizationPlan& plan, const WeightQuantizer& weights,
                               const RuleSet& rules, const std::filesystem::path& out,
                               const CheckpointExportOptions& options = {}, const CancellationToken& cancel = {},
                               const ProgressCallback& progress = {});

} // namespace qs
