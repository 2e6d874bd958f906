// Adversarial numerics of the dense kernels: every schedule (fused, materialized),
// forward and backward, float and double, on the seeded cases of tests/support/adversarial.hpp
// (extreme, tied, masked, non-finite, denormal scores and values; tiny and huge scales).
// Where the oracle is finite the kernel is finite and within 2 err(naive<T>) + tiny, row by
// row; NaN and infinities reach only what depends on them. IOATTN_TEST_REPORT=1 prints the
// cases run and the worst error ratio.

#include "adversarial_rule.hpp"

#include <ioattn/dense.hpp>

#include <catch2/catch.hpp>

namespace adv = ioattn::test::adversarial;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Pass;
using ioattn::Schedule;
using ioattn::Tiling;

TEMPLATE_TEST_CASE("adversarial inputs: dense kernels agree with the oracle where it is finite",
                   "[adversarial]",
                   float,
                   double) {
    using T = TestType;
    adv::run_cases<T>("dense",
                      false,
                      400 * ioattn::test::test_multiplier(),
                      1,
                      [](const adv::Case<T>&,
                         Schedule,
                         Pass pass,
                         const Tiling& t,
                         const MemoryModel& m,
                         const ioattn::BackwardArgs<T>& a) {
                          NullCounter counter;
                          if (pass == Pass::forward)
                              ioattn::dense::forward(a, t, m, counter);
                          else
                              ioattn::dense::backward(a, t, m, counter);
                      });
}
