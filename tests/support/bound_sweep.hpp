#pragma once
// Helpers of the I/O bound sweeps (forward_bounds_test.cpp, backward_bounds_test.cpp): the square
// problems they sweep, the band each schedule's counted / bound ratios are collected in, and the
// spread of a band.

#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace ioattn::test {

/// The (N, d) pairs the sweeps run over.
inline const std::vector<std::pair<std::int64_t, std::int64_t>> kSweepSizes = {{1024, 32},
                                                                               {2048, 64}};

/// The resolved N x N problem with head dimension d (one batch, one head, not causal).
inline Problem square(std::int64_t n, std::int64_t d) {
    Problem p;
    p.n_q = n;
    p.n_k = n;
    p.d = d;
    return p.resolved();
}

/// max / min of the ratios: the width of the band they lie in.
inline double spread(const std::vector<double>& ratios) {
    const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
    return *hi / *lo;
}

/// counted / bound ratios in each schedule's band: the fused one where M >= d^2, the materialized
/// one where M < d^2 (docs/design.md section 5.1).
struct Bands {
    std::vector<double> fused;
    std::vector<double> materialized;

    /// Keeps the ratio of schedule s at M = m if m lies in s's band.
    void add(Schedule s, std::int64_t m, std::int64_t d, double ratio) {
        if (s == Schedule::fused && m >= d * d)
            fused.push_back(ratio);
        if (s == Schedule::materialized && m < d * d)
            materialized.push_back(ratio);
    }
};

} // namespace ioattn::test
