// Tests of ioattn::sparse::backward_materialized: agreement with backward_reference on pattern
// families and shapes (n_q != n_k both ways, several tile sides), exact I/O (counted == cost ==
// dry run, reduction to the dense closed form, peak <= M), CapacityError one word short, zero
// gradient of empty rows, no NaN leak from keys nobody sees, and thread-count determinism.

#include "brute_force.hpp"
#include "kernel_case.hpp"

#include <ioattn/dense.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using ioattn::DryRunCounter;
using ioattn::IoCounter;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;
using ioattn::sparse::Support;
using ioattn::sparse::test::Case;
using ioattn::sparse::test::max_error;

namespace {

Problem shape(std::int64_t n_q, std::int64_t n_k, std::int64_t d) {
    return ioattn::sparse::test::backward_shape(n_q, n_k, d);
}

/// Runs the forward reference so that o and lse hold the forward's outputs.
template <typename T>
void forward(Case<T>& c, const Support& s) {
    ioattn::sparse::forward_reference(c.forward(), s);
}

template <typename T>
void run(Case<T>& c, const Support& s, std::int64_t b) {
    NullCounter io;
    ioattn::sparse::backward_materialized(
        c.backward(), s, Tiling{Schedule::materialized, b, b}, MemoryModel{1 << 20}, io);
}

} // namespace

TEMPLATE_TEST_CASE("sparse backward_materialized agrees with the reference",
                   "[sparse][backward]",
                   float,
                   double) {
    for (const std::string spec : {"dense",
                                   "causal",
                                   "window:2",
                                   "global:1+window:2",
                                   "bigbird:2:1:2",
                                   "random:0.3",
                                   "strided:3",
                                   "block:3:0.5"})
        for (const auto& [n_q, n_k] : std::vector<std::pair<int, int>>{{11, 11}, {7, 13}, {13, 6}})
            for (const std::int64_t b : {2, 3, 4, 16}) {
                CAPTURE(spec, n_q, n_k, b);
                const Problem p = shape(n_q, n_k, 6);
                const Support s = ioattn::sparse::parse_pattern(spec, n_q, n_k, 3);
                Case<TestType> c(p, 8);
                Case<double> ref(p, 8);
                std::copy(c.q.begin(), c.q.end(), ref.q.begin());
                std::copy(c.k.begin(), c.k.end(), ref.k.begin());
                std::copy(c.v.begin(), c.v.end(), ref.v.begin());
                std::copy(c.d_o.begin(), c.d_o.end(), ref.d_o.begin());
                forward(c, s);
                forward(ref, s);
                ioattn::sparse::backward_reference(ref.backward(), s);
                run(c, s, b);
                const double tol = std::is_same_v<TestType, float> ? 2e-5 : 1e-13;
                CHECK(max_error(c.d_q, ref.d_q) < tol);
                CHECK(max_error(c.d_k, ref.d_k) < tol);
                CHECK(max_error(c.d_v, ref.d_v) < tol);
            }
}

TEST_CASE("sparse backward_materialized: batches and a group of three query heads",
          "[sparse][backward]") {
    Problem p = shape(10, 14, 7);
    p.batch = 2;
    p.heads = 3;
    p.kv_heads = 1;
    p.d_v = 3;
    const Support s = ioattn::sparse::parse_pattern("bigbird:2:1:2", 10, 14, 5);
    Case<double> c(p, 9), ref(p, 9);
    forward(c, s);
    forward(ref, s);
    ioattn::sparse::backward_reference(ref.backward(), s);
    const Tiling t{Schedule::materialized, 3, 3};
    const MemoryModel m{t.resident_words(p, ioattn::Pass::backward)};
    IoCounter io(m.fast_words);
    ioattn::sparse::backward_materialized(c.backward(), s, t, m, io);
    CHECK(max_error(c.d_q, ref.d_q) < 1e-13);
    CHECK(max_error(c.d_k, ref.d_k) < 1e-13);
    CHECK(max_error(c.d_v, ref.d_v) < 1e-13);
    CHECK(io.report() == ioattn::sparse::io_cost_backward_materialized(p, s, t));
}

TEST_CASE("sparse backward_materialized: counted I/O equals the cost, the dry run, the dense form",
          "[sparse][backward][io]") {
    for (const std::string spec : {"dense", "causal", "window:3", "bigbird:2:1:2", "random:0.2"})
        for (const auto& [n_q, n_k] : std::vector<std::pair<int, int>>{{21, 17}, {9, 26}})
            for (const std::int64_t b : {2, 4, 5, 32}) {
                CAPTURE(spec, n_q, n_k, b);
                const Problem p = shape(n_q, n_k, 6);
                const Support s = ioattn::sparse::parse_pattern(spec, n_q, n_k, 2);
                const Tiling t{Schedule::materialized, b, b};
                Case<float> c(p, 1);
                forward(c, s);
                const MemoryModel m{t.resident_words(p, ioattn::Pass::backward)};
                IoCounter io(m.fast_words);
                ioattn::sparse::backward_materialized(c.backward(), s, t, m, io);
                const auto cost = ioattn::sparse::io_cost_backward_materialized(p, s, t);
                CHECK(io.report() == cost);
                CHECK(cost.peak <= m.fast_words);
                DryRunCounter dry(m.fast_words);
                ioattn::sparse::backward_materialized(c.backward(), s, t, m, dry);
                CHECK(dry.report() == cost);
                if (spec == "dense")
                    CHECK(cost == ioattn::io_cost_backward_materialized(p, t));
                const MemoryModel short_m{m.fast_words - 1};
                NullCounter none;
                CHECK_THROWS_AS(
                    ioattn::sparse::backward_materialized(c.backward(), s, t, short_m, none),
                    ioattn::CapacityError);
            }
}

TEST_CASE("sparse backward_materialized: P and dS traffic is Z_QK words per head",
          "[sparse][backward][io]") {
    // One tile covers everything: per head P and dS are written once (2 Z_QK) and dQ once.
    const Problem p = shape(6, 6, 3);
    const Support s = ioattn::sparse::parse_pattern("window:1", 6, 6, 1);
    const auto cost =
        ioattn::sparse::io_cost_backward_materialized(p, s, Tiling{Schedule::materialized, 8, 8});
    const std::int64_t kv_words = p.batch * p.kv_heads * p.n_k * (p.d + p.d_v);
    CHECK(cost.writes == p.batch_heads() * (2 * s.z_qk() + p.n_q * p.d) + kv_words);
}

TEST_CASE("sparse backward_materialized rejects bad tilings and shapes", "[sparse][backward]") {
    const Problem p = shape(7, 9, 4);
    const Support s = ioattn::sparse::parse_pattern("window:2", 7, 9, 1);
    Case<float> c(p, 1);
    NullCounter io;
    const MemoryModel m{1 << 20};
    CHECK_THROWS_AS(ioattn::sparse::backward_materialized(
                        c.backward(), s, Tiling{Schedule::fused, 4, 4}, m, io),
                    ioattn::InvalidArgument);
    CHECK_THROWS_AS(ioattn::sparse::backward_materialized(
                        c.backward(), s, Tiling{Schedule::materialized, 4, 3}, m, io),
                    ioattn::InvalidArgument);
    const Support wrong = ioattn::sparse::parse_pattern("window:2", 9, 9, 1);
    CHECK_THROWS_AS(ioattn::sparse::backward_materialized(
                        c.backward(), wrong, Tiling{Schedule::materialized, 4, 4}, m, io),
                    ioattn::InvalidArgument);
    CHECK_THROWS_AS(ioattn::sparse::io_cost_backward_materialized(
                        p, wrong, Tiling{Schedule::materialized, 4, 4}),
                    ioattn::InvalidArgument);
    CHECK_THROWS_AS(
        ioattn::sparse::io_cost_backward_materialized(p, s, Tiling{Schedule::fused, 4, 4}),
        ioattn::InvalidArgument);
}

TEST_CASE("sparse backward_materialized: empty rows give zero gradient, no NaN leak, "
          "thread-count invariant",
          "[sparse][backward][determinism]") {
    constexpr std::int64_t kHidden = 7; // a key no query may see
    const Problem p = shape(16, 12, 5);
    const Support s =
        ioattn::sparse::test::from_predicate(16, 12, [](std::int64_t i, std::int64_t j) {
            return i % 3 != 0 && (i + j) % 4 != 0 && j != kHidden;
        });
    Case<float> one(p, 3), two(p, 3);
    for (Case<float>* c : {&one, &two}) {
        for (std::int64_t g = 0; g < p.batch * p.kv_heads; ++g) {
            for (std::int64_t x = 0; x < p.d; ++x)
                c->k[static_cast<std::size_t>((g * p.n_k + kHidden) * p.d + x)] =
                    std::numeric_limits<float>::quiet_NaN();
            for (std::int64_t x = 0; x < p.d_v; ++x)
                c->v[static_cast<std::size_t>((g * p.n_k + kHidden) * p.d_v + x)] =
                    std::numeric_limits<float>::quiet_NaN();
        }
        forward(*c, s);
    }
    {
        tbb::global_control gc(tbb::global_control::max_allowed_parallelism, 1);
        run(one, s, 4);
    }
    {
        tbb::global_control gc(tbb::global_control::max_allowed_parallelism, 2);
        run(two, s, 4);
    }
    CHECK(one.d_q == two.d_q);
    CHECK(one.d_k == two.d_k);
    CHECK(one.d_v == two.d_v);
    for (std::int64_t sl = 0; sl < p.batch_heads(); ++sl)
        for (std::int64_t i = 0; i < 16; i += 3)
            for (std::int64_t x = 0; x < p.d; ++x)
                CHECK(one.d_q[static_cast<std::size_t>((sl * 16 + i) * p.d + x)] == 0.0F);
    for (const auto* grad : {&one.d_q, &one.d_k, &one.d_v})
        for (const float g : *grad)
            CHECK(std::isfinite(g));
    for (std::int64_t g = 0; g < p.batch * p.kv_heads; ++g)
        for (std::int64_t x = 0; x < p.d; ++x)
            CHECK(one.d_k[static_cast<std::size_t>((g * p.n_k + kHidden) * p.d + x)] == 0.0F);
}

TEST_CASE("sparse backward_materialized: no allowed pair gives zero gradients",
          "[sparse][backward]") {
    const Problem p = shape(5, 8, 3);
    const Support s = Support::none(5, 8);
    Case<double> c(p, 4);
    forward(c, s);
    std::fill(c.d_q.begin(), c.d_q.end(), 1.0);
    std::fill(c.d_k.begin(), c.d_k.end(), 1.0);
    std::fill(c.d_v.begin(), c.d_v.end(), 1.0);
    run(c, s, 2);
    for (const auto* grad : {&c.d_q, &c.d_k, &c.d_v})
        for (const double g : *grad)
            CHECK(g == 0.0);
}
