#pragma once
/// Strided non-owning views of the attention operands and the argument packs of the kernels.

#include <ioattn/bf16.hpp>
#include <ioattn/problem.hpp>

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace ioattn {

/// A rank-4 tensor [batch][heads][rows][cols] with unit column stride and arbitrary
/// non-negative batch, head and row strides (in elements). `extent` is the number of elements
/// addressable from `data`; validation checks every addressed element lies inside it.
template <typename T>
struct TensorView {
    T* data = nullptr;
    std::int64_t batch = 0;
    std::int64_t heads = 0;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t stride_batch = 0;
    std::int64_t stride_head = 0;
    std::int64_t stride_row = 0;
    std::int64_t extent = 0;

    /// A densely packed view (row-major, heads inside batch).
    static TensorView
    packed(T* data, std::int64_t batch, std::int64_t heads, std::int64_t rows, std::int64_t cols) {
        return {data,
                batch,
                heads,
                rows,
                cols,
                heads * rows * cols,
                rows * cols,
                cols,
                batch * heads * rows * cols};
    }

    /// Pointer to element (b, h, i, 0).
    T* row(std::int64_t b, std::int64_t h, std::int64_t i) const {
        return data + b * stride_batch + h * stride_head + i * stride_row;
    }

    /// One past the largest addressed offset (0 for an empty view).
    [[nodiscard]] std::int64_t span() const {
        if (batch == 0 || heads == 0 || rows == 0 || cols == 0)
            return 0;
        return (batch - 1) * stride_batch + (heads - 1) * stride_head + (rows - 1) * stride_row +
               cols;
    }

    /// A read-only view of the same elements.
    operator TensorView<const T>() const {
        return {data, batch, heads, rows, cols, stride_batch, stride_head, stride_row, extent};
    }
};

/// The arithmetic type of operands of type Scalar, which is also the type of L (the
/// log-sum-exp) and of the softmax statistics: Scalar itself, and float for bf16 operands
/// (storage bfloat16, arithmetic and accumulators fp32; docs/design.md section 16).
template <typename Scalar>
using Accumulator = std::conditional_t<std::is_same_v<Scalar, bf16>, float, Scalar>;

/// Inputs and outputs of a forward pass.
/// q: [batch][heads][n_q][d], k: [batch][kv_heads][n_k][d], v: [batch][kv_heads][n_k][d_v],
/// o: [batch][heads][n_q][d_v], lse: [batch][heads][n_q][1] (natural-log log-sum-exp of the
/// scaled scores; -inf for a row with no visible key; of type Accumulator<Scalar>). Outputs must
/// not overlap inputs. Scalar is float, double or bf16 (storage bfloat16, arithmetic fp32).
template <typename Scalar>
struct ForwardArgs {
    Problem problem;
    TensorView<const Scalar> q;
    TensorView<const Scalar> k;
    TensorView<const Scalar> v;
    TensorView<Scalar> o;
    TensorView<Accumulator<Scalar>> lse;

    /// Resolves the problem and checks every view against it (shapes, strides, extents,
    /// output/input overlap). Throws InvalidArgument naming `where`. With `shape_only`, null
    /// data pointers are allowed (dry runs walk the schedule without touching data).
    void validate(std::string_view where, bool shape_only = false);

    /// Densely packed views of the resolved problem over the given buffers (null pointers give
    /// shape-only arguments for dry runs).
    static ForwardArgs packed(const Problem& problem,
                              const Scalar* q,
                              const Scalar* k,
                              const Scalar* v,
                              Scalar* o,
                              Accumulator<Scalar>* lse) {
        const Problem p = problem.resolved("ioattn::ForwardArgs::packed");
        using In = TensorView<const Scalar>;
        using Out = TensorView<Scalar>;
        return {p,
                In::packed(q, p.batch, p.heads, p.n_q, p.d),
                In::packed(k, p.batch, p.kv_heads, p.n_k, p.d),
                In::packed(v, p.batch, p.kv_heads, p.n_k, p.d_v),
                Out::packed(o, p.batch, p.heads, p.n_q, p.d_v),
                TensorView<Accumulator<Scalar>>::packed(lse, p.batch, p.heads, p.n_q, 1)};
    }

    /// Views of the problem's shapes with no data (null pointers): what the dry runs and the
    /// closed forms walk.
    static ForwardArgs shape_only(const Problem& problem) {
        return packed(problem, nullptr, nullptr, nullptr, nullptr, nullptr);
    }
};

/// Inputs and outputs of a backward pass: the forward's operands and outputs (o, lse as the
/// forward wrote them), the upstream gradient d_o [batch][heads][n_q][d_v], and the gradients
/// d_q (shaped like q), d_k (like k), d_v (like v), which are overwritten.
template <typename Scalar>
struct BackwardArgs : ForwardArgs<Scalar> {
    TensorView<const Scalar> d_o;
    TensorView<Scalar> d_q;
    TensorView<Scalar> d_k;
    TensorView<Scalar> d_v;

    /// As ForwardArgs::validate, plus the gradient views; o and lse are read-only here.
    void validate(std::string_view where, bool shape_only = false);

    /// Densely packed views of the resolved problem (null pointers: shape-only arguments).
    static BackwardArgs packed(const Problem& problem,
                               const Scalar* q,
                               const Scalar* k,
                               const Scalar* v,
                               Scalar* o,
                               Accumulator<Scalar>* lse,
                               const Scalar* d_o,
                               Scalar* d_q,
                               Scalar* d_k,
                               Scalar* d_v) {
        BackwardArgs a;
        static_cast<ForwardArgs<Scalar>&>(a) =
            ForwardArgs<Scalar>::packed(problem, q, k, v, o, lse);
        const Problem& p = a.problem;
        a.d_o = TensorView<const Scalar>::packed(d_o, p.batch, p.heads, p.n_q, p.d_v);
        a.d_q = TensorView<Scalar>::packed(d_q, p.batch, p.heads, p.n_q, p.d);
        a.d_k = TensorView<Scalar>::packed(d_k, p.batch, p.kv_heads, p.n_k, p.d);
        a.d_v = TensorView<Scalar>::packed(d_v, p.batch, p.kv_heads, p.n_k, p.d_v);
        return a;
    }

    /// Views of the problem's shapes with no data (as ForwardArgs::shape_only).
    static BackwardArgs shape_only(const Problem& problem) {
        return packed(problem,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr);
    }
};

extern template struct ForwardArgs<float>;
extern template struct ForwardArgs<double>;
extern template struct BackwardArgs<float>;
extern template struct BackwardArgs<double>;
extern template struct ForwardArgs<bf16>;
extern template struct BackwardArgs<bf16>;

} // namespace ioattn
