// Einsum by its definition: one loop over every combination of the labels'
// indices, multiplying the operands' elements and summing into the output.
// Ellipses become unnamed labels. This is exact but not fast: models whose
// Einsum is a batched matrix product run at loop speed, not GEMM speed.

#include "runtime/ops/einsum.h"

#include <map>

#include "runtime/tensor_cast.h"

namespace qs::ops {

namespace {

// One operand's labels; ellipsis dimensions become labels '0', '1', ... (in order).
std::vector<char> parseTerm(const KernelContext& ctx, const std::string& term, int rank, int& ellipsisRank)
{
    std::vector<char> labels;
    const size_t dots = term.find("...");
    const int named = int(term.size()) - (dots == std::string::npos ? 0 : 3);
    if (dots != std::string::npos) {
        const int e = rank - named;
        if (e < 0 || (ellipsisRank >= 0 && e != ellipsisRank && e != 0 && ellipsisRank != 0))
            ctx.fail("ellipsis dimensions of '" + term + "' do not match");
        ellipsisRank = std::max(ellipsisRank, e);
    } else if (named != rank) {
        ctx.fail("term '" + term + "' has " + std::to_string(named) + " labels for an input of rank " +
                 std::to_string(rank));
    }
    for (size_t i = 0; i < term.size(); ++i) {
        if (i == dots) {
            const int e = rank - named;
            for (int k = 0; k < e; ++k)
                labels.push_back(char('0' + (ellipsisRank - e) + k)); // right-aligned, as broadcasting
            i += 2;
            continue;
        }
        if (!std::isalpha(static_cast<unsigned char>(term[i])))
            ctx.fail("equation has an invalid label '" + std::string(1, term[i]) + "'");
        labels.push_back(term[i]);
    }
    return labels;
}

} // namespace

void einsum(KernelContext& ctx)
{
    std::string equation;
    for (char c : ctx.stringAttribute("equation", ""))
        if (c != ' ')
            equation += c;
    const size_t arrow = equation.find("->");
    const std::string lhs = equation.substr(0, arrow);
    std::vector<std::string> terms;
    for (size_t start = 0;;) {
        const size_t comma = lhs.find(',', start);
        terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos)
            break;
        start = comma + 1;
    }
    if (terms.size() != ctx.inputCount())
        ctx.fail("equation has " + std::to_string(terms.size()) + " terms for " + std::to_string(ctx.inputCount()) +
                 " inputs");
    const DType type = ctx.input(0).dtype();
    std::vector<Tensor> inputs;
    std::vector<std::vector<char>> labels;
    int ellipsisRank = -1;
    for (size_t i = 0; i < terms.size(); ++i) {
        inputs.push_back(castTensor(ctx.input(i), DType::F64));
        labels.push_back(parseTerm(ctx, terms[i], inputs.back().rank(), ellipsisRank));
    }
    // Label sizes (a size-1 ellipsis dimension broadcasts).
    std::map<char, int64_t> size;
    std::map<char, int> uses;
    for (size_t i = 0; i < inputs.size(); ++i)
        for (size_t a = 0; a < labels[i].size(); ++a) {
            const char l = labels[i][a];
            const int64_t d = inputs[i].dim(int(a));
            auto [it, inserted] = size.emplace(l, d);
            if (!inserted && it->second != d) {
                if (it->second == 1 && l <= '9')
                    it->second = d;
                else if (!(d == 1 && l <= '9'))
                    ctx.fail("label '" + std::string(1, l) + "' has sizes " + std::to_string(it->second) + " and " +
                             std::to_string(d));
            }
            ++uses[l];
        }
    std::vector<char> out;
    if (arrow != std::string::npos) {
        int e = std::max(ellipsisRank, 0);
        out = parseTerm(
            ctx, equation.substr(arrow + 2),
            int(equation.size() - arrow - 2) - (equation.find("...", arrow) == std::string::npos ? 0 : 3) + e, e);
    } else {
        for (int k = 0; k < std::max(ellipsisRank, 0); ++k)
            out.push_back(char('0' + k));
        for (const auto& [l, n] : uses)
            if (n == 1 && l > '9')
                out.push_back(l);
    }
    std::vector<char> all(out);
    for (const auto& [l, d] : size)
        if (std::find(all.begin(), all.end(), l) == all.end())
            all.push_back(l);
    Shape outShape;
    for (char l : out) {
        if (!size.count(l))
            ctx.fail("output label '" + std::string(1, l) + "' is in no input");
        outShape.push_back(size[l]);
    }
    // Per operand, the stride each label of `all` moves it by (0 for absent or broadcast labels).
    std::vector<std::vector<int64_t>> strides(inputs.size(), std::vector<int64_t>(all.size(), 0));
    for (size_t i = 0; i < inputs.size(); ++i) {
        const Shape s = rowMajorStrides(inputs[i].shape());
        for (size_t a = 0; a < labels[i].size(); ++a)
            for (size_t k = 0; k < all.size(); ++k)
                if (all[k] == labels[i][a] && inputs[i].dim(int(a)) != 1)
                    strides[i][k] += s[a];
    }
    Tensor result(DType::F64, outShape);
    double* dst = result.mutableValues<double>().data();
    std::vector<int64_t> coord(all.size(), 0);
    std::vector<int64_t> dims;
    for (char l : all)
        dims.push_back(size[l]);
    int64_t total = 1;
    for (int64_t d : dims)
        total *= d;
    const int64_t reduced = result.numel() ? total / result.numel() : 0;
    for (int64_t n = 0; n < total; ++n) {
        double product = 1.0;
        for (size_t i = 0; i < inputs.size(); ++i) {
            int64_t offset = 0;
            for (size_t k = 0; k < all.size(); ++k)
                offset += coord[k] * strides[i][k];
            product *= inputs[i].values<double>()[size_t(offset)];
        }
        dst[reduced ? n / reduced : 0] += product; // output labels come first in `all`: row-major order
        for (size_t k = all.size(); k-- > 0;) {
            if (++coord[k] < dims[k])
                break;
            coord[k] = 0;
        }
    }
    ctx.setOutput(0, castTensor(result, type));
}

} // namespace qs::ops
