// Tests of ioattn::dense::forward_materialized: agreement with the naive oracle on edge and random
// shapes (kind 1), the error ratio (2), determinism across thread counts (5), every documented
// throw (6), and bad values (NaN, +-Inf, huge scores, fully masked rows).

#include "forward_suite.hpp"

#include <catch2/catch.hpp>

using ioattn::Schedule;
using ioattn::Tiling;
namespace t = ioattn::test;

namespace {

/// A tiling with several row and column blocks on the bad-value problems.
const Tiling kForwardMaterializedTiling = ioattn::Tiling{ioattn::Schedule::materialized, 4, 4};

} // namespace

TEMPLATE_TEST_CASE("forward_materialized: agreement on edge shapes and tilings",
                   "[dense][materialized]",
                   float,
                   double) {
    t::suite_edge_shapes<TestType>(Schedule::materialized);
}

TEMPLATE_TEST_CASE("forward_materialized: agreement on seeded random shapes",
                   "[dense][materialized]",
                   float,
                   double) {
    t::suite_random<TestType>(Schedule::materialized);
}

TEMPLATE_TEST_CASE("forward_materialized: error ratio on a long sequence",
                   "[dense][materialized]",
                   float,
                   double) {
    t::suite_error_ratio<TestType>(kForwardMaterializedTiling);
}

TEMPLATE_TEST_CASE("forward_materialized: bitwise equal for 1 and 2 threads",
                   "[dense][materialized]",
                   float,
                   double) {
    t::suite_determinism<TestType>(kForwardMaterializedTiling);
}

TEMPLATE_TEST_CASE("forward_materialized: documented throws",
                   "[dense][materialized][throws]",
                   float,
                   double) {
    t::suite_throws<TestType>(Schedule::materialized);
}

TEMPLATE_TEST_CASE("forward_materialized: NaN in a row of Q reaches only that output row",
                   "[dense][materialized][bad_values]",
                   float,
                   double) {
    t::suite_nan_in_q<TestType>(kForwardMaterializedTiling);
}

TEMPLATE_TEST_CASE("forward_materialized: NaN in a row of K reaches only the rows that see it",
                   "[dense][materialized][bad_values]",
                   float,
                   double) {
    t::suite_nan_in_k<TestType>(kForwardMaterializedTiling);
}

TEMPLATE_TEST_CASE("forward_materialized: NaN in a causally hidden row of V does not leak",
                   "[dense][materialized][bad_values]",
                   float,
                   double) {
    t::suite_bad_v_masked<TestType>(kForwardMaterializedTiling, false);
}

TEMPLATE_TEST_CASE("forward_materialized: +-Inf in a row of V reaches only the rows that see it",
                   "[dense][materialized][bad_values]",
                   float,
                   double) {
    t::suite_bad_v_masked<TestType>(kForwardMaterializedTiling, true);
}

TEMPLATE_TEST_CASE("forward_materialized: -inf scores take no part and make no NaN",
                   "[dense][materialized][bad_values]",
                   float,
                   double) {
    t::suite_minus_inf_scores<TestType>(kForwardMaterializedTiling);
}

TEMPLATE_TEST_CASE("forward_materialized: huge scores (|s| ~ 1e30) make no NaN",
                   "[dense][materialized][bad_values]",
                   float,
                   double) {
    t::suite_huge_scores<TestType>(kForwardMaterializedTiling);
}

TEMPLATE_TEST_CASE("forward_materialized: fully masked rows give O = 0 and L = -inf",
                   "[dense][materialized][bad_values]",
                   float,
                   double) {
    t::suite_fully_masked<TestType>(kForwardMaterializedTiling);
}

TEMPLATE_TEST_CASE("forward_materialized: counted I/O equals io_cost_forward_materialized",
                   "[dense][materialized][io]",
                   float,
                   double) {
    t::suite_io_exact<TestType>(Schedule::materialized);
}

TEMPLATE_TEST_CASE("forward_materialized: the recorded trace adds up to the counts",
                   "[dense][materialized][io]",
                   float,
                   double) {
    t::suite_io_trace<TestType>(kForwardMaterializedTiling);
}
