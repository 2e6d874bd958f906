// Tests of ioattn::dense::backward_reference, the gradient oracle: agreement with the naive
// backward of tests/support on edge and random shapes (kind 1), the error ratio (2), central
// finite differences (4), determinism across thread counts (5), documented throws (6), and fully
// masked rows and hidden NaN.

#include "backward_suite.hpp"

#include <catch2/catch.hpp>

using ioattn::Schedule;
using ioattn::Tiling;
namespace t = ioattn::test;

namespace {

const Tiling kTiling = ioattn::Tiling{ioattn::Schedule::reference, 1, 1};

} // namespace

TEMPLATE_TEST_CASE("backward_reference: agreement on edge shapes",
                   "[dense][backward][reference]",
                   float,
                   double) {
    t::backward_suite_edge_shapes<TestType>(Schedule::reference);
}

TEMPLATE_TEST_CASE("backward_reference: agreement on seeded random shapes",
                   "[dense][backward][reference]",
                   float,
                   double) {
    t::backward_suite_random<TestType>(Schedule::reference);
}

TEMPLATE_TEST_CASE("backward_reference: error ratio on a long sequence",
                   "[dense][backward][reference]",
                   float,
                   double) {
    t::backward_suite_error_ratio<TestType>(kTiling);
}

TEST_CASE("backward_reference: central finite differences in double",
          "[dense][backward][reference][gradient]") {
    t::backward_suite_finite_differences(Schedule::reference);
}

TEMPLATE_TEST_CASE("backward_reference: bitwise equal for 1 and 2 threads",
                   "[dense][backward][reference]",
                   float,
                   double) {
    t::backward_suite_determinism<TestType>(kTiling);
}

TEMPLATE_TEST_CASE("backward_reference: fully masked rows contribute exactly zero",
                   "[dense][backward][reference][bad_values]",
                   float,
                   double) {
    t::backward_suite_fully_masked<TestType>(kTiling);
}

TEMPLATE_TEST_CASE("backward_reference: NaN in a causally hidden K/V row does not leak",
                   "[dense][backward][reference][bad_values]",
                   float,
                   double) {
    t::backward_suite_nan_hidden_kv<TestType>(kTiling);
}

TEMPLATE_TEST_CASE("backward_reference: documented throws",
                   "[dense][backward][reference][throws]",
                   float,
                   double) {
    t::backward_suite_throws<TestType>(Schedule::reference);
}
