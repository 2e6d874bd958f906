// Whitebox tests of the planner's shortcuts, each against the walk it stands for:
// PanelFill (sparse/src/kernels/element/panel_fill.cpp) against ElementPanels::build, and
// widened_element_tiling through fills against the search that built every width's plan;
// element_tiling_fits against the built panels' peak, and a family's kept element tiling
// (plan/family_plan.cpp) fitting each structure it plans. The block keys' shortcuts:
// block_keys_whitebox_test.cpp; the block patterns' runs of equal rows:
// row_runs_whitebox_test.cpp.

#include "kernels/element/panel_fill.hpp"
#include "kernels/element/panels.hpp"
#include "plan/block_columns.hpp"
#include "support/block_keys.hpp"

#include <ioattn/sparse/element.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/support_cache.hpp>
#include <ioattn/sparse/variants.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace sp = ioattn::sparse;
namespace spd = ioattn::sparse::detail;

namespace {

/// The patterns the shortcuts are checked on, at n rows and keys.
std::vector<std::string> shortcut_specs(std::int64_t n) {
    return {"random:0.05",
            "powerlaw:8",
            "bigbird:16:2:3",
            "window:16",
            "causal-window:24",
            "strided:16",
            "block:16:0.2",
            "dilated:32:4",
            "causal-varlen:" + std::to_string(n / 2) + "," + std::to_string(n / 4) + "," +
                std::to_string(n - n / 2 - n / 4),
            "global:4"};
}

/// The element kernels' peak for `pass` under t, from plans built for it (of s and, backward,
/// of its transpose).
std::int64_t built_peak(const ioattn::Problem& p,
                        const sp::Support& s,
                        const ioattn::Tiling& t,
                        ioattn::Pass pass) {
    const auto w = spd::ElementWords::of(sizeof(float));
    const spd::ElementPanels rows = spd::ElementPanels::build(s, t.rows, t.cols);
    return pass == ioattn::Pass::forward
               ? spd::forward_element_peak(p, rows, w)
               : spd::backward_element_peak(
                     p, rows, spd::ElementPanels::build(s.transposed(), t.rows, t.cols), w);
}

/// widened_element_tiling as it was before the fills: every width's plan built and walked.
ioattn::Tiling widened_by_builds(const ioattn::Problem& p,
                                 const sp::Support& s,
                                 const ioattn::Tiling& base,
                                 const ioattn::MemoryModel& m,
                                 ioattn::Pass pass) {
    if (s.z_qk() == 0)
        return base;
    const bool fwd = pass == ioattn::Pass::forward;
    const auto fits = [&](const ioattn::Tiling& t) {
        return built_peak(p, s, t, pass) <= m.fast_words;
    };
    const auto plan_cost = [](const spd::ElementPanels& plan) {
        std::int64_t c = 0;
        for (std::int64_t b = 0; b < plan.blocks(); ++b) {
            c += 7 * plan.rows(b) * static_cast<std::int64_t>(plan.visits_of(b).size());
            for (const spd::PanelVisit& v : plan.visits_of(b))
                c += v.keys;
        }
        return c;
    };
    const auto cost = [&](const ioattn::Tiling& t) {
        const std::int64_t r = plan_cost(spd::ElementPanels::build(s, t.rows, t.cols));
        return fwd ? r : r + plan_cost(spd::ElementPanels::build(s.transposed(), t.rows, t.cols));
    };
    ioattn::Tiling best = base;
    std::int64_t best_cost = -1;
    const std::int64_t widest = std::max(s.n_q(), s.n_k());
    for (std::int64_t r = base.rows; r >= std::max<std::int64_t>(1, base.rows / 4); r /= 2) {
        ioattn::Tiling t{ioattn::Schedule::fused, r, base.cols};
        while (t.cols < widest) {
            const ioattn::Tiling wider{ioattn::Schedule::fused, r, std::min(2 * t.cols, widest)};
            if (!fits(wider))
                break;
            t = wider;
        }
        if (fits(t)) {
            const std::int64_t c = cost(t);
            if (best_cost < 0 || c < best_cost) {
                best = t;
                best_cost = c;
            }
        }
        if (r == 1)
            break;
    }
    return best;
}

} // namespace

TEST_CASE("PanelFill: each block's distinct keys per panel, as counted pair by pair",
          "[sparse][element][whitebox]") {
    // blocks dense in their key range (counted by a scan of it), sparse ones (counted per
    // pair), and blocks with no pair (rows [100, 400) emptied)
    const sp::Support r = sp::parse_pattern("random:0.05", 600, 600, 3);
    std::vector<std::int64_t> offsets{0}, cols;
    for (std::int64_t i = 0; i < 600; ++i) {
        if (i < 100 || i >= 400)
            for (const std::int64_t j : r.row(i))
                cols.push_back(j);
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    const sp::Support holes(600, 600, offsets, cols);
    for (const sp::Support* s : {&holes, &holes.transposed()}) {
        for (const std::int64_t rows : {1, 7, 64}) {
            for (const std::int64_t panel : {1, 16, 50, 1024}) {
                CAPTURE(s == &holes, rows, panel);
                const spd::PanelFill fill = spd::PanelFill::build(*s, rows, panel);
                std::vector<std::pair<std::int64_t, std::int64_t>> expect;
                for (std::int64_t b = 0; b < fill.blocks(); ++b) {
                    std::map<std::int64_t, std::set<std::int64_t>> keys; // panel -> keys
                    for (auto i = fill.bounds[static_cast<std::size_t>(b)];
                         i < fill.bounds[static_cast<std::size_t>(b) + 1];
                         ++i)
                        for (const std::int64_t j : s->row(i))
                            keys[j / panel].insert(j);
                    for (const auto& [p, k] : keys)
                        expect.emplace_back(p, static_cast<std::int64_t>(k.size()));
                }
                CHECK(fill.cells == expect);
            }
        }
    }
}

TEST_CASE("PanelFill: the visits of the built plan, runs between the bounds, exact widening",
          "[sparse][element][whitebox]") {
    for (const std::string& spec : shortcut_specs(600)) {
        const sp::Support s = sp::parse_pattern(spec, 600, 600, 3);
        for (const sp::Support* o : {&s, &s.transposed()}) {
            for (const std::int64_t rows : {1, 7, 64}) {
                for (const std::int64_t panel : {1, 16, 50}) {
                    CAPTURE(spec, o == &s, rows, panel);
                    const spd::PanelFill fill = spd::PanelFill::build(*o, rows, panel);
                    for (const std::int64_t wider :
                         {panel, 2 * panel, 8 * panel, std::int64_t{600}, std::int64_t{1024}}) {
                        CAPTURE(wider);
                        REQUIRE(fill.widens_to(wider));
                        const spd::PanelFill f = wider == panel ? fill : fill.widened(wider);
                        const spd::PanelFill direct = spd::PanelFill::build(*o, rows, wider);
                        CHECK(f.cells == direct.cells);
                        CHECK(f.offsets == direct.offsets);
                        CHECK(f.bounds == direct.bounds);
                        const spd::ElementPanels built = spd::ElementPanels::build(*o, rows, wider);
                        const spd::ElementPanels lo = f.plan(spd::RunBound::lower);
                        const spd::ElementPanels hi = f.plan(spd::RunBound::upper);
                        REQUIRE(lo.offsets == built.offsets);
                        REQUIRE(hi.offsets == built.offsets);
                        CHECK(lo.bounds == built.bounds);
                        for (std::size_t v = 0; v < built.visits.size(); ++v) {
                            const spd::PanelVisit& b = built.visits[v];
                            CHECK(lo.visits[v].panel == b.panel);
                            CHECK(lo.visits[v].span == b.span);
                            CHECK(lo.visits[v].keys == b.keys);
                            CHECK(lo.visits[v].run <= b.run);
                            CHECK(hi.visits[v].run >= b.run);
                        }
                    }
                    CHECK_FALSE(fill.widens_to(panel + 1 < 600 && panel > 1 ? panel + 1 : 0));
                }
            }
        }
    }
}

TEST_CASE("widened_element_tiling through fills: the tiling of the search over built plans",
          "[sparse][element][whitebox]") {
    ioattn::Problem p;
    p.n_q = p.n_k = 1024;
    p.d = 16;
    p = p.resolved();
    std::int64_t undecided = 0; // memories the run bounds leave to a built plan
    for (const std::string& spec : shortcut_specs(p.n_q)) {
        const sp::Support s = sp::parse_pattern(spec, p.n_q, p.n_k, 5);
        for (const ioattn::Pass pass : {ioattn::Pass::forward, ioattn::Pass::backward}) {
            // memories from the smallest element tiling's up, some on a peak's edge
            for (const std::int64_t m :
                 {1 << 12, 5000, 1 << 13, 12345, 1 << 14, 1 << 15, 1 << 17}) {
                CAPTURE(spec, pass == ioattn::Pass::forward, m);
                const ioattn::MemoryModel memory{m};
                const ioattn::Tiling base = sp::element_tiling<float>(p, memory, pass);
                const ioattn::Tiling fast =
                    spd::widened_element_tiling<float>(p, s, base, memory, pass);
                CHECK(fast == widened_by_builds(p, s, base, memory, pass));
            }
        }
        // a memory between the bounds of some width's peak: decided by its built plan
        const spd::PanelFill f = spd::PanelFill::build(s, 64, 64);
        const auto w = spd::ElementWords::of(sizeof(float));
        const std::int64_t lo = spd::forward_element_peak(p, f.plan(spd::RunBound::lower), w);
        const std::int64_t hi = spd::forward_element_peak(p, f.plan(spd::RunBound::upper), w);
        if (hi > lo) {
            ++undecided;
            for (const std::int64_t m : {lo, (lo + hi) / 2, hi - 1}) {
                const ioattn::MemoryModel memory{m};
                const ioattn::Tiling base{ioattn::Schedule::fused, 64, 32};
                CAPTURE(spec, m);
                CHECK(
                    spd::widened_element_tiling<float>(p, s, base, memory, ioattn::Pass::forward) ==
                    widened_by_builds(p, s, base, memory, ioattn::Pass::forward));
            }
        }
    }
    CHECK(undecided > 0);
}

TEST_CASE("element_tiling_fits: the kernels' peak over the built panels, at M's edge",
          "[sparse][element][whitebox]") {
    ioattn::Problem p;
    p.n_q = p.n_k = 600;
    p.d = 16;
    p = p.resolved();
    for (const std::string& spec : shortcut_specs(p.n_q)) {
        const sp::Support s = sp::parse_pattern(spec, p.n_q, p.n_k, 5);
        if (s.z_qk() == 0)
            continue;
        for (const ioattn::Pass pass : {ioattn::Pass::forward, ioattn::Pass::backward})
            for (const ioattn::Tiling t : {ioattn::Tiling{ioattn::Schedule::fused, 16, 32},
                                           ioattn::Tiling{ioattn::Schedule::fused, 64, 256}}) {
                const std::int64_t peak = built_peak(p, s, t, pass);
                CAPTURE(spec, pass == ioattn::Pass::forward, t.rows, t.cols, peak);
                CHECK(spd::element_tiling_fits<float>(p, s, t, ioattn::MemoryModel{peak}, pass));
                CHECK_FALSE(
                    spd::element_tiling_fits<float>(p, s, t, ioattn::MemoryModel{peak - 1}, pass));
            }
    }
}

TEST_CASE("a family's kept element tiling: taken where it fits, else searched again",
          "[sparse][element][whitebox]") {
    namespace cache = sp::support_cache;
    ioattn::Problem p;
    p.n_q = p.n_k = 1024;
    p.d = 16;
    p = p.resolved();
    const auto fits = [&](const sp::VariantPlan& plan,
                          const sp::Support& s,
                          const ioattn::MemoryModel& m,
                          ioattn::Pass pass) {
        return spd::element_tiling_fits<float>(p, s, plan.element, m, pass);
    };
    std::int64_t kept = 0, searched = 0;
    for (const ioattn::Pass pass : {ioattn::Pass::forward, ioattn::Pass::backward})
        for (std::int64_t m = 3000; m <= 33000; m += 1000) { // kept tilings' peaks near M
            cache::clear();
            const ioattn::MemoryModel memory{m};
            const auto first = cache::pattern("random:0.05", p.n_q, p.n_k, 1);
            const auto fresh = sp::plan_variants<float>(p, *first, memory, pass);
            for (std::uint64_t seed = 2; seed < 10; ++seed) {
                const auto next = cache::pattern("random:0.05", p.n_q, p.n_k, seed);
                const auto decided = sp::plan_variants<float>(p, *next, memory, pass);
                CAPTURE(pass == ioattn::Pass::forward, m, seed);
                REQUIRE(decided.element_pairs == next->z_qk()); // every pair element-wise
                CHECK(fits(decided, *next, memory, pass));
                (decided.element == fresh.element ? kept : searched) += 1;
            }
        }
    cache::clear();
    CHECK(kept > 0);
    CHECK(searched > 0); // some structure's peak outgrew the kept tiling's M
}
