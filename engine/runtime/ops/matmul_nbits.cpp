#include "runtime/ops/matmul_nbits.h"

#include <vector>

#include "gemm/sgemm.h"

namespace qs::ops {

void matMulNBits(KernelContext& ctx)
{
    const Tensor& A = ctx.floatInput(0);
    const Tensor& B = ctx.input(1);
    const Tensor& scales = ctx.floatInput(2);
    const Tensor* zeros = ctx.optionalInput(3);
    const Tensor* bias = ctx.hasInput(5) ? &ctx.floatInput(5) : nullptr;
    if (ctx.hasInput(4))
        ctx.fail("g_idx (input 4) is not supported");
    const int64_t K = ctx.requiredIntAttribute("K"), N = ctx.requiredIntAttribute("N");
    const int64_t bits = ctx.intAttribute("bits", 4), block = ctx.requiredIntAttribute("block_size");
    if (bits != 2 && bits != 4 && bits != 8)
        ctx.fail("bits " + std::to_string(bits) + " is not 2, 4 or 8");
    if (K <= 0 || N <= 0 || block < 16 || (block & (block - 1)) != 0)
        ctx.fail("K, N must be positive and block_size a power of two >= 16 (K " + std::to_string(K) + ", N " +
                 std::to_string(N) + ", block_size " + std::to_string(block) + ")");
    const int64_t blocks = (K + block - 1) / block, blob = block * bits / 8;
    if (B.dtype() != DType::U8 || B.numel() != N * blocks * blob)
        ctx.fail("B must be uint8 [N, blocks, blob] = [" + std::to_string(N) + ", " + std::to_string(blocks) + ", " +
                 std::to_string(blob) + "], not " + std::string(dtypeName(B.dtype())) + " " + shapeToString(B.shape()));
    if (scales.numel() != N * blocks)
        ctx.fail("scales must hold N * blocks = " + std::to_string(N * blocks) + " values, not " +
                 std::to_string(scales.numel()));
    const int64_t zeroBytes = (blocks * bits + 7) / 8;
    if (zeros && !(zeros->dtype() == DType::U8 && zeros->numel() == N * zeroBytes) &&
        !(zeros->dtype() == DType::F32 && zeros->numel() == N * blocks))
        ctx.fail("zero_points must be uint8 [N * " + std::to_string(zeroBytes) + "] or float [N * blocks], not " +
                 std::string(dtypeName(zeros->dtype())) + " " + shapeToString(zeros->shape()));
    if (bias && bias->numel() != N)
        ctx.fail("bias must hold N = " + std::to_string(N) + " values, not " + std::to_string(bias->numel()));
    if (A.shape().empty() || A.shape().back() != K)
        ctx.fail("A " + shapeToString(A.shape()) + " does not end in K = " + std::to_string(K));

    // The float weight W = Bᵀ, [K, N] row-major: what MatMul reads.
    const auto codes = B.values<uint8_t>();
    const auto scale = scales.values<float>();
    const uint32_t mask = (1u << bits) - 1;
    const int64_t perByte = 8 / bits;
    auto packedCode = [&](std::span<const uint8_t> bytes, int64_t index) {
        return int32_t(bytes[size_t(index / perByte)] >> (index % perByte * bits) & mask);
    };
    std::vector<float> W(size_t(K * N));
    for (int64_t n = 0; n < N; ++n)
        for (int64_t b = 0; b < blocks; ++b) {
            const int64_t group = n * blocks + b;
            float zero = float(1 << (bits - 1));
            if (zeros && zeros->dtype() == DType::U8)
                zero = float(packedCode(zeros->values<uint8_t>().subspan(size_t(n * zeroBytes)), b));
            else if (zeros)
                zero = zeros->values<float>()[size_t(group)];
            const float s = scale[size_t(group)];
            for (int64_t j = 0; j < block && b * block + j < K; ++j)
                W[size_t((b * block + j) * N + n)] = (float(packedCode(codes, group * block + j)) - zero) * s;
        }
    ctx.checkCancelled();
    Shape outShape = A.shape();
    outShape.back() = N;
    const int64_t M = A.numel() / K;
    Tensor Y = Tensor::uninitialized(DType::F32, outShape); // sgemm writes every element
    float* y = Y.mutableValues<float>().data();
    gemm::sgemm(false, false, M, N, K, 1.0f, A.values<float>().data(), K, W.data(), N, y, N, ctx.cancellation());
    if (bias) {
        const auto c = bias->values<float>();
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n)
                y[m * N + n] += c[size_t(n)];
    }
    ctx.setOutput(0, std::move(Y));
}

} // namespace qs::ops
