// Tests of ioattn::sparse::union_of / intersection_of (sparse/src/patterns/set_ops.cpp):
// brute-force membership and the lattice laws.

#include "brute_force.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

using ioattn::sparse::intersection_of;
using ioattn::sparse::Support;
using ioattn::sparse::union_of;

TEST_CASE("union_of / intersection_of: membership and laws", "[set_ops]") {
    for (const auto& [n_q, n_k] : ioattn::sparse::test::small_shapes()) {
        CAPTURE(n_q, n_k);
        const Support a = ioattn::sparse::pattern_random(n_q, n_k, 0.4, 1);
        const Support b = ioattn::sparse::pattern_window(n_q, n_k, 1);
        const Support c = ioattn::sparse::pattern_causal(n_q, n_k);
        const Support none = Support::none(n_q, n_k);
        const Support all = ioattn::sparse::pattern_dense(n_q, n_k);
        const Support u = union_of(a, b);
        const Support x = intersection_of(a, b);
        CHECK(u == ioattn::sparse::test::from_predicate(n_q, n_k, [&](auto i, auto j) {
                  return a.contains(i, j) || b.contains(i, j);
              }));
        CHECK(x == ioattn::sparse::test::from_predicate(n_q, n_k, [&](auto i, auto j) {
                  return a.contains(i, j) && b.contains(i, j);
              }));
        // commutative, associative, idempotent, absorbing, distributive, identities
        CHECK(union_of(b, a) == u);
        CHECK(intersection_of(b, a) == x);
        CHECK(union_of(union_of(a, b), c) == union_of(a, union_of(b, c)));
        CHECK(intersection_of(intersection_of(a, b), c) ==
              intersection_of(a, intersection_of(b, c)));
        CHECK(union_of(a, a) == a);
        CHECK(intersection_of(a, a) == a);
        CHECK(union_of(a, intersection_of(a, b)) == a);
        CHECK(intersection_of(a, union_of(a, b)) == a);
        CHECK(intersection_of(a, union_of(b, c)) ==
              union_of(intersection_of(a, b), intersection_of(a, c)));
        CHECK(union_of(a, none) == a);
        CHECK(intersection_of(a, all) == a);
        CHECK(intersection_of(a, none) == none);
        CHECK(union_of(a, all) == all);
        CHECK(u.z_qk() + x.z_qk() == a.z_qk() + b.z_qk());
    }
}

TEST_CASE("union_of / intersection_of: shape mismatch throws", "[set_ops][throws]") {
    const Support a = Support::none(3, 4);
    const Support b = Support::none(4, 3);
    CHECK_THROWS_WITH(union_of(a, b), Catch::Contains("union_of") && Catch::Contains("3 x 4"));
    CHECK_THROWS_AS(intersection_of(a, b), ioattn::InvalidArgument);
}
