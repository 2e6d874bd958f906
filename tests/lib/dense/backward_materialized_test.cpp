// Tests of ioattn::dense::backward_materialized: agreement with the naive backward of tests/support on
// edge and random shapes (kind 1), the error ratio (2), counted I/O == io_cost_backward_materialized
// with DryRunCounter and CapacityError (3), central finite differences (4), determinism across
// thread counts (5), documented throws (6), and fully masked rows and hidden NaN.

#include "backward_suite.hpp"

#include <catch2/catch.hpp>

using ioattn::Schedule;
using ioattn::Tiling;
namespace t = ioattn::test;

namespace {

const Tiling kBackwardMaterializedTiling = ioattn::Tiling{ioattn::Schedule::materialized, 4, 4};

} // namespace

TEMPLATE_TEST_CASE("backward_materialized: agreement on edge shapes",
                   "[dense][backward][materialized]",
                   float,
                   double) {
    t::backward_suite_edge_shapes<TestType>(Schedule::materialized);
}

TEMPLATE_TEST_CASE("backward_materialized: agreement on seeded random shapes",
                   "[dense][backward][materialized]",
                   float,
                   double) {
    t::backward_suite_random<TestType>(Schedule::materialized);
}

TEMPLATE_TEST_CASE("backward_materialized: error ratio on a long sequence",
                   "[dense][backward][materialized]",
                   float,
                   double) {
    t::backward_suite_error_ratio<TestType>(kBackwardMaterializedTiling);
}

TEST_CASE("backward_materialized: central finite differences in double",
          "[dense][backward][materialized][gradient]") {
    t::backward_suite_finite_differences(Schedule::materialized);
}

TEMPLATE_TEST_CASE("backward_materialized: bitwise equal for 1 and 2 threads",
                   "[dense][backward][materialized]",
                   float,
                   double) {
    t::backward_suite_determinism<TestType>(kBackwardMaterializedTiling);
}

TEMPLATE_TEST_CASE("backward_materialized: fully masked rows contribute exactly zero",
                   "[dense][backward][materialized][bad_values]",
                   float,
                   double) {
    t::backward_suite_fully_masked<TestType>(kBackwardMaterializedTiling);
}

TEMPLATE_TEST_CASE("backward_materialized: NaN in a causally hidden K/V row does not leak",
                   "[dense][backward][materialized][bad_values]",
                   float,
                   double) {
    t::backward_suite_nan_hidden_kv<TestType>(kBackwardMaterializedTiling);
}

TEMPLATE_TEST_CASE("backward_materialized: documented throws",
                   "[dense][backward][materialized][throws]",
                   float,
                   double) {
    t::backward_suite_throws<TestType>(Schedule::materialized);
}

TEMPLATE_TEST_CASE("backward_materialized: counted I/O equals io_cost_backward_materialized",
                   "[dense][backward][materialized][io]",
                   float,
                   double) {
    t::backward_suite_io_exact<TestType>(Schedule::materialized);
}

TEMPLATE_TEST_CASE("backward_materialized: counted I/O equals the closed form on edge shapes",
                   "[dense][backward][materialized][io]",
                   float,
                   double) {
    t::backward_suite_io_edge<TestType>(Schedule::materialized);
}

TEST_CASE("backward_materialized: for_memory tilings fit M, large dry runs match the closed form",
          "[dense][backward][materialized][io]") {
    t::backward_suite_io_for_memory(Schedule::materialized);
}

TEMPLATE_TEST_CASE("backward_materialized: the recorded trace adds up to the counts",
                   "[dense][backward][materialized][io]",
                   float,
                   double) {
    t::backward_suite_io_trace<TestType>(ioattn::Tiling{Schedule::materialized, 5, 5});
}
