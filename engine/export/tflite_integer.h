#pragma once
// The integer program a LiteRT (.tflite) file holds, executed with the
// arithmetic of LiteRT's int8 kernels: by default that of its XNNPACK delegate
// where it differs (TfliteArithmetic below), else that of the reference
// kernels (tensorflow/lite/kernels/internal/reference and the builtin kernels'
// Prepare), which the rest of this comment describes: int8 tensors; int32
// accumulation of (input − input zero point) × weight; int32 biases; per-
// channel requantization through a 31-bit fixed-point multiplier and a shift
// (QuantizeMultiplier via frexp; MultiplyByQuantizedMultiplier =
// SaturatingRoundingDoublingHighMul then RoundingDivideByPOT); fused
// activation clamps; ADD's left shift of 20 with input and output
// multipliers; MUL's product requantized; AVERAGE_POOL_2D's rounded division
// by the count of the taps inside the input; MEAN's sum requantized with the
// element count folded into the multiplier; MAX_POOL_2D; CONCATENATION
// (requantized when an input's parameters differ); PAD with the zero point;
// RESHAPE, TRANSPOSE, SLICE, STRIDED_SLICE and RESIZE_NEAREST_NEIGHBOR as
// moves of the codes; TRANSPOSE_CONV scattered into int32 sums, requantized as
// CONV_2D; SUB as ADD with the difference; RESIZE_BILINEAR in 10-bit
// fixed-point coordinates (ResizeBilinearInteger);
// LOGISTIC through the 256-entry table LiteRT's int8 kernel fills in float;
// HARD_SWISH through the int16 fixed-point reference; SOFTMAX (see
// tflite_integer.cpp: computed in double from the dequantized codes, which is
// not LiteRT's fixed-point kernel and may differ from it by one code);
// QUANTIZE (float → int8, and int8 → int8 requantization) and DEQUANTIZE.
//
// It runs the program read back from the bytes (export/tflite_program.h), so
// what is simulated is what the file says. Inputs and outputs are the
// program's: a 4-D image input is NHWC.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "export/tflite_program.h"

namespace qs {

// The fixed-point primitives, as LiteRT and gemmlowp define them.
namespace tflite_fixed {
struct Multiplier {
    int32_t value = 0; // Q31: value / 2^31 in [0.5, 1), or 0
    int shift = 0;     // left shift when > 0, right shift when < 0
};
Multiplier quantizeMultiplier(double real);
int32_t saturatingRoundingDoublingHighMul(int32_t a, int32_t b);
int32_t roundingDivideByPot(int32_t x, int exponent);
int32_t multiplyByQuantizedMultiplier(int32_t x, Multiplier m);
int16_t saturatingRoundingDoublingHighMul16(int16_t a, int16_t b);
int16_t roundingDivideByPot16(int16_t x, int exponent);
} // namespace tflite_fixed

// Whose int8 arithmetic the executor follows: where LiteRT's CPU paths round differently, or Arm NN's.
enum class TfliteArithmetic {
    // LiteRT's default CPU path, the XNNPACK delegate (LiteRT.js runs it): CONV_2D,
    // DEPTHWISE_CONV_2D, TRANSPOSE_CONV, FULLY_CONNECTED, MUL and MEAN requantize in float (the
    // float scale, a clamp, rounding half to even); ADD and SUB scale both inputs by 21-bit integer
    // multipliers with one shift (SUB's second one negative); RESIZE_BILINEAR weighs its taps in
    // 11 bits computed in float; an int8 → int8 QUANTIZE uses an 8-bit fixed-point multiplier.
    // The other operators as the reference kernels.
    Xnnpack,
    // LiteRT's reference kernels throughout (the fixed-point multipliers above).
    Reference,
    // Arm NN 20.08's CpuRef backend (export/tflite_armnn.h): every int8 input decoded to float, the
    // operator computed in float, the result encoded (round half away from zero, clamp); a fused
    // activation as a layer of its own; PAD's added codes 0 unless folded into a CONV_2D;
    // RESIZE_BILINEAR's half_pixel_centers unread. What Arm NN cannot run, and any operator
    // without a simulation of Arm NN's arithmetic, is an Error when the executor is built.
    ArmnnReference,
};

// "xnnpack", "reference", "armnn": the names the CLI and the report use; parseTfliteArithmetic
// reverses it (nullopt for another name).
const char* tfliteArithmeticName(TfliteArithmetic arithmetic);
std::optional<TfliteArithmetic> parseTfliteArithmetic(const std::string& name);

class TfliteIntegerExecutor {
public:
    // Checks every operator's tensors (types, ranks, quantization) and computes the
    // multipliers once; an Error names the operator and what is wrong.
    explicit TfliteIntegerExecutor(TfliteProgram program, std::string what = "the LiteRT model",
                                   TfliteArithmetic arithmetic = TfliteArithmetic::Xnnpack);
    ~TfliteIntegerExecutor();
    TfliteIntegerExecutor(TfliteIntegerExecutor&&) noexcept;
    static TfliteIntegerExecutor fromBytes(std::span<const uint8_t> bytes, const std::string& what,
                                           TfliteArithmetic arithmetic = TfliteArithmetic::Xnnpack);
    TfliteArithmetic arithmetic() const { return arithmetic_; }

    // One tensor per program input (float32 for a float input, int8 for an int8 one),
    // shapes as the program's; the program's outputs, float32 or int8 as it declares them.
    std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

    const TfliteProgram& program() const { return program_; }

    struct Prepared; // per operation: multipliers, clamps, tables (tflite_integer.cpp)

private:
    TfliteProgram program_;
    std::string what_;
    TfliteArithmetic arithmetic_ = TfliteArithmetic::Xnnpack;
    std::vector<Prepared> prepared_;
};

} // namespace qs
