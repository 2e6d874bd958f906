// Tests of the structure dispatcher (plan_variants, forward / backward / io_cost of a plan) and
// its split and permuted variants: the plan forced to each variant gives the reference's answer
// on every pattern family and edge shapes, forward and backward; counted I/O equals the plan's
// closed form and the dry run; the reordering and the split are exact decompositions; the
// automatic choice on structures whose best variant is clear; determinism; throws. The split
// forward's two ways of running its element part: split_forward_test.cpp.

#include "brute_force.hpp"
#include "kernel_case.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/element.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/variants.hpp>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

using ioattn::IoCounter;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::sparse::Support;
using ioattn::sparse::Variant;
using ioattn::sparse::test::Case;
using ioattn::sparse::test::kAmple;
using ioattn::sparse::test::max_error;
using ioattn::sparse::test::reference_of;

namespace {

namespace sp = ioattn::sparse;

const std::vector<std::string> kVariantPatterns = {"dense",
                                                   "window:3",
                                                   "dilated:2:3",
                                                   "global:2+window:1",
                                                   "bigbird:2:1:2",
                                                   "bigbird-block:2:3:2:1",
                                                   "strided:4",
                                                   "block:3:0.4",
                                                   "random:0.2",
                                                   "powerlaw:3"};

const std::vector<std::optional<Variant>> kForced = {
    std::nullopt, Variant::tile, Variant::element, Variant::split, Variant::permuted};

Support edge_support(std::int64_t n_q, std::int64_t n_k) {
    return sp::test::from_predicate(n_q, n_k, [&](std::int64_t i, std::int64_t j) {
        if (i == 1)
            return false; // an empty row
        if (i == 4)
            return j == n_k / 2;               // a row that sees one key
        return j != 3 && (i + 2 * j) % 3 != 0; // key 3: seen by no row
    });
}

/// The variant a plan forced to `force` runs: the forced one, except that a forced split whose
/// one part has no pair runs the other part's variant alone.
Variant forced_variant(const sp::VariantPlan& plan, Variant force) {
    if (force != Variant::split)
        return force;
    if (plan.element_pairs == 0)
        return Variant::tile;
    return plan.tile_pairs == 0 ? Variant::element : Variant::split;
}

/// Checks the forward plan forced to `force` against the reference and its closed form;
/// returns whether it ran the split variant with both parts.
template <typename T>
bool check_plan_forward(const Problem& p, const Support& s, std::optional<Variant> force) {
    const auto plan = sp::plan_variants<T>(p, s, kAmple, Pass::forward, force);
    CHECK(plan.tile_pairs + plan.element_pairs == s.z_qk());
    if (force && force != Variant::permuted)
        CHECK(plan.variant == forced_variant(plan, *force));
    Case<T> c(p, 3);
    const Case<double> ref = reference_of(p, c, s);
    IoCounter io(kAmple.fast_words);
    sp::forward(c.forward(), s, plan, kAmple, io);
    CHECK(io.report() == sp::io_cost<T>(p, s, plan));
    const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-13;
    CHECK(max_error(c.o, ref.o) < tol);
    for (std::size_t i = 0; i < c.lse.size(); ++i)
        if (std::isinf(ref.lse[i]))
            CHECK(c.lse[i] == static_cast<T>(ref.lse[i]));
        else
            CHECK(std::fabs(static_cast<double>(c.lse[i]) - ref.lse[i]) < 100 * tol);
    return plan.variant == Variant::split;
}

template <typename T>
void check_plan_backward(const Problem& p, const Support& s, std::optional<Variant> force) {
    const auto plan = sp::plan_variants<T>(p, s, kAmple, Pass::backward, force);
    sp::test::check_backward_agrees<T>(p, s, 8, [&](Case<T>& c, const Support& support) {
        IoCounter io(kAmple.fast_words);
        sp::backward(c.backward(), support, plan, kAmple, io);
        CHECK(io.report() == sp::io_cost<T>(p, support, plan));
    });
}

} // namespace

TEMPLATE_TEST_CASE("variant plans forced to each variant agree with the reference, forward",
                   "[sparse][variants]",
                   float,
                   double) {
    int forced_splits = 0; // forced split plans that run both parts
    for (const auto& [n_q, n_k] : std::vector<std::pair<int, int>>{{13, 13}, {9, 17}, {17, 9}})
        for (const std::string& spec : kVariantPatterns)
            for (const auto& force : kForced) {
                CAPTURE(spec, n_q, n_k, force ? sp::to_string(*force) : "auto");
                const Problem p = sp::test::kernel_shape(1, n_q, n_k, 7);
                const bool split =
                    check_plan_forward<TestType>(p, sp::parse_pattern(spec, n_q, n_k, 5), force);
                forced_splits += split && force == Variant::split ? 1 : 0;
            }
    for (const auto& force : kForced) {
        CAPTURE("edge support", force ? sp::to_string(*force) : "auto");
        const bool split = check_plan_forward<TestType>(
            sp::test::kernel_shape(2, 11, 9, 5), edge_support(11, 9), force);
        forced_splits += split && force == Variant::split ? 1 : 0;
    }
    CHECK(forced_splits > 0); // the split path ran, not only its one-part fallbacks
}

TEMPLATE_TEST_CASE("variant plans forced to each variant agree with the reference, backward",
                   "[sparse][variants][backward]",
                   float,
                   double) {
    for (const std::string& spec : kVariantPatterns)
        for (const auto& [n_q, n_k] : sp::test::kBackwardSizes)
            for (const auto& force : kForced) {
                CAPTURE(spec, n_q, n_k, force ? sp::to_string(*force) : "auto");
                const Problem p = sp::test::backward_shape(n_q, n_k, 6);
                check_plan_backward<TestType>(p, sp::parse_pattern(spec, n_q, n_k, 3), force);
            }
    for (const auto& force : kForced)
        check_plan_backward<TestType>(
            sp::test::backward_shape(11, 9, 5), edge_support(11, 9), force);
}

TEST_CASE("variant plans at block scale: split parts are disjoint and cover Omega, the "
          "reordering is a bijection, and every plan's I/O is exact",
          "[sparse][variants][io]") {
    const std::int64_t n = 640;
    Problem p = sp::test::kernel_shape(1, n, n, 16);
    p.heads = p.kv_heads = 1;
    for (const std::string spec : {"window:40",
                                   "random:0.02",
                                   "bigbird:64:2:3",
                                   "bigbird-block:64:3:2:3",
                                   "strided:64",
                                   "dilated:32:4",
                                   "block:64:0.1",
                                   "powerlaw:16"})
        for (const Pass pass : {Pass::forward, Pass::backward})
            for (const auto& force : kForced) {
                CAPTURE(spec, pass == Pass::forward, force ? sp::to_string(*force) : "auto");
                const Support s = sp::parse_pattern(spec, n, n, 7);
                const auto plan = sp::plan_variants<float>(p, s, kAmple, pass, force);
                CHECK(plan.tile_pairs + plan.element_pairs == s.z_qk());
                CHECK(plan.tile_blocks + plan.element_blocks + plan.split_blocks > 0);
                Case<float> c(p, 2);
                sp::test::run_forward_reference(c, s);
                IoCounter io(kAmple.fast_words);
                if (pass == Pass::forward)
                    sp::forward(c.forward(), s, plan, kAmple, io);
                else
                    sp::backward(c.backward(), s, plan, kAmple, io);
                CHECK(io.report() == sp::io_cost<float>(p, s, plan));
                CHECK(io.report().peak <= kAmple.fast_words);
            }
}

TEST_CASE("the dispatcher picks the variant the structure calls for", "[sparse][variants]") {
    const std::int64_t n = 2048;
    Problem p;
    p.n_q = p.n_k = n;
    p.d = 64;
    p = p.resolved();
    const MemoryModel m{1 << 17};
    const auto pick = [&](const std::string& spec, Pass pass) {
        return sp::plan_variants<float>(p, sp::parse_pattern(spec, n, n, 1), m, pass).variant;
    };
    for (const Pass pass : {Pass::forward, Pass::backward}) {
        CAPTURE(pass == Pass::forward);
        CHECK(pick("window:256", pass) == Variant::tile);
        // a short band's edge keys (seen by few rows of a block) stay in tiles: an element pair
        // costs about 9 tile entries (structure.hpp); at 3 they went element by element, 15%
        // slower than all tiles
        CHECK(pick("window:64", pass) == Variant::tile);
        CHECK(pick("block:64:0.1", pass) == Variant::tile);
        CHECK(pick("random:0.02", pass) == Variant::element);
        CHECK(pick("bigbird:64:2:3", pass) == Variant::split);
        CHECK(pick("dilated:64:4", pass) == Variant::permuted);
    }
    // bigbird's two global rows go through tiles whole, so the panels of its element part (the
    // random keys) widen past the worst case's; with them it could not (they fill every panel)
    for (const Pass pass : {Pass::forward, Pass::backward}) {
        const auto bigbird =
            sp::plan_variants<float>(p, sp::parse_pattern("bigbird:64:2:3", n, n, 1), m, pass);
        CHECK(bigbird.element.cols > sp::element_tiling<float>(p, m, pass).cols);
    }
    // strided:64 backward: its band and summary keys through tiles (reordered or split)
    const auto strided =
        sp::plan_variants<float>(p, sp::parse_pattern("strided:64", n, n, 1), m, Pass::backward);
    CHECK(strided.variant != Variant::element);
    CHECK(strided.tile_pairs > strided.element_pairs);
    // its transposed summary keys are global rows, one per block of keys: routed through the
    // tiles of their block they widen every row's span to all queries, so the split is priced
    // that way and loses to the reordering that gathers them into blocks of their own (5x to
    // 9x faster measured, structure.cpp)
    for (const std::string spec : {"strided:64", "strided:128"})
        CHECK(sp::plan_variants<float>(p, sp::parse_pattern(spec, n, n, 1), m, Pass::backward)
                  .variant == Variant::permuted);
    // their forward gathers the summary keys into tile chunks in place: a permuted copy of a
    // row costs about 22 tile entries, a gathered one 16 (structure.hpp); with the copy at 4
    // the reordering won at N = 4096 and ran 1.22x slower (fails with those costs)
    Problem q = p;
    q.n_q = q.n_k = 4096;
    for (const std::string spec : {"strided:64", "strided:128"})
        CHECK(sp::plan_variants<float>(
                  q, sp::parse_pattern(spec, 4096, 4096, 1), MemoryModel{1 << 18}, Pass::forward)
                  .variant == Variant::tile);
    // dilated: residue classes become bands, nearly every pair then through tiles
    const auto dilated =
        sp::plan_variants<float>(p, sp::parse_pattern("dilated:64:4", n, n, 1), m, Pass::forward);
    CHECK(dilated.rows_reordered);
    CHECK(dilated.keys_reordered);
    CHECK(dilated.inner != Variant::element);
    CHECK(dilated.tile_pairs >= 9 * dilated.element_pairs);
}

TEST_CASE("the dispatcher widens the element panels of scattered rows within M, exactly",
          "[sparse][variants][io]") {
    const std::int64_t n = 2048;
    Problem p;
    p.n_q = p.n_k = n;
    p.d = 16;
    p = p.resolved();
    const Support s = sp::parse_pattern("powerlaw:4", n, n, 5); // about 1 key per row per panel
    const MemoryModel m{1 << 15};
    for (const Pass pass : {Pass::forward, Pass::backward}) {
        CAPTURE(pass == Pass::forward);
        const ioattn::Tiling base = sp::element_tiling<float>(p, m, pass);
        const auto plan = sp::plan_variants<float>(p, s, m, pass, Variant::element);
        CHECK(plan.element.cols * base.rows > base.cols * plan.element.rows); // wider per row
        Case<float> c(p, 2);
        IoCounter io(m.fast_words); // throws if a panel's rows did not fit M
        if (pass == Pass::forward) {
            sp::forward(c.forward(), s, plan, m, io);
        } else {
            NullCounter none; // O and L for the backward
            sp::forward(c.forward(),
                        s,
                        sp::plan_variants<float>(p, s, kAmple, Pass::forward),
                        kAmple,
                        none);
            sp::backward(c.backward(), s, plan, m, io);
        }
        CHECK(io.report() == sp::io_cost<float>(p, s, plan));
        CHECK(io.report().peak <= m.fast_words);
    }
    // the results: as the reference, through the widened plans (forward and backward)
    check_plan_forward<float>(p, s, Variant::element);
}

TEST_CASE("rows with many keys per panel widen too: the widest panel that fits M",
          "[sparse][variants][io]") {
    const std::int64_t n = 2048;
    Problem p;
    p.n_q = p.n_k = n;
    p.d = 16;
    p = p.resolved();
    const Support s = sp::parse_pattern("random:0.05", n, n, 5); // about 25 keys per row and panel
    const MemoryModel m{1 << 16};
    for (const Pass pass : {Pass::forward, Pass::backward}) {
        CAPTURE(pass == Pass::forward);
        const ioattn::Tiling base = sp::element_tiling<float>(p, m, pass);
        const auto plan = sp::plan_variants<float>(p, s, m, pass, Variant::element);
        // longer runs per row and panel; the backward's wider panels here only come with
        // fewer rows at the same R x P, and ties keep the rows (each key serves more of them)
        if (pass == Pass::forward)
            CHECK(plan.element.cols > base.cols);
        CHECK(plan.element.rows * plan.element.cols >= base.rows * base.cols);
        // the widest at its rows: one doubling more does not fit M
        const ioattn::Tiling wider{
            ioattn::Schedule::fused, plan.element.rows, 2 * plan.element.cols};
        Case<float> c(p, 2);
        NullCounter none;
        if (pass == Pass::forward) {
            CHECK_NOTHROW(sp::forward_element(c.forward(), s, plan.element, m, none));
            CHECK_THROWS_AS(sp::forward_element(c.forward(), s, wider, m, none),
                            ioattn::CapacityError);
        } else {
            sp::forward(c.forward(),
                        s,
                        sp::plan_variants<float>(p, s, kAmple, Pass::forward),
                        kAmple,
                        none);
            CHECK_NOTHROW(sp::backward_element(c.backward(), s, plan.element, m, none));
            CHECK_THROWS_AS(sp::backward_element(c.backward(), s, wider, m, none),
                            ioattn::CapacityError);
        }
    }
}

TEST_CASE("variant plans are bitwise independent of the thread count",
          "[sparse][variants][determinism]") {
    const Problem p = sp::test::kernel_shape(1, 90, 70, 8);
    for (const std::string spec : {"bigbird:4:1:3", "dilated:3:4", "strided:8"})
        for (const auto& force : kForced) {
            CAPTURE(spec, force ? sp::to_string(*force) : "auto");
            const Support s = sp::parse_pattern(spec, 90, 70, 3);
            Case<float> one(p, 4), two(p, 4);
            const auto run = [&](Case<float>& c, std::size_t threads) {
                tbb::global_control gc(tbb::global_control::max_allowed_parallelism, threads);
                NullCounter io;
                sp::forward(c.forward(),
                            s,
                            sp::plan_variants<float>(p, s, kAmple, Pass::forward, force),
                            kAmple,
                            io);
                sp::backward(c.backward(),
                             s,
                             sp::plan_variants<float>(p, s, kAmple, Pass::backward, force),
                             kAmple,
                             io);
            };
            run(one, 1);
            run(two, 2);
            CHECK(one.o == two.o);
            CHECK(one.lse == two.lse);
            CHECK(one.d_q == two.d_q);
            CHECK(one.d_k == two.d_k);
            CHECK(one.d_v == two.d_v);
        }
}

TEST_CASE("the dispatcher lowers the tile height when its estimate drops; a given one is kept",
          "[sparse][variants][io]") {
    const Problem p = sp::test::kernel_shape(1, 2048, 2048, 16);
    for (const Pass pass : {Pass::forward, Pass::backward}) {
        CAPTURE(pass == Pass::forward);
        const ioattn::Tiling tuned = sp::tuned_tiling(ioattn::Schedule::fused, kAmple, p, pass);
        REQUIRE(tuned.rows >= 32);
        // the backward: strided:L at L = the tuned height has, once the summary keys are
        // gathered, L - 1 own keys per block. The forward: a band much narrower than the height
        // costs the same lanes at every height (its slabs stagger by 16-row groups), and a
        // taller tile has fewer key columns, so the tuned height stays
        const std::string spec = pass == Pass::backward
                                     ? "strided:" + std::to_string(tuned.rows)
                                     : "window:" + std::to_string(tuned.rows / 8);
        CAPTURE(spec);
        const Support s = sp::parse_pattern(spec, p.n_q, p.n_k, 5);
        const auto plan = sp::plan_variants<float>(p, s, kAmple, pass);
        const auto kept = sp::plan_variants<float>(p, s, kAmple, pass, std::nullopt, tuned);
        CHECK(kept.tile == tuned);
        CHECK(plan.tile.cols == tuned.cols);
        if (pass == Pass::backward) {
            CHECK(plan.tile.rows == tuned.rows - 1);
            CHECK(plan.estimate < 0.97 * kept.estimate);
            check_plan_backward<float>(p, s, std::nullopt);
        } else {
            CHECK(plan.tile.rows == tuned.rows);
            CHECK(plan.estimate == kept.estimate);
            CHECK(plan.tile_pairs == s.z_qk()); // its edge keys are worth a 16-row group's lanes
            check_plan_forward<float>(p, s, std::nullopt);
        }
    }
}

TEST_CASE("variant plans are kept with the support per shape, memory, pass and request",
          "[sparse][variants]") {
    const Problem p = sp::test::kernel_shape(1, 96, 96, 8);
    const Support s = sp::parse_pattern("strided:8", 96, 96, 5);
    const auto a = sp::plan_variants<float>(p, s, kAmple, Pass::forward);
    const Support copy = s; // copies share the kept plans
    CHECK(sp::plan_variants<float>(p, copy, kAmple, Pass::forward).parts == a.parts);
    // another memory, pass, word, request or shape is planned on its own
    CHECK(sp::plan_variants<float>(p, s, MemoryModel{1 << 20}, Pass::forward).parts != a.parts);
    CHECK(sp::plan_variants<float>(p, s, kAmple, Pass::backward).parts != a.parts);
    CHECK(sp::plan_variants<double>(p, s, kAmple, Pass::forward).parts != a.parts);
    CHECK(sp::plan_variants<float>(p, s, kAmple, Pass::forward, Variant::tile).parts != a.parts);
    Problem wider = p;
    wider.d = 16;
    CHECK(sp::plan_variants<float>(wider, s, kAmple, Pass::forward).parts != a.parts);
    // a fresh support with the same pairs plans again, to the same plan
    const Support same = sp::parse_pattern("strided:8", 96, 96, 5);
    const auto b = sp::plan_variants<float>(p, same, kAmple, Pass::forward);
    CHECK(b.parts != a.parts);
    CHECK(b.tile == a.tile);
    CHECK(b.variant == a.variant);
    CHECK(b.estimate == a.estimate);
    // errors are not kept: the causal problem throws every time
    Problem causal = p;
    causal.causal = true;
    for (int k = 0; k < 2; ++k)
        CHECK_THROWS_AS(sp::plan_variants<float>(causal, s, kAmple, Pass::forward),
                        ioattn::InvalidArgument);
}

TEST_CASE("variant plans: bad arguments throw", "[sparse][variants][throws]") {
    const Problem p = sp::test::kernel_shape(1, 8, 8, 4);
    const Support s = sp::parse_pattern("random:0.5", 8, 8, 1);
    CHECK(sp::parse_variant("element") == Variant::element);
    CHECK_THROWS_WITH(sp::parse_variant("blocks"),
                      Catch::Contains("'blocks'") && Catch::Contains("tile, element"));
    CHECK_THROWS_WITH(
        sp::plan_variants<float>(p, sp::parse_pattern("dense", 8, 9, 1), kAmple, Pass::forward),
        Catch::Contains("plan_variants") && Catch::Contains("8 x 9"));
    Problem causal = p;
    causal.causal = true;
    CHECK_THROWS_AS(sp::plan_variants<float>(causal, s, kAmple, Pass::forward),
                    ioattn::InvalidArgument);
    const auto fwd = sp::plan_variants<float>(p, s, kAmple, Pass::forward);
    Case<float> c(p, 1);
    NullCounter io;
    CHECK_THROWS_WITH(sp::backward(c.backward(), s, fwd, kAmple, io),
                      Catch::Contains("forward pass"));
    CHECK_THROWS_WITH(sp::forward(c.forward(), s, sp::VariantPlan{}, kAmple, io),
                      Catch::Contains("plan_variants"));
}
