#pragma once
// Entry validation shared by the sparse kernels.

#include <ioattn/error.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

#include <string>

namespace ioattn::sparse::detail {

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
    tiling->validate(where, memory, p, pass);
}

} // namespace ioattn::sparse::detail
