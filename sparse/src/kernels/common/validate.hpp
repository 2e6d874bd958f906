#pragma once
// Entry validation shared by the sparse kernels.

#include "kernels/common/row_source.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

#include <string>
#include <type_traits>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// Resolves and checks the views, the support's shape against the problem, that the problem
/// is not causal (the support carries the mask) and that the tiling fits M.
template <typename Args>
void validate(Args& a,
              const Support& s,
              const Tiling* tiling,
              Schedule schedule,
              const MemoryModel& memory,
              const char* where,
              bool shape_only,
              Pass pass = Pass::forward) {
    a.validate(where, shape_only);
    const Problem& p = a.problem;
    if (s.n_q() != p.n_q || s.n_k() != p.n_k)
        throw InvalidArgument(std::string(where) + ": support is " + std::to_string(s.n_q()) +
                              " x " + std::to_string(s.n_k()) + " but the problem has n_q = " +
                              std::to_string(p.n_q) + ", n_k = " + std::to_string(p.n_k));
    if (p.causal)
        throw InvalidArgument(std::string(where) +
                              ": problem.causal = true; use the 'causal' pattern instead");
    if (tiling == nullptr)
        return;
    if (tiling->schedule != schedule)
        throw InvalidArgument(std::string(where) + ": tiling is for the " +
                              std::string(to_string(tiling->schedule)) + " schedule");
    tiling->validate(where, memory, p, pass, Kernels::sparse);
}

/// Checks the sparse operands against the problem (stacked rows: batch*heads*n_q for Q,
/// batch*kv_heads*n_k for K and V; columns d or d_v) and, unless shape_only, that every operand
/// given densely has data (for BackwardArgs also d_o and the gradients); returns the row
/// sources of the three operands. Runs Args::validate(where, true) first.
template <typename Args, typename Scalar>
Operands<Scalar> validate_inputs(
    Args& a, const Support& s, const SparseInputs<Scalar>& in, const char* where, bool shape_only) {
    a.validate(where, true);
    check_input_shapes(a.problem, in, where);
    const auto need = [&](const char* name, const void* data, bool sparse) {
        if (!shape_only && !sparse && data == nullptr)
            throw InvalidArgument(std::string(where) + ": " + name + " has null data");
    };
    need("q", a.q.data, in.q != nullptr);
    need("k", a.k.data, in.k != nullptr);
    need("v", a.v.data, in.v != nullptr);
    need("o", a.o.data, false);
    need("lse", a.lse.data, false);
    if constexpr (std::is_same_v<Args, BackwardArgs<Scalar>>) {
        need("d_o", a.d_o.data, false);
        need("d_q", a.d_q.data, false);
        need("d_k", a.d_k.data, false);
        need("d_v", a.d_v.data, false);
    }
    (void)s;
    return {{a.q, in.q}, {a.k, in.k}, {a.v, in.v}};
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
