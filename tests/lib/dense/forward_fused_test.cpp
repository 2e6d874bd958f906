// Tests of ioattn::dense::forward_fused: agreement with the naive oracle on edge and random
// shapes (kind 1), the error ratio (2), determinism across thread counts (5), every documented
// throw (6), and bad values (NaN, +-Inf, huge scores, fully masked rows).

#include "forward_suite.hpp"

#include <catch2/catch.hpp>

using ioattn::Schedule;
using ioattn::Tiling;
namespace t = ioattn::test;

namespace {

/// A tiling with several row and column blocks on the bad-value problems.
const Tiling kForwardFusedTiling = ioattn::Tiling{ioattn::Schedule::fused, 8, 8};

} // namespace

TEMPLATE_TEST_CASE("forward_fused: agreement on edge shapes and tilings",
                   "[dense][fused]",
                   float,
                   double) {
    t::suite_edge_shapes<TestType>(Schedule::fused);
}

TEMPLATE_TEST_CASE("forward_fused: agreement on seeded random shapes",
                   "[dense][fused]",
                   float,
                   double) {
    t::suite_random<TestType>(Schedule::fused);
}

TEMPLATE_TEST_CASE("forward_fused: error ratio on a long sequence",
                   "[dense][fused]",
                   float,
                   double) {
    t::suite_error_ratio<TestType>(kForwardFusedTiling);
}

TEMPLATE_TEST_CASE("forward_fused: bitwise equal for 1 and 2 threads",
                   "[dense][fused]",
                   float,
                   double) {
    t::suite_determinism<TestType>(kForwardFusedTiling);
}

TEMPLATE_TEST_CASE("forward_fused: documented throws", "[dense][fused][throws]", float, double) {
    t::suite_throws<TestType>(Schedule::fused);
}

TEMPLATE_TEST_CASE("forward_fused: NaN in a row of Q reaches only that output row",
                   "[dense][fused][bad_values]",
                   float,
                   double) {
    t::suite_nan_in_q<TestType>(kForwardFusedTiling);
}

TEMPLATE_TEST_CASE("forward_fused: NaN in a row of K reaches only the rows that see it",
                   "[dense][fused][bad_values]",
                   float,
                   double) {
    t::suite_nan_in_k<TestType>(kForwardFusedTiling);
}

TEMPLATE_TEST_CASE("forward_fused: NaN in a causally hidden row of V does not leak",
                   "[dense][fused][bad_values]",
                   float,
                   double) {
    t::suite_bad_v_masked<TestType>(kForwardFusedTiling, false);
}

TEMPLATE_TEST_CASE("forward_fused: +-Inf in a row of V reaches only the rows that see it",
                   "[dense][fused][bad_values]",
                   float,
                   double) {
    t::suite_bad_v_masked<TestType>(kForwardFusedTiling, true);
}

TEMPLATE_TEST_CASE("forward_fused: -inf scores take no part and make no NaN",
                   "[dense][fused][bad_values]",
                   float,
                   double) {
    t::suite_minus_inf_scores<TestType>(kForwardFusedTiling);
}

TEMPLATE_TEST_CASE("forward_fused: huge scores (|s| ~ 1e30) make no NaN",
                   "[dense][fused][bad_values]",
                   float,
                   double) {
    t::suite_huge_scores<TestType>(kForwardFusedTiling);
}

TEMPLATE_TEST_CASE("forward_fused: fully masked rows give O = 0 and L = -inf",
                   "[dense][fused][bad_values]",
                   float,
                   double) {
    t::suite_fully_masked<TestType>(kForwardFusedTiling);
}

TEMPLATE_TEST_CASE("forward_fused: counted I/O equals io_cost_forward_fused",
                   "[dense][fused][io]",
                   float,
                   double) {
    t::suite_io_exact<TestType>(Schedule::fused);
}

TEMPLATE_TEST_CASE("forward_fused: the recorded trace adds up to the counts",
                   "[dense][fused][io]",
                   float,
                   double) {
    t::suite_io_trace<TestType>(kForwardFusedTiling);
}
