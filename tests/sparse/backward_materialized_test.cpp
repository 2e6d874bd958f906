// Tests of ioattn::sparse::backward_materialized: agreement with backward_reference on pattern
// families and shapes (n_q != n_k both ways, several tile sides), exact I/O (counted == cost ==
// dry run, reduction to the dense closed form, peak <= M), CapacityError one word short, zero
// gradient of empty rows, no NaN leak from keys nobody sees, and thread-count determinism.

#include "kernel_case.hpp"

#include <ioattn/dense.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

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
using ioattn::sparse::test::backward_shape;
using ioattn::sparse::test::Case;
using ioattn::sparse::test::max_error;
using ioattn::sparse::test::run_forward_reference;

namespace {

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
    for (const std::string& spec : ioattn::sparse::test::kBackwardPatterns)
        for (const auto& [n_q, n_k] : ioattn::sparse::test::kBackwardSizes)
            for (const std::int64_t b : {2, 3, 4, 16}) {
                CAPTURE(spec, n_q, n_k, b);
                const Problem p = backward_shape(n_q, n_k, 6);
                const Support s = ioattn::sparse::parse_pattern(spec, n_q, n_k, 3);
                ioattn::sparse::test::check_backward_agrees<TestType>(
                    p, s, 8, [b](Case<TestType>& c, const Support& support) {
                        run(c, support, b);
                    });
            }
}

TEST_CASE("sparse backward_materialized: batches and a group of three query heads",
          "[sparse][backward]") {
    Problem p = backward_shape(10, 14, 7);
    p.batch = 2;
    p.heads = 3;
    p.kv_heads = 1;
    p.d_v = 3;
    const Support s = ioattn::sparse::parse_pattern("bigbird:2:1:2", 10, 14, 5);
    Case<double> c(p, 9), ref(p, 9);
    run_forward_reference(c, s);
    run_forward_reference(ref, s);
    ioattn::sparse::backward_reference(ref.backward(), s);
    const Tiling t{Schedule::materialized, 3, 3};
    const MemoryModel m{t.resident_words(p, ioattn::Pass::backward, ioattn::Kernels::sparse)};
    IoCounter io(m.fast_words);
    ioattn::sparse::backward_materialized(c.backward(), s, t, m, io);
    CHECK(max_error(c.d_q, ref.d_q) < 1e-13);
    CHECK(max_error(c.d_k, ref.d_k) < 1e-13);
    CHECK(max_error(c.d_v, ref.d_v) < 1e-13);
    // in double an index read is one word (the overload without inputs counts float's two)
    CHECK(io.report() == ioattn::sparse::io_cost_backward_materialized(
                             p, s, ioattn::sparse::SparseInputs<double>{}, t));
    CHECK(io.report().reads < ioattn::sparse::io_cost_backward_materialized(p, s, t).reads);
}

TEST_CASE("sparse backward_materialized: counted I/O equals the cost, the dry run, the dense form",
          "[sparse][backward][io]") {
    for (const std::string spec : {"dense", "causal", "window:3", "bigbird:2:1:2", "random:0.2"})
        for (const auto& [n_q, n_k] : std::vector<std::pair<int, int>>{{21, 17}, {9, 26}})
            for (const std::int64_t b : {2, 4, 5, 32}) {
                CAPTURE(spec, n_q, n_k, b);
                const Problem p = backward_shape(n_q, n_k, 6);
                const Support s = ioattn::sparse::parse_pattern(spec, n_q, n_k, 2);
                const Tiling t{Schedule::materialized, b, b};
                Case<float> c(p, 1);
                run_forward_reference(c, s);
                const MemoryModel m{
                    t.resident_words(p, ioattn::Pass::backward, ioattn::Kernels::sparse)};
                IoCounter io(m.fast_words);
                ioattn::sparse::backward_materialized(c.backward(), s, t, m, io);
                const auto cost = ioattn::sparse::io_cost_backward_materialized(p, s, t);
                CHECK(io.report() == cost);
                CHECK(cost.peak <= m.fast_words);
                DryRunCounter dry(m.fast_words);
                ioattn::sparse::backward_materialized(c.backward(), s, t, m, dry);
                CHECK(dry.report() == cost);
                if (spec == "dense") {
                    // the dense kernel's words, plus the index reads: keys in P, dS and each d
                    // chunk of dQ, Omega^T's queries and positions in each chunk of dV and dK
                    // (full tiles: no per-pair SDDMM), two float words per int64; less Q_i
                    // re-read per tile of P when d <= b and dO_i per tile of dS when d_v <= b
                    // (kept over the row tile: every row tile sees all T key tiles)
                    const auto dense = ioattn::io_cost_backward_materialized(p, t);
                    const Problem q = p.resolved("test");
                    const std::int64_t dch = (q.d + b - 1) / b, vch = (q.d_v + b - 1) / b;
                    const std::int64_t index = 2 * (2 + dch + 2 * (vch + dch)) * s.z_qk();
                    const std::int64_t tiles = (n_k + b - 1) / b;
                    const bool q_held = q.d <= b, d_o_held = q.d_v <= b;
                    const std::int64_t kept = (q_held ? (tiles - 1) * n_q * q.d : 0) +
                                              (d_o_held ? tiles * n_q * q.d_v : 0);
                    CHECK(cost.reads == dense.reads + (index - kept) * q.batch_heads());
                    CHECK(cost.writes == dense.writes);
                    // dO_i kept beside dS's two tiles
                    CHECK(cost.peak == (d_o_held ? t.resident_words(p,
                                                                    ioattn::Pass::backward,
                                                                    ioattn::Kernels::sparse)
                                                 : dense.peak));
                }
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
    const Problem p = backward_shape(6, 6, 3);
    const Support s = ioattn::sparse::parse_pattern("window:1", 6, 6, 1);
    const auto cost =
        ioattn::sparse::io_cost_backward_materialized(p, s, Tiling{Schedule::materialized, 8, 8});
    const std::int64_t kv_words = p.batch * p.kv_heads * p.n_k * (p.d + p.d_v);
    CHECK(cost.writes == p.batch_heads() * (2 * s.z_qk() + p.n_q * p.d) + kv_words);
}

TEST_CASE("sparse backward_materialized rejects bad tilings and shapes", "[sparse][backward]") {
    const Problem p = backward_shape(7, 9, 4);
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
    ioattn::sparse::test::check_empty_rows_and_hidden_key(
        [](Case<float>& c, const Support& s) { run(c, s, 4); });
}

TEST_CASE("sparse backward_materialized: no allowed pair gives zero gradients",
          "[sparse][backward]") {
    const Problem p = backward_shape(5, 8, 3);
    const Support s = Support::none(5, 8);
    Case<double> c(p, 4);
    run_forward_reference(c, s);
    std::fill(c.d_q.begin(), c.d_q.end(), 1.0);
    std::fill(c.d_k.begin(), c.d_k.end(), 1.0);
    std::fill(c.d_v.begin(), c.d_v.end(), 1.0);
    run(c, s, 2);
    for (const auto* grad : {&c.d_q, &c.d_k, &c.d_v})
        for (const double g : *grad)
            CHECK(g == 0.0);
}
