// Tests of ioattn::dense::backward_fused: agreement with the naive backward of tests/support on
// edge and random shapes (kind 1), the error ratio (2), counted I/O == io_cost_backward_fused
// with DryRunCounter and CapacityError (3), central finite differences (4), determinism across
// thread counts (5), documented throws (6), and fully masked rows and hidden NaN.

#include "backward_suite.hpp"

#include <catch2/catch.hpp>

using ioattn::Schedule;
using ioattn::Tiling;
namespace t = ioattn::test;

namespace {

const Tiling kBackwardFusedTiling = ioattn::Tiling{ioattn::Schedule::fused, 8, 4};

} // namespace

TEMPLATE_TEST_CASE("backward_fused: agreement on edge shapes",
                   "[dense][backward][fused]",
                   float,
                   double) {
    t::backward_suite_edge_shapes<TestType>(Schedule::fused);
}

TEMPLATE_TEST_CASE("backward_fused: agreement on seeded random shapes",
                   "[dense][backward][fused]",
                   float,
                   double) {
    t::backward_suite_random<TestType>(Schedule::fused);
}

TEMPLATE_TEST_CASE("backward_fused: error ratio on a long sequence",
                   "[dense][backward][fused]",
                   float,
                   double) {
    t::backward_suite_error_ratio<TestType>(kBackwardFusedTiling);
}

TEST_CASE("backward_fused: central finite differences in double",
          "[dense][backward][fused][gradient]") {
    t::backward_suite_finite_differences(Schedule::fused);
}

TEMPLATE_TEST_CASE("backward_fused: bitwise equal for 1 and 2 threads",
                   "[dense][backward][fused]",
                   float,
                   double) {
    t::backward_suite_determinism<TestType>(kBackwardFusedTiling);
}

TEMPLATE_TEST_CASE("backward_fused: fully masked rows contribute exactly zero",
                   "[dense][backward][fused][bad_values]",
                   float,
                   double) {
    t::backward_suite_fully_masked<TestType>(kBackwardFusedTiling);
}

TEMPLATE_TEST_CASE("backward_fused: NaN in a causally hidden K/V row does not leak",
                   "[dense][backward][fused][bad_values]",
                   float,
                   double) {
    t::backward_suite_nan_hidden_kv<TestType>(kBackwardFusedTiling);
}

TEMPLATE_TEST_CASE("backward_fused: documented throws",
                   "[dense][backward][fused][throws]",
                   float,
                   double) {
    t::backward_suite_throws<TestType>(Schedule::fused);
}

TEMPLATE_TEST_CASE("backward_fused: counted I/O equals io_cost_backward_fused",
                   "[dense][backward][fused][io]",
                   float,
                   double) {
    t::backward_suite_io_exact<TestType>(Schedule::fused);
}

TEMPLATE_TEST_CASE("backward_fused: counted I/O equals the closed form on edge shapes",
                   "[dense][backward][fused][io]",
                   float,
                   double) {
    t::backward_suite_io_edge<TestType>(Schedule::fused);
}

TEST_CASE("backward_fused: for_memory tilings fit M, large dry runs match the closed form",
          "[dense][backward][fused][io]") {
    t::backward_suite_io_for_memory(Schedule::fused);
}

TEMPLATE_TEST_CASE("backward_fused: the recorded trace adds up to the counts",
                   "[dense][backward][fused][io]",
                   float,
                   double) {
    t::backward_suite_io_trace<TestType>(ioattn::Tiling{Schedule::fused, 7, 5});
}
