// Tests of the element kernels (forward_element, backward_element): agreement with the
// references on every pattern family and edge shapes (empty rows, a row seeing one key, a key
// seen by no row with NaN in its rows, n_q != n_k, d not a multiple of the vector width), the
// error rule in float, central finite differences on a tiny case, exact I/O (counted ==
// closed form == dry run, peak <= M, CapacityError one word short), determinism across thread
// counts, panel sizes that cut rows and the rows batched beside a short one, and the documented
// throws.

#include "brute_force.hpp"
#include "kernel_case.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/element.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>

#include <limits>
#include <string>
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
using ioattn::sparse::test::kAmple;
using ioattn::sparse::test::max_error;

namespace {

namespace sp = ioattn::sparse;

const std::vector<std::string> kElementPatterns = {"dense",
                                                   "causal",
                                                   "window:3",
                                                   "dilated:2:3",
                                                   "global:2+window:1",
                                                   "bigbird:2:1:2",
                                                   "bigbird-block:2:3:2:1",
                                                   "strided:4",
                                                   "block:3:0.4",
                                                   "random:0.2",
                                                   "powerlaw:3"};

/// A row that sees nothing, a row that sees one key, a key no row sees (13 x 11).
Support edge_support() {
    return sp::test::from_predicate(13, 11, [](std::int64_t i, std::int64_t j) {
        if (i == 2)
            return false;
        if (i == 5)
            return j == 4;
        return j != 7 && (i * 3 + j) % 4 != 0;
    });
}

template <typename T>
void run_forward(Case<T>& c, const Support& s, const Tiling& t) {
    NullCounter io;
    sp::forward_element(c.forward(), s, t, kAmple, io);
}

template <typename T>
void check_forward(const Problem& p, const Support& s, const Tiling& t) {
    Case<T> c(p, 3), ref(p, 3);
    const Case<double> oracle = sp::test::reference_of(p, ref, s);
    run_forward(c, s, t);
    const double err = max_error(c.o, oracle.o);
    const double naive = max_error(sp::test::naive_output(ref, s), oracle.o);
    CHECK(err <= 2 * naive + 8 * static_cast<double>(std::numeric_limits<T>::epsilon()));
    sp::test::check_lse(c.lse, oracle.lse);
}

/// f(p, support, tiling) on 150 x 120 problems whose rows (and keys) see a few pairs each:
/// blocks of up to 96 rows fill the batches of short runs (kLanes rows of one run length) and
/// leave partial ones; global rows and keys and panels that cut runs mix long and short runs.
template <typename F>
void for_each_short_run_case(const F& f) {
    for (const char* spec : {"random:0.04", "global:3+random:0.03", "window:1"})
        for (const std::int64_t d : {7, 64})
            for (const Tiling t : {Tiling{Schedule::fused, 96, 512},
                                   Tiling{Schedule::fused, 64, 16},
                                   Tiling{Schedule::fused, 48, 5}}) {
                CAPTURE(spec, d, t.rows, t.cols);
                f(sp::test::kernel_shape(1, 150, 120, d), sp::parse_pattern(spec, 150, 120, 5), t);
            }
}

} // namespace

TEMPLATE_TEST_CASE("forward_element agrees with the reference on every pattern family",
                   "[sparse][element]",
                   float,
                   double) {
    for (const auto& [n_q, n_k] : std::vector<std::pair<int, int>>{{13, 13}, {9, 17}, {17, 9}})
        for (const std::int64_t d : {1, 7, 19})
            for (const std::string& spec : kElementPatterns)
                for (const Tiling t :
                     {Tiling{Schedule::fused, 4, 3}, Tiling{Schedule::fused, 64, 512}}) {
                    CAPTURE(spec, n_q, n_k, d, t.rows, t.cols);
                    const Problem p = sp::test::kernel_shape(1, n_q, n_k, d);
                    check_forward<TestType>(p, sp::parse_pattern(spec, n_q, n_k, 11), t);
                }
    CAPTURE("edge support");
    check_forward<TestType>(
        sp::test::kernel_shape(2, 13, 11, 9), edge_support(), {Schedule::fused, 3, 2});
}

TEMPLATE_TEST_CASE("forward_element: rows of a few keys, batched by run length",
                   "[sparse][element]",
                   float,
                   double) {
    for_each_short_run_case([](const Problem& p, const Support& s, const Tiling& t) {
        check_forward<TestType>(p, s, t);
    });
}

TEST_CASE("forward_element: a key no row may see never reaches an output", "[sparse][element]") {
    const Problem p = sp::test::kernel_shape(1, 13, 11, 5);
    const Support s = edge_support();
    Case<float> c(p, 4), ref(p, 4);
    for (auto* x : {&c, &ref})
        for (std::int64_t g = 0; g < p.kv_heads; ++g) {
            for (std::int64_t z = 0; z < p.d; ++z)
                x->k[static_cast<std::size_t>((g * p.n_k + 7) * p.d + z)] =
                    std::numeric_limits<float>::quiet_NaN();
            for (std::int64_t z = 0; z < p.d_v; ++z)
                x->v[static_cast<std::size_t>((g * p.n_k + 7) * p.d_v + z)] =
                    std::numeric_limits<float>::infinity();
        }
    run_forward(c, s, {Schedule::fused, 4, 4});
    sp::forward_reference(ref.forward(), s);
    for (const float x : c.o)
        CHECK(std::isfinite(x));
    CHECK(max_error(c.o, ref.o) < 1e-5);
    for (std::int64_t sl = 0; sl < p.batch_heads(); ++sl) { // the empty row
        CHECK(c.lse[static_cast<std::size_t>(sl * 13 + 2)] ==
              -std::numeric_limits<float>::infinity());
        for (std::int64_t z = 0; z < p.d_v; ++z)
            CHECK(c.o[static_cast<std::size_t>((sl * 13 + 2) * p.d_v + z)] == 0.0F);
    }
}

TEMPLATE_TEST_CASE("backward_element agrees with the reference",
                   "[sparse][element][backward]",
                   float,
                   double) {
    for (const std::string& spec : kElementPatterns)
        for (const auto& [n_q, n_k] : sp::test::kBackwardSizes)
            for (const Tiling t :
                 {Tiling{Schedule::fused, 4, 3}, Tiling{Schedule::fused, 32, 256}}) {
                CAPTURE(spec, n_q, n_k, t.rows, t.cols);
                const Problem p = sp::test::backward_shape(n_q, n_k, 6);
                const Support s = sp::parse_pattern(spec, n_q, n_k, 3);
                sp::test::check_backward_agrees<TestType>(
                    p, s, 8, [&](Case<TestType>& c, const Support& support) {
                        NullCounter io;
                        sp::backward_element(c.backward(), support, t, kAmple, io);
                    });
            }
}

TEMPLATE_TEST_CASE("backward_element: rows and keys of a few pairs, batched by run length",
                   "[sparse][element][backward]",
                   float,
                   double) {
    // in both sweeps: rows over their keys, keys over their queries
    for_each_short_run_case([](const Problem& p, const Support& s, const Tiling& t) {
        sp::test::check_backward_agrees<TestType>(
            p, s, 4, [&](Case<TestType>& c, const Support& support) {
                NullCounter io;
                sp::backward_element(c.backward(), support, t, kAmple, io);
            });
    });
}

TEST_CASE("backward_element: a row's dQ does not depend on the rows batched beside it",
          "[sparse][element][backward][determinism]") {
    // Every row sees 1-4 keys, so sweep Q batches them 16 to a vector; dropping every third
    // row changes every batch's members and lengths, never a kept row's pairs, L, D or dQ.
    const std::int64_t n = 120;
    const auto sees = [](std::int64_t i, std::int64_t j) { // 1 + i % 4 keys: 5 i + 31 t mod n
        for (std::int64_t t = 0; t <= i % 4; ++t)
            if (j == (5 * i + 31 * t) % n)
                return true;
        return false;
    };
    const Support all = sp::test::from_predicate(n, n, sees);
    const Support kept = sp::test::from_predicate(
        n, n, [&](std::int64_t i, std::int64_t j) { return i % 3 != 1 && sees(i, j); });
    const Problem p = sp::test::backward_shape(n, n, 64);
    Case<float> a(p, 9), b(p, 9);
    sp::test::run_forward_reference(a, all);
    sp::test::run_forward_reference(b, kept);
    for (auto [c, s] : {std::pair{&a, &all}, std::pair{&b, &kept}}) {
        NullCounter io;
        sp::backward_element(c->backward(), *s, Tiling{Schedule::fused, 96, 512}, kAmple, io);
    }
    std::int64_t compared = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        if (i % 3 == 1)
            continue;
        CAPTURE(i);
        REQUIRE(all.row(i).size() == static_cast<std::size_t>(1 + i % 4));
        for (std::int64_t z = 0; z < p.d; ++z)
            CHECK(a.d_q[static_cast<std::size_t>(i * p.d + z)] ==
                  b.d_q[static_cast<std::size_t>(i * p.d + z)]);
        ++compared;
    }
    CHECK(compared == 80);
}

TEST_CASE("backward_element matches central finite differences", "[sparse][element][backward]") {
    Problem p = sp::test::backward_shape(5, 6, 3);
    p.heads = 2;
    p.kv_heads = 1;
    const Support s = sp::parse_pattern("random:0.5", 5, 6, 4);
    Case<double> c(p, 6);
    sp::test::run_forward_reference(c, s);
    NullCounter io;
    sp::backward_element(c.backward(), s, Tiling{Schedule::fused, 2, 3}, kAmple, io);
    const auto f = [&](Case<double>& x) { // sum(dO o O), whose gradient the backward computes
        NullCounter none;
        sp::forward_element(x.forward(), s, Tiling{Schedule::fused, 2, 3}, kAmple, none);
        double acc = 0;
        for (std::size_t i = 0; i < x.o.size(); ++i)
            acc += x.d_o[i] * x.o[i];
        return acc;
    };
    const double h = 1e-6;
    for (auto [field, grad] : {std::pair{&Case<double>::q, &Case<double>::d_q},
                               std::pair{&Case<double>::k, &Case<double>::d_k},
                               std::pair{&Case<double>::v, &Case<double>::d_v}})
        for (std::size_t i = 0; i < (c.*field).size(); ++i) {
            Case<double> up(p, 6), down(p, 6);
            (up.*field)[i] += h;
            (down.*field)[i] -= h;
            CHECK((c.*grad)[i] == Approx((f(up) - f(down)) / (2 * h)).margin(1e-7));
        }
}

TEST_CASE("backward_element: empty rows, a hidden key, thread-count invariance",
          "[sparse][element][determinism]") {
    sp::test::check_empty_rows_and_hidden_key([](Case<float>& c, const Support& s) {
        NullCounter io;
        sp::backward_element(c.backward(), s, Tiling{Schedule::fused, 3, 5}, kAmple, io);
    });
}

TEST_CASE("element kernels: counted I/O equals the closed form and the dry run; peak fits M",
          "[sparse][element][io]") {
    for (const std::string spec :
         {"dense", "window:3", "bigbird:2:1:2", "random:0.2", "powerlaw:4"})
        for (const Tiling t : {Tiling{Schedule::fused, 4, 3}, Tiling{Schedule::fused, 8, 16}}) {
            CAPTURE(spec, t.rows, t.cols);
            const Problem p = sp::test::kernel_shape(2, 21, 17, 6);
            const Support s = sp::parse_pattern(spec, 21, 17, 2);
            const auto fwd = sp::io_cost_forward_element<float>(p, s, t);
            const auto bwd = sp::io_cost_backward_element<float>(p, s, t);
            Case<float> c(p, 1);
            IoCounter io(fwd.peak);
            sp::forward_element(c.forward(), s, t, MemoryModel{fwd.peak}, io);
            CHECK(io.report() == fwd);
            DryRunCounter dry(fwd.peak);
            const auto shape = ioattn::ForwardArgs<float>::shape_only(p);
            sp::forward_element(shape, s, t, MemoryModel{fwd.peak}, dry);
            CHECK(dry.report() == fwd);
            CHECK_THROWS_AS(sp::forward_element(c.forward(), s, t, MemoryModel{fwd.peak - 1}, io),
                            ioattn::CapacityError);
            IoCounter ib(bwd.peak);
            sp::backward_element(c.backward(), s, t, MemoryModel{bwd.peak}, ib);
            CHECK(ib.report() == bwd);
            CHECK_THROWS_AS(sp::backward_element(c.backward(), s, t, MemoryModel{bwd.peak - 1}, ib),
                            ioattn::CapacityError);
            // double rows pad to 8 words, floats to 16: the residency is counted per word type;
            // an index is 2 float words or 1 double word, so the difference is the indices
            const auto dbl = sp::io_cost_forward_element<double>(p, s, t);
            const std::int64_t indices = fwd.reads - dbl.reads;
            CHECK(indices >= p.batch_heads() * s.z_qk()); // every pair's index at least once
            CHECK(dbl.peak <= fwd.peak);
            if (spec == "dense") { // blocks of R rows, each reading every K and V row once
                const std::int64_t blocks = (p.n_q + t.rows - 1) / t.rows;
                const std::int64_t panels = (p.n_k + t.cols - 1) / t.cols;
                // each row walks its n_k indices and, in every panel but the last, the one
                // that ends its run there
                CHECK(indices == p.batch_heads() * p.n_q * (p.n_k + panels - 1));
                CHECK(fwd.reads ==
                      p.batch_heads() * (p.n_q * p.d + blocks * p.n_k * (p.d + p.d_v)) +
                          2 * indices);
                CHECK(fwd.writes == p.batch_heads() * p.n_q * (p.d_v + 1));
            }
        }
}

TEST_CASE("element plan: a light block visits adjacent panels at once, a full one does not",
          "[sparse][element][io]") {
    // row 0 sees every key (its own block, both 4-key panels full: the cap is 4 keys); rows
    // 4..7 see keys 0 and 7, one per panel: their blocks visit both panels at once
    const Support s = sp::test::from_predicate(8, 8, [](std::int64_t i, std::int64_t j) {
        return i == 0 || (i >= 4 && (j == 0 || j == 7));
    });
    const Tiling t{Schedule::fused, 4, 4};
    const Problem p = sp::test::kernel_shape(1, 8, 8, 5);
    const auto fwd = sp::io_cost_forward_element<float>(p, s, t);
    const auto dbl = sp::io_cost_forward_element<double>(p, s, t);
    // index reads (float words - double words): row 0 walks 4 + 1 keys in its first panel
    // (the one past it ends the run) and 4 in its second; rows 4..7 walk their 2 keys in one
    // visit (panel by panel: 2 + 1, 21 in all)
    CHECK(fwd.reads - dbl.reads == p.batch_heads() * (9 + 4 * 2));
    // K and V rows: row 0's block reads all 8 keys, blocks {1..4} and {5, 6, 7} 2 each
    CHECK(dbl.reads == p.batch_heads() * (p.n_q * p.d + 12 * (p.d + p.d_v) + (9 + 4 * 2)));
    Case<float> c(p, 1);
    IoCounter io(fwd.peak);
    sp::forward_element(c.forward(), s, t, MemoryModel{fwd.peak}, io);
    CHECK(io.report() == fwd);
    const auto bwd = sp::io_cost_backward_element<float>(p, s, t);
    IoCounter ib(bwd.peak);
    sp::backward_element(c.backward(), s, t, MemoryModel{bwd.peak}, ib);
    CHECK(ib.report() == bwd);
    check_forward<float>(p, s, t);
    sp::test::check_backward_agrees<double>(p, s, 8, [&](Case<double>& x, const Support& sup) {
        NullCounter none;
        sp::backward_element(x.backward(), sup, t, kAmple, none);
    });
}

TEST_CASE("element kernels are bitwise independent of the thread count",
          "[sparse][element][determinism]") {
    const Problem p = sp::test::kernel_shape(2, 70, 90, 16);
    const Support s = sp::parse_pattern("random:0.15+window:2", 70, 90, 5);
    const Tiling t{Schedule::fused, 8, 32};
    Case<float> one(p, 9), two(p, 9);
    for (auto* c : {&one, &two})
        sp::test::run_forward_reference(*c, s);
    const auto run = [&](Case<float>& c, std::size_t threads) {
        tbb::global_control gc(tbb::global_control::max_allowed_parallelism, threads);
        NullCounter io;
        sp::forward_element(c.forward(), s, t, kAmple, io);
        sp::backward_element(c.backward(), s, t, kAmple, io);
    };
    run(one, 1);
    run(two, 2);
    CHECK(one.o == two.o);
    CHECK(one.lse == two.lse);
    CHECK(one.d_q == two.d_q);
    CHECK(one.d_k == two.d_k);
    CHECK(one.d_v == two.d_v);
}

TEST_CASE("element kernels: bad arguments throw", "[sparse][element][throws]") {
    const Problem p = sp::test::kernel_shape(1, 8, 8, 4);
    const Support s = sp::parse_pattern("random:0.5", 8, 8, 1);
    Case<float> c(p, 1);
    NullCounter io;
    CHECK_THROWS_WITH(
        sp::forward_element(c.forward(), s, Tiling{Schedule::materialized, 4, 4}, kAmple, io),
        Catch::Contains("forward_element") && Catch::Contains("materialized"));
    CHECK_THROWS_WITH(
        sp::forward_element(c.forward(), s, Tiling{Schedule::fused, 0, 4}, kAmple, io),
        Catch::Contains("0 x 4"));
    CHECK_THROWS_WITH(sp::backward_element(c.backward(),
                                           sp::parse_pattern("dense", 8, 9, 1),
                                           Tiling{Schedule::fused, 4, 4},
                                           kAmple,
                                           io),
                      Catch::Contains("backward_element") && Catch::Contains("8 x 9"));
    auto causal = c.forward();
    causal.problem.causal = true;
    CHECK_THROWS_AS(sp::forward_element(causal, s, Tiling{Schedule::fused, 4, 4}, kAmple, io),
                    ioattn::InvalidArgument);
    CHECK_THROWS_AS(sp::element_tiling<float>(p, MemoryModel{8}, ioattn::Pass::forward),
                    ioattn::CapacityError);
}
