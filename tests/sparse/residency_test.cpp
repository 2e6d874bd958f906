// The sparse fused kernels' footprint and index traffic: the counter's peak is
// Tiling::resident_words(..., Kernels::sparse), a memory one word smaller is refused, the
// indices a block walks are counted (8 / sizeof(Scalar) words each), and the plan is kept with
// the support.

#include "kernel_case.hpp"

#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <vector>

using ioattn::IoCounter;
using ioattn::Kernels;
using ioattn::MemoryModel;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;
using ioattn::sparse::Support;

namespace {

/// The longest run of consecutive keys in a sorted row (0 for an empty row).
std::int64_t longest_run(std::span<const std::int64_t> row) {
    std::int64_t best = 0;
    for (std::size_t a = 0, e = 0; a < row.size(); a = e) {
        for (e = a + 1; e < row.size() && row[e] == row[e - 1] + 1; ++e) {
        }
        best = std::max(best, static_cast<std::int64_t>(e - a));
    }
    return best;
}

/// Index entries the fused schedule reads per head over `s` with blocks of `rows`, from the rule
/// stated in support/block_keys.hpp, recomputed from the support: a row's keys outside its longest
/// run of consecutive keys, unless they are all its block's first keys; a block's key list unless
/// every row is an interval and the keys are one.
std::int64_t index_entries(const Support& s, std::int64_t rows) {
    const std::vector<std::int64_t> bounds = ioattn::sparse::row_blocks(s, rows);
    std::int64_t entries = 0;
    for (std::size_t b = 0; b + 1 < bounds.size(); ++b) {
        std::set<std::int64_t> keys;
        for (std::int64_t i = bounds[b]; i < bounds[b + 1]; ++i)
            keys.insert(s.row(i).begin(), s.row(i).end());
        const std::vector<std::int64_t> sorted(keys.begin(), keys.end());
        bool simple = true;
        for (std::int64_t i = bounds[b]; i < bounds[b + 1]; ++i) {
            const auto row = s.row(i);
            if (const std::int64_t extra = std::ssize(row) - longest_run(row); extra > 0) {
                simple = false;
                if (!std::equal(row.begin(), row.end(), sorted.begin()))
                    entries += extra;
            }
        }
        if (!sorted.empty() && sorted.back() - sorted.front() + 1 != std::ssize(sorted))
            simple = false;
        entries += simple ? 0 : std::ssize(sorted);
    }
    return entries;
}

template <typename Scalar>
ioattn::IoReport
counted(Pass pass, const Problem& p, const Support& s, const Tiling& t, const MemoryModel& m) {
    ioattn::sparse::test::Case<Scalar> c(p, 3);
    IoCounter io(m.fast_words);
    if (pass == Pass::forward) {
        ioattn::sparse::forward(c.forward(), s, t, m, io);
    } else {
        ioattn::sparse::forward(c.forward(), s, t, MemoryModel{1 << 22}, io);
        io = IoCounter(m.fast_words);
        ioattn::sparse::backward(c.backward(), s, t, m, io);
    }
    return io.report();
}

} // namespace

TEST_CASE("sparse fused: counted index words follow the plan's rule, in words of Scalar",
          "[sparse][io][residency]") {
    const Problem p = ioattn::sparse::test::kernel_shape(2, 40, 40, 8);
    for (const std::string spec :
         {"dense", "window:3", "random:0.2", "strided:4", "global:2+window:2", "block:4:0.4"}) {
        const Support s = ioattn::sparse::parse_pattern(spec, 40, 40, 5);
        for (const Pass pass : {Pass::forward, Pass::backward}) {
            const Tiling t{Schedule::fused, 8, 5};
            const MemoryModel m{t.resident_words(p, pass, Kernels::sparse)};
            CAPTURE(spec, ioattn::to_string(pass));
            const auto f = counted<float>(pass, p, s, t, m);
            const auto d = counted<double>(pass, p, s, t, m);
            // data words are the same in both types; an index is 2 fp32 words, 1 fp64 word
            // (the backward folds the global keys into passes 0 and R: their rows and query
            // lists are intervals, so that the fold walks no index, as their simple block in
            // pass A read none)
            const Support& walked = pass == Pass::forward ? s : s.transposed();
            CHECK(f.reads - d.reads == p.batch_heads() * index_entries(walked, t.rows));
            CHECK(f.writes == d.writes);
            if (spec != "dense")
                continue;
            CHECK(f.reads == d.reads); // intervals only: no index traffic
        }
    }
    // a scattered pattern reads indices, so its count is above its data words
    const Support r = ioattn::sparse::parse_pattern("random:0.2", 40, 40, 5);
    CHECK(index_entries(r, 8) > 0);
}

TEST_CASE("sparse fused: the peak is the sparse footprint, one word less is refused",
          "[sparse][io][residency]") {
    const Problem p = ioattn::sparse::test::kernel_shape(1, 37, 29, 8);
    const Support s = ioattn::sparse::parse_pattern("random:0.3", 37, 29, 2);
    for (const Pass pass : {Pass::forward, Pass::backward})
        for (const auto& t : {Tiling{Schedule::fused, 4, 3},
                              Tiling{Schedule::fused, 16, 64},
                              Tiling{Schedule::fused, 64, 64}}) {
            CAPTURE(ioattn::to_string(pass), t.rows, t.cols);
            const std::int64_t need = t.resident_words(p, pass, Kernels::sparse);
            CHECK(need > t.resident_words(p, pass, Kernels::dense));
            CHECK(counted<float>(pass, p, s, t, MemoryModel{need}).peak == need);
            CHECK_THROWS_AS(counted<float>(pass, p, s, t, MemoryModel{need - 1}),
                            ioattn::CapacityError);
        }
}

TEST_CASE("sparse tilings for M fit the sparse footprint", "[sparse][residency]") {
    const Problem p = ioattn::sparse::test::kernel_shape(1, 512, 512, 16);
    for (const Pass pass : {Pass::forward, Pass::backward})
        for (const std::int64_t m : {2048, 4096, 65536}) {
            CAPTURE(ioattn::to_string(pass), m);
            const auto t =
                Tiling::try_for_memory(Schedule::fused, MemoryModel{m}, p, pass, Kernels::sparse);
            REQUIRE(t.has_value());
            CHECK(t->resident_words(p, pass, Kernels::sparse) <= m);
            // the sparse kernels hold more than the dense ones with the same tiles
            const auto dense = Tiling::try_for_memory(Schedule::fused, MemoryModel{m}, p, pass);
            REQUIRE(dense.has_value());
            CHECK(dense->resident_words(p, pass, Kernels::sparse) > m);
        }
}

TEST_CASE("the fused plan is built once per (support, rows) and shared by copies",
          "[sparse][residency]") {
    const Support s = ioattn::sparse::parse_pattern("random:0.2", 64, 64, 1);
    const auto* first = &s.cached_block_keys(16);
    CHECK(&s.cached_block_keys(16) == first);
    const Support copy = s; // NOLINT(performance-unnecessary-copy-initialization)
    CHECK(&copy.cached_block_keys(16) == first);
    CHECK(&s.cached_block_keys(8) != first);
    CHECK_THROWS_AS(s.cached_block_keys(0), ioattn::InvalidArgument);
}
