#pragma once
// Kernels of the elementwise family (ops/elementwise.cpp): arithmetic,
// activations, comparisons and logic, all with numpy broadcasting.

#include "runtime/op_registry.h"

namespace qs::ops {

// Binary and variadic arithmetic
void add(KernelContext& ctx);
void sub(KernelContext& ctx);
void mul(KernelContext& ctx);
void div(KernelContext& ctx);
void pow(KernelContext& ctx);
void mod(KernelContext& ctx);
void min(KernelContext& ctx);
void max(KernelContext& ctx);
void sum(KernelContext& ctx);
void mean(KernelContext& ctx);
void prelu(KernelContext& ctx);
void bitShift(KernelContext& ctx);
// Unary math and activations
void neg(KernelContext& ctx);
void abs(KernelContext& ctx);
void sqrt(KernelContext& ctx);
void reciprocal(KernelContext& ctx);
void exp(KernelContext& ctx);
void log(KernelContext& ctx);
void erf(KernelContext& ctx);
void tanh(KernelContext& ctx);
void sigmoid(KernelContext& ctx);
void relu(KernelContext& ctx);
void leakyRelu(KernelContext& ctx);
void elu(KernelContext& ctx);
void selu(KernelContext& ctx);
void celu(KernelContext& ctx);
void hardSigmoid(KernelContext& ctx);
void hardSwish(KernelContext& ctx);
void softplus(KernelContext& ctx);
void softsign(KernelContext& ctx);
void thresholdedRelu(KernelContext& ctx);
void mish(KernelContext& ctx);
void shrink(KernelContext& ctx);
void gelu(KernelContext& ctx);
void clip(KernelContext& ctx);
void floor(KernelContext& ctx);
void ceil(KernelContext& ctx);
void round(KernelContext& ctx);
void sign(KernelContext& ctx);
void sin(KernelContext& ctx);
void cos(KernelContext& ctx);
void tan(KernelContext& ctx);
void asin(KernelContext& ctx);
void acos(KernelContext& ctx);
void atan(KernelContext& ctx);
void sinh(KernelContext& ctx);
void cosh(KernelContext& ctx);
void asinh(KernelContext& ctx);
void acosh(KernelContext& ctx);
void atanh(KernelContext& ctx);
// Selection, comparison and logic
void where(KernelContext& ctx);
void equal(KernelContext& ctx);
void less(KernelContext& ctx);
void lessOrEqual(KernelContext& ctx);
void greater(KernelContext& ctx);
void greaterOrEqual(KernelContext& ctx);
void logicalNot(KernelContext& ctx);
void logicalAnd(KernelContext& ctx);
void logicalOr(KernelContext& ctx);
void logicalXor(KernelContext& ctx);
void isNaN(KernelContext& ctx);
void isInf(KernelContext& ctx);

} // namespace qs::ops
