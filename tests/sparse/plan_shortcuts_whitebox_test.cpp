// Whitebox tests of the planner's shortcuts, each against the walk it stands for:
// PanelFill (sparse/src/kernels/element/panel_fill.cpp) against ElementPanels::build, and
// widened_element_tiling through fills against the search that built every width's plan; the
// interval rows of block_keys (sparse/src/plan/block_columns.cpp), its bands with other keys
// (band_keys.cpp), and the interval rows of BlockKeys::build
// (sparse/src/support/block_keys.cpp) against a reference walk of the pairs; element_tiling_fits
// against the built panels' peak, and a family's kept element tiling (plan/family_plan.cpp)
// fitting each structure it plans. The block patterns' runs of equal rows:
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

/// Per key of rows [i0, i1): how many rows see it, and the lanes of the groups of `group` rows
/// (0: none) that have a row seeing it.
struct Seen {
    std::map<std::int64_t, std::int64_t> count, lanes;
};

Seen seen_by(const sp::Support& s, std::int64_t i0, std::int64_t i1, std::int64_t group) {
    Seen out;
    for (std::int64_t g0 = i0; g0<i1; g0 += group> 0 ? group : i1 - i0) {
        const std::int64_t g1 = group > 0 ? std::min(i1, g0 + group) : i1;
        std::set<std::int64_t> any;
        for (std::int64_t i = g0; i < g1; ++i)
            for (const std::int64_t j : s.row(i)) {
                ++out.count[j];
                any.insert(j);
            }
        for (const std::int64_t j : any)
            out.lanes[j] += g1 - g0;
    }
    return out;
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

/// 512 x 512 rows of four keys j, j + 2, j + 3, j + 6 (first to last, three steps of 2, but not a
/// progression) among progressions of step 2, and of step 3 from row 300 on.
sp::Support near_progressions() {
    std::vector<std::int64_t> offsets{0}, cols;
    for (std::int64_t i = 0; i < 512; ++i) {
        const std::int64_t j = i % 400;
        const std::vector<std::int64_t> row =
            i % 37 == 5 ? std::vector<std::int64_t>{j, j + 2, j + 3, j + 6}
            : i < 300   ? std::vector<std::int64_t>{j, j + 2, j + 4, j + 6}
                        : std::vector<std::int64_t>{j, j + 3, j + 6, j + 9};
        cols.insert(cols.end(), row.begin(), row.end());
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    return {512, 512, offsets, cols};
}

/// Rows mostly one run of keys each (band_keys' case), with runs starting or ending a row, other
/// keys far off, just past a run, touching it (a longer run) or inside another row's run, empty
/// rows and rows mostly of other keys.
sp::Support bands_with_others() {
    std::vector<std::int64_t> offsets{0}, cols;
    for (std::int64_t i = 0; i < 512; ++i) {
        std::set<std::int64_t> row;
        if (i % 29 != 7) {
            const std::int64_t c = 30 + (i * 7) % 440, r = 3 + i % 23;
            for (std::int64_t j = c - r; j <= c + r; ++j)
                row.insert(j);
            if (i % 3 == 0)
                row.insert((i * 131) % 512);
            if (i % 5 == 1)
                row.insert(c + r + 2);
            if (i % 4 == 2)
                row.insert(c - r - 1);
            if (i % 11 == 3)
                row.insert((c + 40) % 512);
            for (std::int64_t k = 0; i % 13 == 4 && k < 3 * r; ++k)
                row.insert((i * 17 + 5 * k) % 512);
        }
        cols.insert(cols.end(), row.begin(), row.end());
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    return {512, 512, offsets, cols};
}

TEST_CASE("block_keys of progressions, chains and bands with other keys: the walk's keys, counts, "
          "lanes",
          "[sparse][variants][whitebox]") {
    std::vector<std::pair<std::string, sp::Support>> cases{
        {"near progressions", near_progressions()},
        {"bands with others", bands_with_others()},
        {"bigbird:16:2:3 transposed",
         sp::Support(sp::parse_pattern("bigbird:16:2:3", 512, 512, 3).transposed())}};
    for (const std::string spec : {"window:16",
                                   "causal-window:24",
                                   "causal",
                                   "causal-varlen:200,100,212",
                                   "window:3",
                                   "dilated:8:3",
                                   "dilated:40:4",
                                   "dilated:100:7",
                                   "strided:16",
                                   "strided:5",
                                   "strided:48",
                                   "block:16:0.2",
                                   "random:0.05",
                                   "global:4+window:8",
                                   "bigbird:16:2:3",
                                   "bigbird:40:1:6",
                                   "bigbird:4:0:2"})
        cases.emplace_back(spec, sp::parse_pattern(spec, 512, 512, 3));
    // keys scattered over a wide range (sorted by their bits)
    for (const std::string spec : {"random:0.0005", "powerlaw:2"})
        cases.emplace_back(spec + " of 8192 keys", sp::parse_pattern(spec, 512, 8192, 3));
    for (const auto& [spec, s] : cases) {
        const auto n_k = static_cast<std::size_t>(s.n_k());
        std::vector<std::int64_t> work(3 * n_k, 0);
        for (const std::int64_t rows : {1, 16, 40, 64}) {
            for (const std::int64_t group : {0, 16}) {
                CAPTURE(spec, rows, group);
                for (std::int64_t b = 0; b < spd::n_blocks(s, rows); ++b) {
                    const std::int64_t i1 = std::min(s.n_q(), (b + 1) * rows);
                    const bool grouped = group > 0 && group < i1 - b * rows;
                    std::int64_t* lanes = grouped ? work.data() + n_k : nullptr;
                    const auto keys = spd::block_keys(s, rows, b, work.data(), group, lanes);
                    const Seen want = seen_by(s, b * rows, i1, grouped ? group : 0);
                    REQUIRE(keys.size() == want.count.size());
                    std::size_t at = 0;
                    for (const auto& [j, c] : want.count) {
                        CHECK(keys[at++] == j);
                        CHECK(work[static_cast<std::size_t>(j)] == c);
                        if (grouped)
                            CHECK(lanes[j] == want.lanes.at(j));
                    }
                    for (const std::int64_t j : keys)
                        work[static_cast<std::size_t>(j)] = 0;
                    // every count outside the keys stayed 0
                    CHECK(std::all_of(work.begin(),
                                      work.begin() + static_cast<std::ptrdiff_t>(n_k),
                                      [](std::int64_t x) { return x == 0; }));
                }
            }
        }
    }
}

TEST_CASE("BlockKeys of interval rows and of chains: each row's run and prefix as a walk finds "
          "them",
          "[sparse][whitebox]") {
    for (const std::string spec : {"window:16",
                                   "causal-varlen:200,100,212",
                                   "strided:16",
                                   "strided:5",
                                   "strided:48",
                                   "global:3+strided:7",
                                   "random:0.05",
                                   "causal-window:24+global:2"}) {
        const sp::Support s = sp::parse_pattern(spec, 512, 512, 3);
        for (const std::int64_t rows : {16, 64}) {
            CAPTURE(spec, rows);
            const spd::BlockKeys& plan = s.cached_block_keys(rows);
            for (std::int64_t b = 0; b < plan.blocks(); ++b) {
                const auto keys = plan.keys_of(b);
                std::set<std::int64_t> seen;
                // index reads: the keys outside each row's run unless all prefix, and the key
                // list unless every row and the keys are intervals
                std::int64_t words = 0;
                bool simple = keys.empty() || keys.back() - keys.front() + 1 ==
                                                  static_cast<std::int64_t>(keys.size());
                for (std::int64_t i = plan.row0(b); i < plan.row0(b) + plan.rows(b); ++i) {
                    const auto row = s.row(i);
                    const auto u = static_cast<std::size_t>(i);
                    seen.insert(row.begin(), row.end());
                    std::int64_t best = 0, lo = 0, hi = -1, best_at = 0; // the first longest run
                    for (std::size_t a = 0; a < row.size();) {
                        std::size_t e = a + 1;
                        while (e < row.size() && row[e] == row[e - 1] + 1)
                            ++e;
                        if (static_cast<std::int64_t>(e - a) > best) {
                            best = static_cast<std::int64_t>(e - a);
                            lo = row[a];
                            hi = row[e - 1];
                            best_at = static_cast<std::int64_t>(a);
                        }
                        a = e;
                    }
                    CHECK(plan.row_lo[u] == lo);
                    CHECK(plan.row_hi[u] == hi);
                    CHECK(plan.row_run_at[u] == best_at);
                    std::int64_t prefix = 0;
                    while (prefix < static_cast<std::int64_t>(std::min(row.size(), keys.size())) &&
                           row[static_cast<std::size_t>(prefix)] ==
                               keys[static_cast<std::size_t>(prefix)])
                        ++prefix;
                    CHECK(plan.row_prefix[u] == prefix);
                    const auto len = static_cast<std::int64_t>(row.size());
                    if (best != len) {
                        simple = false;
                        words += prefix < len ? len - best : 0;
                    }
                }
                CHECK(std::vector<std::int64_t>(keys.begin(), keys.end()) ==
                      std::vector<std::int64_t>(seen.begin(), seen.end()));
                CHECK(plan.index_reads[static_cast<std::size_t>(b)] ==
                      words + (simple ? 0 : static_cast<std::int64_t>(keys.size())));
            }
        }
    }
}
