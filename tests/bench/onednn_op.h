#pragma once
// One benchmark case (zoo_op_cases.h) as oneDNN runs it: a 2-D Conv (grouped
// and depthwise too) with the folded residual Add and activation as post-ops,
// or a Gemm / MatMul as oneDNN's matmul. Primitives are made and the weights
// reordered once, in the constructor (what an integration would keep in the
// node's memo); run() and runKept() are what every inference call would pay.

#include <dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "zoo_op_cases.h"

namespace qs::bench {

// The layouts oneDNN is asked to compute in.
enum class OnednnLayout {
    // NCHW activations and OIHW weights (Gemm/MatMul: row-major, B as stored):
    // the tensors our runtime holds, handed over without any reorder.
    Plain,
    // The layouts oneDNN prefers (format_tag::any): the weights reordered once
    // beforehand, the activations per call (run) or once (runKept).
    Blocked,
};

class OnednnOp {
public:
    // An Error saying what is not mapped: a 1-D or 3-D Conv, computed Conv
    // weights, a folded node without a post-op here, Gemm's beta or a full C.
    OnednnOp(const OpCase& c, const dnnl::engine& engine, OnednnLayout layout);

    // One inference call on the case's activations: the output in plain layout,
    // freshly allocated as a kernel's output is. With Blocked, the activations'
    // reorders into oneDNN's layout and the output's back are part of it.
    Tensor run();
    // Blocked Conv only: the call an integration that keeps activations in
    // oneDNN's layout between ops pays (activations reordered once, before
    // timing; the output left in oneDNN's layout).
    void runKept();
    // runKept's last output in plain layout (for the numeric check).
    Tensor keptOutput();
    // Whether runKept() differs from run(): a Conv in Blocked layout whose
    // activations oneDNN wants in another layout than NCHW.
    bool hasKeptRun() const { return keptDiffers_; }

    // oneDNN's name of the implementation it chose ("jit:avx512_core", "gemm:jit").
    std::string implementation() const { return implementation_; }
    // Primitive creation (its JIT code) and the weights' reorder, milliseconds.
    double setupMs() const { return setupMs_; }

private:
    // One activation as the primitive reads it: the case's tensor (plain), the
    // layout the primitive wants, the reorder between them when they differ.
    struct Operand {
        int arg = 0; // DNNL_ARG_SRC, DNNL_ARG_WEIGHTS (a computed MatMul B), post-op src1
        const Tensor* tensor = nullptr;
        dnnl::memory::desc plain, wanted;
        std::optional<dnnl::reorder> in; // plain -> wanted, when they differ
        dnnl::memory kept;               // the tensor in `wanted`, reordered once (runKept)
    };

    void buildConv(const OpCase& c, OnednnLayout layout);
    void buildMatMul(const OpCase& c, OnednnLayout layout);
    // Constant weights: wrapped as they are (Plain) or reordered once into
    // what the primitive wants.
    void bindWeights(int arg, const Tensor& t, const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted);
    void addOperand(int arg, const Tensor& t, const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted);
    // The output side and the kept copies, once the primitive is made.
    void finish(const dnnl::memory::desc& plainOut, const dnnl::memory::desc& wantedOut, Shape outputShape);

    dnnl::engine engine_;
    dnnl::stream stream_;
    dnnl::primitive primitive_;
    std::vector<Operand> operands_;
    std::vector<std::pair<int, dnnl::memory>> constants_; // weights, bias
    dnnl::memory::desc plainOut_, wantedOut_;
    std::optional<dnnl::reorder> out_; // wanted -> plain
    Shape outputShape_;
    dnnl::memory keptOut_;
    Tensor keptOutStorage_; // runKept's last output
    bool keptDiffers_ = false;
    std::string implementation_;
    double setupMs_ = 0;
    std::vector<Tensor> kept_; // storage of the kept activations and output
};

} // namespace qs::bench
