// Tests of the sparse backward kernels (backward_reference, backward_fused): agreement with the
// reference on pattern families, the reference against the dense reference and against central
// finite differences (independent of any backward code), exact I/O (counted == cost == dry run,
// reduction to the dense closed form), zero gradient of empty rows, and determinism.

#include "brute_force.hpp"
#include "kernel_case.hpp"

#include <ioattn/dense.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>

#include <limits>
#include <string>
#include <vector>

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

} // namespace

TEMPLATE_TEST_CASE("sparse backward_fused agrees with the reference",
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
        for (const auto& [n_q, n_k] :
             std::vector<std::pair<int, int>>{{11, 11}, {7, 13}, {13, 6}}) {
            CAPTURE(spec, n_q, n_k);
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
            NullCounter io;
            ioattn::sparse::backward_fused(
                c.backward(), s, Tiling{Schedule::fused, 4, 3}, MemoryModel{1 << 20}, io);
            const double tol = std::is_same_v<TestType, float> ? 2e-5 : 1e-13;
            CHECK(max_error(c.d_q, ref.d_q) < tol);
            CHECK(max_error(c.d_k, ref.d_k) < tol);
            CHECK(max_error(c.d_v, ref.d_v) < tol);
        }
}

TEST_CASE("sparse backward reference equals the dense one on dense and causal patterns",
          "[sparse][backward]") {
    for (const bool causal : {false, true}) {
        const Problem p = shape(9, 12, 4);
        const Support s = ioattn::sparse::parse_pattern(causal ? "causal" : "dense", 9, 12, 1);
        Case<double> a(p, 2), b(p, 2);
        forward(a, s);
        ioattn::sparse::backward_reference(a.backward(), s);
        auto fa = b.forward();
        fa.problem.causal = causal;
        ioattn::dense::forward_reference(fa);
        auto ba = b.backward();
        ba.problem.causal = causal;
        ioattn::dense::backward_reference(ba);
        CHECK(max_error(a.d_q, b.d_q) < 1e-13);
        CHECK(max_error(a.d_k, b.d_k) < 1e-13);
        CHECK(max_error(a.d_v, b.d_v) < 1e-13);
    }
}

TEST_CASE("sparse backward reference matches central finite differences", "[sparse][backward]") {
    Problem p = shape(5, 6, 3);
    p.heads = 2;
    p.kv_heads = 1;
    const Support s = ioattn::sparse::parse_pattern("random:0.6", 5, 6, 4);
    Case<double> c(p, 6);
    forward(c, s);
    ioattn::sparse::backward_reference(c.backward(), s);
    // f = sum(dO o O): its gradient is what the backward computes.
    const auto f = [&](Case<double>& x) {
        forward(x, s);
        double acc = 0;
        for (std::size_t i = 0; i < x.o.size(); ++i)
            acc += x.d_o[i] * x.o[i];
        return acc;
    };
    const double h = 1e-6;
    const auto check = [&](std::vector<double> Case<double>::*field,
                           std::vector<double> Case<double>::*grad) {
        for (std::size_t i = 0; i < (c.*field).size(); ++i) {
            Case<double> up(p, 6), down(p, 6);
            (up.*field)[i] += h;
            (down.*field)[i] -= h;
            const double numeric = (f(up) - f(down)) / (2 * h);
            CHECK((c.*grad)[i] == Approx(numeric).margin(1e-7));
        }
    };
    check(&Case<double>::q, &Case<double>::d_q);
    check(&Case<double>::k, &Case<double>::d_k);
    check(&Case<double>::v, &Case<double>::d_v);
}

TEST_CASE("sparse backward counted I/O equals the cost, the dry run, and the dense form",
          "[sparse][backward][io]") {
    for (const std::string spec : {"dense", "causal", "window:3", "bigbird:2:1:2", "random:0.2"})
        for (const auto& t : {Tiling{Schedule::fused, 4, 3}, Tiling{Schedule::fused, 8, 16}}) {
            CAPTURE(spec, t.rows, t.cols);
            const Problem p = shape(21, 17, 6);
            const Support s = ioattn::sparse::parse_pattern(spec, 21, 17, 2);
            Case<float> c(p, 1);
            forward(c, s);
            const MemoryModel m{t.resident_words(p, ioattn::Pass::backward)};
            IoCounter io(m.fast_words);
            ioattn::sparse::backward_fused(c.backward(), s, t, m, io);
            const auto cost = ioattn::sparse::io_cost_backward_fused(p, s, t);
            CHECK(io.report() == cost);
            CHECK(ioattn::sparse::dry_run_backward(p, s, t, m) == cost);
            if (spec == "dense" || spec == "causal") {
                Problem dense = p;
                dense.causal = spec == "causal";
                CHECK(cost == ioattn::io_cost_backward_fused(dense, t));
            }
        }
}

TEST_CASE("sparse backward: empty rows contribute zero, no NaN leak, results thread-count "
          "invariant",
          "[sparse][backward][determinism]") {
    constexpr std::int64_t kHidden = 7; // a key no query may see: NaN in its K and V rows
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
        NullCounter io;
        ioattn::sparse::backward_fused(
            one.backward(), s, Tiling{Schedule::fused, 4, 4}, MemoryModel{1 << 20}, io);
    }
    {
        tbb::global_control gc(tbb::global_control::max_allowed_parallelism, 2);
        NullCounter io;
        ioattn::sparse::backward_fused(
            two.backward(), s, Tiling{Schedule::fused, 4, 4}, MemoryModel{1 << 20}, io);
    }
    CHECK(one.d_q == two.d_q);
    CHECK(one.d_k == two.d_k);
    CHECK(one.d_v == two.d_v);
    for (std::int64_t sl = 0; sl < p.batch_heads(); ++sl)
        for (std::int64_t i = 0; i < 16; i += 3)
            for (std::int64_t x = 0; x < p.d; ++x) {
                const float g = one.d_q[static_cast<std::size_t>((sl * 16 + i) * p.d + x)];
                CHECK(g == 0.0F);
            }
    for (const auto* grad : {&one.d_q, &one.d_k, &one.d_v})
        for (const float g : *grad)
            CHECK(std::isfinite(g));
    for (std::int64_t g = 0; g < p.batch * p.kv_heads; ++g)
        for (std::int64_t x = 0; x < p.d; ++x)
            CHECK(one.d_k[static_cast<std::size_t>((g * p.n_k + kHidden) * p.d + x)] == 0.0F);
}
