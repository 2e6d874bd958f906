// Adversarial numerics of the sparse kernels: fused and materializing, forward and
// backward, float and double, on the cases of tests/support/adversarial.hpp with random masks
// that leave some rows empty. Where the oracle is finite the kernel is finite and within
// 2 err(naive<T>) + tiny, row by row. IOATTN_TEST_REPORT=1 prints the cases and worst ratio.

#include "adversarial_rule.hpp"

#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/support.hpp>

#include <catch2/catch.hpp>

#include <vector>

namespace adv = ioattn::test::adversarial;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Pass;
using ioattn::Schedule;
using ioattn::Tiling;

namespace {

/// The case's mask as a Support.
template <typename T>
ioattn::sparse::Support support_of(const adv::Case<T>& c) {
    std::vector<std::int64_t> offsets{0}, cols;
    for (std::int64_t i = 0; i < c.p.n_q; ++i) {
        for (std::int64_t j = 0; j < c.p.n_k; ++j)
            if (c.sees(i, j))
                cols.push_back(j);
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    return {c.p.n_q, c.p.n_k, std::move(offsets), std::move(cols)};
}

} // namespace

TEMPLATE_TEST_CASE("adversarial inputs: sparse kernels agree with the oracle where it is finite",
                   "[adversarial]",
                   float,
                   double) {
    using T = TestType;
    namespace sp = ioattn::sparse;
    adv::run_cases<T>("sparse",
                      true,
                      400 * ioattn::test::test_multiplier(),
                      100001,
                      [](const adv::Case<T>& c,
                         Schedule s,
                         Pass pass,
                         const Tiling& t,
                         const MemoryModel& m,
                         const ioattn::BackwardArgs<T>& a) {
                          const sp::Support support = support_of(c);
                          NullCounter n;
                          if (pass == Pass::forward && s == Schedule::fused)
                              sp::forward_fused(a, support, t, m, n);
                          else if (pass == Pass::forward)
                              sp::forward_materialized(a, support, t, m, n);
                          else if (s == Schedule::fused)
                              sp::backward_fused(a, support, t, m, n);
                          else
                              sp::backward_materialized(a, support, t, m, n);
                      });
}
