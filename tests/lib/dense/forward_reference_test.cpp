// Tests of ioattn::dense::forward_reference: agreement with the naive oracle on edge and random
// shapes (kind 1), the error ratio (2), determinism across thread counts (5), every documented
// throw (6), and bad values (NaN, +-Inf, huge scores, fully masked rows).

#include "forward_suite.hpp"

#include <catch2/catch.hpp>

using ioattn::Schedule;
using ioattn::Tiling;
namespace t = ioattn::test;

namespace {

/// A tiling with several row and column blocks on the bad-value problems.
const Tiling kTiling = ioattn::Tiling{ioattn::Schedule::reference, 1, 1};

} // namespace

TEMPLATE_TEST_CASE("forward_reference: agreement on edge shapes and tilings",
                   "[dense][reference]",
                   float,
                   double) {
    t::suite_edge_shapes<TestType>(Schedule::reference);
}

TEMPLATE_TEST_CASE("forward_reference: agreement on seeded random shapes",
                   "[dense][reference]",
                   float,
                   double) {
    t::suite_random<TestType>(Schedule::reference);
}

TEMPLATE_TEST_CASE("forward_reference: error ratio on a long sequence",
                   "[dense][reference]",
                   float,
                   double) {
    t::suite_error_ratio<TestType>(kTiling);
}

TEMPLATE_TEST_CASE("forward_reference: bitwise equal for 1 and 2 threads",
                   "[dense][reference]",
                   float,
                   double) {
    t::suite_determinism<TestType>(kTiling);
}

TEMPLATE_TEST_CASE("forward_reference: documented throws",
                   "[dense][reference][throws]",
                   float,
                   double) {
    t::suite_throws<TestType>(Schedule::reference);
}

TEMPLATE_TEST_CASE("forward_reference: NaN in a row of Q reaches only that output row",
                   "[dense][reference][bad_values]",
                   float,
                   double) {
    t::suite_nan_in_q<TestType>(kTiling);
}

TEMPLATE_TEST_CASE("forward_reference: NaN in a row of K reaches only the rows that see it",
                   "[dense][reference][bad_values]",
                   float,
                   double) {
    t::suite_nan_in_k<TestType>(kTiling);
}

TEMPLATE_TEST_CASE("forward_reference: NaN in a causally hidden row of V does not leak",
                   "[dense][reference][bad_values]",
                   float,
                   double) {
    t::suite_bad_v_masked<TestType>(kTiling, false);
}

TEMPLATE_TEST_CASE("forward_reference: +-Inf in a row of V reaches only the rows that see it",
                   "[dense][reference][bad_values]",
                   float,
                   double) {
    t::suite_bad_v_masked<TestType>(kTiling, true);
}

TEMPLATE_TEST_CASE("forward_reference: -inf scores take no part and make no NaN",
                   "[dense][reference][bad_values]",
                   float,
                   double) {
    t::suite_minus_inf_scores<TestType>(kTiling);
}

TEMPLATE_TEST_CASE("forward_reference: huge scores (|s| ~ 1e30) make no NaN",
                   "[dense][reference][bad_values]",
                   float,
                   double) {
    t::suite_huge_scores<TestType>(kTiling);
}

TEMPLATE_TEST_CASE("forward_reference: fully masked rows give O = 0 and L = -inf",
                   "[dense][reference][bad_values]",
                   float,
                   double) {
    t::suite_fully_masked<TestType>(kTiling);
}
