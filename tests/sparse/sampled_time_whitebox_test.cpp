// Whitebox test of the variant planner's sampled estimate (sparse/src/plan/sampled_time.cpp),
// by which it decides which other tile heights to price whole: over windows that hold every
// block it is the whole price; over a sample of one block in four, the ratio of two heights'
// estimates is the ratio of their whole prices within 5%. Blocks of heavy rows (global tokens)
// are priced whole, not scaled: scaled as sampled blocks, global:64+window:8's and
// global:16+block:64:0.05's ratios came out 7-12% off.

#include "plan/structure.hpp"

#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sp = ioattn::sparse;
namespace spd = ioattn::sparse::detail;
using ioattn::Pass;

namespace {

using Windows = std::vector<std::pair<std::int64_t, std::int64_t>>;

/// The tuned height's blocks of every stride-th one, as the planner cuts its windows.
Windows windows_of(std::int64_t n, std::int64_t tuned, std::int64_t stride) {
    Windows w;
    for (std::int64_t i0 = 0; i0 < n; i0 += stride * tuned)
        w.emplace_back(i0, std::min(n, i0 + tuned));
    return w;
}

/// The time of the pick of the whole pricing at `rows`, per row.
double whole_time(const sp::Support& s, std::int64_t rows, Pass pass, const spd::CostModel& cm) {
    const sp::Support& view = pass == Pass::forward ? s : s.transposed();
    const spd::Split w = spd::price_by_fill(view, rows, cm);
    const double pairs = static_cast<double>(view.z_qk()) * cm.element_pair;
    double time = w.cost + static_cast<double>(w.tile_columns) * cm.tile_column;
    switch (spd::pick(w, pairs)) {
    case spd::Pick::all_tiles:
        time = w.all_tiles_cost + static_cast<double>(w.all_tiles_columns) * cm.tile_column;
        break;
    case spd::Pick::all_element:
        time = pairs;
        break;
    case spd::Pick::split:
        break;
    }
    return time / static_cast<double>(view.n_q());
}

} // namespace

TEST_CASE("sampled_time: the whole price over every block, a sample's ratio of two heights "
          "within 5% of the whole one") {
    const std::int64_t n = 8192, tuned = 64;
    for (const std::string spec : {"window:64",
                                   "bigbird:64:2:3",
                                   "block:64:0.1",
                                   "strided:64",
                                   "window:256+global:4",
                                   "global:64+window:8",
                                   "global:16+block:64:0.05"}) {
        const sp::Support s = sp::parse_pattern(spec, n, n, 3);
        for (const Pass pass : {Pass::forward, Pass::backward}) {
            spd::CostModel cm;
            cm.tile_column = pass == Pass::forward ? 6.0 : 30.0;
            cm.lane_group = 16;
            const Windows every = windows_of(n, tuned, 1), sample = windows_of(n, tuned, 4);
            const double whole_tuned = spd::sampled_time(s, tuned, pass, cm, every);
            const double sample_tuned = spd::sampled_time(s, tuned, pass, cm, sample);
            CHECK(whole_tuned == Approx(whole_time(s, tuned, pass, cm)).epsilon(1e-12));
            for (const std::int64_t rows : {tuned - 1, tuned / 2}) {
                CAPTURE(spec, pass == Pass::forward, rows);
                const double whole = spd::sampled_time(s, rows, pass, cm, every);
                CHECK(whole == Approx(whole_time(s, rows, pass, cm)).epsilon(1e-12));
                const double ratio = spd::sampled_time(s, rows, pass, cm, sample) / sample_tuned;
                CHECK(ratio == Approx(whole / whole_tuned).epsilon(0.05));
            }
        }
    }
}
