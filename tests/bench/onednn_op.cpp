#include "onednn_op.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "runtime/op_registry.h"
#include "runtime/ops/window_geometry.h"

namespace qs::bench {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

// The value a case's node reads by name: a weight or one of its activations.
const Tensor& valueOf(const OpCase& c, const std::string& name)
{
    if (const Tensor* t = c.model.initializer(name))
        return *t;
    for (size_t i = 0; i < c.model.inputs.size(); ++i)
        if (c.model.inputs[i].name == name)
            return c.activations.at(i);
    throw Error("'" + name + "' is neither a weight nor an activation of the case");
}

memory::dims dimsOf(const Shape& shape)
{
    return memory::dims(shape.begin(), shape.end());
}

// Row-major, as our tensors are.
memory::desc plainDesc(const memory::dims& dims)
{
    memory::dims strides(dims.size(), 1);
    for (size_t i = dims.size() - 1; i > 0; --i)
        strides[i - 1] = strides[i] * dims[i];
    return memory::desc(dims, kF32, strides);
}

float scalarInitializer(const OpCase& c, const Node& node, size_t input, float fallback)
{
    if (input >= node.inputs.size() || node.inputs[input].empty())
        return fallback;
    const Tensor* t = c.model.initializer(node.inputs[input]);
    if (!t || t->dtype() != DType::F32 || t->numel() != 1)
        throw Error(node.opType + " with computed bounds is not mapped");
    return t->values<float>()[0];
}

// The folded activations after the op (and its residual Add) as oneDNN
// eltwise post-ops, in the order the model applies them.
void appendActivations(const OpCase& c, size_t from, dnnl::post_ops& ops)
{
    const std::vector<Node>& nodes = c.model.nodes;
    const int64_t opset = modelOpset(c.model, "");
    for (size_t i = from; i < nodes.size(); ++i) {
        const Node& node = nodes[i];
        const KernelContext attributes(node, i, opset, {}, {}, nullptr);
        if (node.opType == "Relu") {
            ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        } else if (node.opType == "LeakyRelu") {
            ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, attributes.floatAttribute("alpha", 0.01f), 0.0f);
        } else if (node.opType == "Clip") {
            float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
            if (opset < 11) {
                lo = attributes.floatAttribute("min", lo);
                hi = attributes.floatAttribute("max", hi);
            } else {
                lo = scalarInitializer(c, node, 1, lo);
                hi = scalarInitializer(c, node, 2, hi);
            }
            ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, lo, hi);
        } else if (node.opType == "HardSigmoid") {
            // oneDNN 2.6 has no hardsigmoid: alpha x + beta, then clipped to [0, 1].
            ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, attributes.floatAttribute("alpha", 0.2f),
                               attributes.floatAttribute("beta", 0.5f));
            ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 1.0f);
        } else if (node.opType == "HardSwish") {
            ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f);
        } else if (node.opType == "Sigmoid" && i + 1 < nodes.size() && nodes[i + 1].opType == "Mul") {
            ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f); // x * sigmoid(x)
            ++i;
        } else if (node.opType == "Sigmoid") {
            ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0.0f, 0.0f);
        } else {
            throw Error("a folded " + node.opType + " has no oneDNN post-op here");
        }
    }
}

double millisecondsSince(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Storage for a tensor in a layout of oneDNN's choosing, from our allocator
// (as an integration would allocate it).
Tensor bufferFor(const memory::desc& desc)
{
    return Tensor::uninitialized(DType::U8, {int64_t(desc.get_size())});
}

} // namespace

OnednnOp::OnednnOp(const OpCase& c, const dnnl::engine& engine, OnednnLayout layout) : engine_(engine), stream_(engine)
{
    const auto start = std::chrono::steady_clock::now();
    if (c.opType == "Conv")
        buildConv(c, layout);
    else
        buildMatMul(c, layout);
    setupMs_ = millisecondsSince(start);
}

void OnednnOp::buildConv(const OpCase& c, OnednnLayout layout)
{
    const Node& op = c.model.nodes.front();
    const Tensor& X = valueOf(c, op.inputs.at(0));
    const Tensor* W = c.model.initializer(op.inputs.at(1));
    const Tensor* B = op.inputs.size() > 2 && !op.inputs[2].empty() ? &valueOf(c, op.inputs[2]) : nullptr;
    if (!W)
        throw Error("computed Conv weights are not mapped");
    if (X.rank() != 4)
        throw Error("only 2-D Conv is mapped");
    if (B && !c.model.initializer(op.inputs[2]))
        throw Error("a computed Conv bias is not mapped");
    const std::vector<const Tensor*> inputs{&X, W, B};
    const KernelContext context(op, 0, modelOpset(c.model, ""), inputs, {}, nullptr);
    const ops::WindowGeometry g =
        ops::resolveWindow(context, {X.dim(2), X.dim(3)}, {W->dim(2), W->dim(3)}, false, true);
    const int64_t N = X.dim(0), C = X.dim(1), M = W->dim(0), group = op.intAttribute("group", 1);
    const memory::dims src{N, C, X.dim(2), X.dim(3)}, dst{N, M, g.output[0], g.output[1]};
    const memory::dims weights = group == 1 ? memory::dims{M, C, W->dim(2), W->dim(3)}
                                            : memory::dims{group, M / group, C / group, W->dim(2), W->dim(3)};
    const memory::desc srcPlain(src, kF32, Tag::nchw), dstPlain(dst, kF32, Tag::nchw);
    const memory::desc weightsPlain(weights, kF32, group == 1 ? Tag::oihw : Tag::goihw);
    const memory::desc bias = B ? memory::desc({M}, kF32, Tag::x) : memory::desc();
    const bool blocked = layout == OnednnLayout::Blocked;
    const memory::desc srcAsked = blocked ? memory::desc(src, kF32, Tag::any) : srcPlain;
    const memory::desc weightsAsked = blocked ? memory::desc(weights, kF32, Tag::any) : weightsPlain;
    const memory::desc dstAsked = blocked ? memory::desc(dst, kF32, Tag::any) : dstPlain;
    const memory::dims strides(g.strides.begin(), g.strides.end());
    const memory::dims padBegin(g.padBegin.begin(), g.padBegin.end()), padEnd(g.padEnd.begin(), g.padEnd.end());
    memory::dims dilations;
    for (int64_t d : g.dilations)
        dilations.push_back(d - 1); // oneDNN counts the gaps
    auto describe = [&](const memory::desc& out) {
        return dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                               srcAsked, weightsAsked, bias, out, strides, dilations, padBegin, padEnd);
    };

    // A residual addend is a sum post-op: the output buffer holds the addend
    // when the primitive runs (a binary post-op took oneDNN 2.6 off its JIT
    // kernels: ref:any, 100x slower).
    const bool residual = c.model.nodes.size() > 1 && c.model.nodes[1].opType == "Add";
    dnnl::post_ops postOps;
    std::string addend;
    if (residual) {
        const Node& add = c.model.nodes[1];
        addend = add.inputs[0] == op.outputs[0] ? add.inputs[1] : add.inputs[0];
        postOps.append_sum(1.0f);
    }
    appendActivations(c, residual ? 2 : 1, postOps);
    dnnl::primitive_attr attributes;
    attributes.set_post_ops(postOps);
    const dnnl::convolution_forward::primitive_desc pd(describe(dstAsked), attributes, engine_);
    implementation_ = pd.impl_info_str();
    primitive_ = dnnl::convolution_forward(pd);

    addOperand(DNNL_ARG_SRC, X, srcPlain, pd.src_desc());
    if (residual)
        addOperand(DNNL_ARG_DST, valueOf(c, addend), dstPlain, pd.dst_desc());
    bindWeights(DNNL_ARG_WEIGHTS, *W, weightsPlain, pd.weights_desc());
    if (B)
        bindWeights(DNNL_ARG_BIAS, *B, bias, pd.bias_desc());
    finish(dstPlain, pd.dst_desc(), {dst.begin(), dst.end()});
}

void OnednnOp::buildMatMul(const OpCase& c, OnednnLayout layout)
{
    const Node& op = c.model.nodes.front();
    if (c.model.nodes.size() > 1)
        throw Error("nodes folded into " + op.opType + " are not mapped");
    const Tensor& A = valueOf(c, op.inputs.at(0));
    const Tensor& Bt = valueOf(c, op.inputs.at(1));
    const bool constantB = c.model.initializer(op.inputs[1]) != nullptr;
    memory::desc src, weights, bias, dst;
    dnnl::primitive_attr attributes;
    const Tensor* C = nullptr;
    if (op.opType == "Gemm") {
        const bool transA = op.intAttribute("transA", 0) != 0, transB = op.intAttribute("transB", 0) != 0;
        const KernelContext context(op, 0, modelOpset(c.model, ""), {}, {}, nullptr);
        const float alpha = context.floatAttribute("alpha", 1.0f), beta = context.floatAttribute("beta", 1.0f);
        const int64_t M = transA ? A.dim(1) : A.dim(0), K = transA ? A.dim(0) : A.dim(1);
        const int64_t N = transB ? Bt.dim(0) : Bt.dim(1);
        src = memory::desc({M, K}, kF32, transA ? memory::dims{1, M} : memory::dims{K, 1});
        weights = memory::desc({K, N}, kF32, transB ? memory::dims{1, K} : memory::dims{N, 1});
        dst = plainDesc({M, N});
        if (op.inputs.size() > 2 && !op.inputs[2].empty()) {
            C = &valueOf(c, op.inputs[2]);
            if (beta != 1.0f || C->numel() != N || (C->rank() == 2 && C->dim(0) != 1))
                throw Error("Gemm's C is mapped only as a bias ([N] or [1, N], beta 1)");
            bias = memory::desc({1, N}, kF32, Tag::ab);
        }
        if (alpha != 1.0f)
            attributes.set_output_scales(0, {alpha});
    } else {
        if (A.rank() < 2 || Bt.rank() < 2)
            throw Error("a 1-D MatMul operand is not mapped");
        const size_t rank = size_t(std::max(A.rank(), Bt.rank()));
        Shape a = A.shape(), b = Bt.shape();
        a.insert(a.begin(), rank - a.size(), 1);
        b.insert(b.begin(), rank - b.size(), 1);
        Shape out(rank);
        for (size_t i = 0; i + 2 < rank; ++i)
            out[i] = std::max(a[i], b[i]);
        out[rank - 2] = a[rank - 2];
        out[rank - 1] = b[rank - 1];
        src = plainDesc(dimsOf(a));
        weights = plainDesc(dimsOf(b));
        dst = plainDesc(dimsOf(out));
    }
    const bool blocked = layout == OnednnLayout::Blocked && constantB;
    const memory::desc weightsAsked = blocked ? memory::desc(weights.dims(), kF32, Tag::any) : weights;
    const dnnl::matmul::primitive_desc pd(C ? dnnl::matmul::desc(src, weightsAsked, bias, dst)
                                            : dnnl::matmul::desc(src, weightsAsked, dst),
                                          attributes, engine_);
    implementation_ = pd.impl_info_str();
    primitive_ = dnnl::matmul(pd);
    addOperand(DNNL_ARG_SRC, A, src, pd.src_desc());
    if (constantB)
        bindWeights(DNNL_ARG_WEIGHTS, Bt, weights, pd.weights_desc());
    else
        addOperand(DNNL_ARG_WEIGHTS, Bt, weights, pd.weights_desc());
    if (C)
        bindWeights(DNNL_ARG_BIAS, *C, bias, pd.bias_desc());
    const memory::dims d = dst.dims();
    finish(dst, pd.dst_desc(), {d.begin(), d.end()});
}

void OnednnOp::bindWeights(int arg, const Tensor& t, const memory::desc& plain, const memory::desc& wanted)
{
    memory given(plain, engine_, const_cast<void*>(t.rawData())); // oneDNN only reads it
    if (plain == wanted) {
        constants_.emplace_back(arg, given);
        return;
    }
    kept_.push_back(bufferFor(wanted));
    memory reordered(wanted, engine_, kept_.back().mutableRawData());
    dnnl::reorder(given, reordered).execute(stream_, given, reordered);
    stream_.wait();
    constants_.emplace_back(arg, reordered);
}

void OnednnOp::addOperand(int arg, const Tensor& t, const memory::desc& plain, const memory::desc& wanted)
{
    Operand o;
    o.arg = arg;
    o.tensor = &t;
    o.plain = plain;
    o.wanted = wanted;
    memory given(plain, engine_, const_cast<void*>(t.rawData()));
    if (plain == wanted) {
        o.kept = given;
    } else {
        kept_.push_back(bufferFor(wanted));
        o.kept = memory(wanted, engine_, kept_.back().mutableRawData());
        o.in = dnnl::reorder(dnnl::reorder::primitive_desc(engine_, plain, engine_, wanted));
        o.in->execute(stream_, given, o.kept);
        stream_.wait();
        keptDiffers_ = true;
    }
    operands_.push_back(std::move(o));
}

void OnednnOp::finish(const memory::desc& plainOut, const memory::desc& wantedOut, Shape outputShape)
{
    plainOut_ = plainOut;
    wantedOut_ = wantedOut;
    outputShape_ = std::move(outputShape);
    if (plainOut != wantedOut) {
        out_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine_, wantedOut, engine_, plainOut));
        keptDiffers_ = true;
    }
}

Tensor OnednnOp::run()
{
    std::unordered_map<int, memory> args(constants_.begin(), constants_.end());
    std::vector<Tensor> buffers; // the reordered activations, freed after the call
    const Operand* addend = nullptr;
    for (Operand& o : operands_) {
        if (o.arg == DNNL_ARG_DST) {
            addend = &o;
            continue;
        }
        memory given(o.plain, engine_, const_cast<void*>(o.tensor->rawData()));
        if (!o.in) {
            args.emplace(o.arg, given);
            continue;
        }
        buffers.push_back(bufferFor(o.wanted));
        memory reordered(o.wanted, engine_, buffers.back().mutableRawData());
        o.in->execute(stream_, given, reordered);
        args.emplace(o.arg, reordered);
    }
    Tensor Y = Tensor::uninitialized(DType::F32, outputShape_);
    memory plain(plainOut_, engine_, Y.mutableRawData());
    memory dst = plain;
    if (out_) {
        buffers.push_back(bufferFor(wantedOut_));
        dst = memory(wantedOut_, engine_, buffers.back().mutableRawData());
    }
    if (addend) { // what the sum post-op adds to
        if (addend->in) {
            memory given(addend->plain, engine_, const_cast<void*>(addend->tensor->rawData()));
            addend->in->execute(stream_, given, dst);
        } else
            std::memcpy(dst.get_data_handle(), addend->tensor->rawData(), addend->tensor->nbytes());
    }
    args.emplace(DNNL_ARG_DST, dst);
    primitive_.execute(stream_, args);
    if (out_)
        out_->execute(stream_, dst, plain);
    stream_.wait();
    return Y;
}

void OnednnOp::runKept()
{
    std::unordered_map<int, memory> args(constants_.begin(), constants_.end());
    Tensor out = bufferFor(wantedOut_); // a fresh output, as a kernel allocates it
    keptOut_ = memory(wantedOut_, engine_, out.mutableRawData());
    for (const Operand& o : operands_) {
        if (o.arg == DNNL_ARG_DST) // the residual addend, already in the output's layout: copied in
            std::memcpy(out.mutableRawData(), o.kept.get_data_handle(), wantedOut_.get_size());
        else
            args.emplace(o.arg, o.kept);
    }
    args.emplace(DNNL_ARG_DST, keptOut_);
    primitive_.execute(stream_, args);
    stream_.wait();
    keptOutStorage_ = std::move(out); // the previous call's output is freed here
}

Tensor OnednnOp::keptOutput()
{
    Tensor Y = Tensor::uninitialized(DType::F32, outputShape_);
    memory plain(plainOut_, engine_, Y.mutableRawData());
    if (out_)
        out_->execute(stream_, keptOut_, plain);
    else
        std::copy_n(static_cast<const float*>(keptOut_.get_data_handle()), Y.numel(), Y.mutableValues<float>().data());
    stream_.wait();
    return Y;
}

} // namespace qs::bench
