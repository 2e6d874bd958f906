// Tests of the split forward's element part (sparse/src/plan/split.cpp, block_element.hpp): inside
// the tile blocks when the rows' state fits M beside the tile scratch (a narrow block's rows
// too), else as a second pass resuming from the tile outputs; both agree with the reference,
// each counts its closed form and its dry run, and a plan run below its residency throws.

#include "brute_force.hpp"
#include "kernel_case.hpp"

#include <ioattn/error.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/variants.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <tuple>

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

} // namespace

TEST_CASE("the split forward takes its element pairs inside the tile blocks when they fit M, "
          "else in a second pass: the same answer, each I/O exact, the dry run alike",
          "[sparse][variants][io]") {
    const std::int64_t n = 640;
    Problem p = sp::test::kernel_shape(2, n, n, 16);
    // bigbird's band and random keys, and a block of two heavy rows whose scattered keys go
    // element by element: rows 0 and 1 see [0, 600) (a narrow tile block where lanes allow)
    // and row 1 also three keys past it
    const Support bigbird = sp::parse_pattern("bigbird:64:2:3", n, n, 7);
    const Support heavy = sp::test::from_predicate(n, n, [](std::int64_t i, std::int64_t j) {
        if (i < 4)
            return j < 300 || (i == 3 && (j == 605 || j == 617 || j == 631));
        return (i > j ? i - j : j - i) <= 8 || j == (i * 7) % n || j == (i * 13 + 5) % n;
    });
    for (const Support* s : {&bigbird, &heavy}) {
        const auto fused = sp::plan_variants<float>(p, *s, kAmple, Pass::forward, Variant::split);
        REQUIRE(fused.element_pairs > 0);
        REQUIRE(fused.tile_pairs > 0);
        CHECK(fused.element_in_tiles);
        const auto io_fused = sp::io_cost<float>(p, *s, fused);
        // the same tile tiling one word short of the fused residency: the second pass
        const MemoryModel tight{io_fused.peak - 1};
        const auto second =
            sp::plan_variants<float>(p, *s, tight, Pass::forward, Variant::split, fused.tile);
        CHECK_FALSE(second.element_in_tiles);
        const auto io_second = sp::io_cost<float>(p, *s, second);
        CHECK(io_fused.writes < io_second.writes); // O and L written once, not twice
        Case<float> ref_case(p, 4);
        const Case<double> ref = reference_of(p, ref_case, *s);
        for (const auto& [plan, memory, cost] :
             {std::tuple{fused, kAmple, io_fused}, std::tuple{second, tight, io_second}}) {
            CAPTURE(plan.element_in_tiles, s == &heavy);
            Case<float> c(p, 4);
            IoCounter io(memory.fast_words);
            sp::forward(c.forward(), *s, plan, memory, io);
            CHECK(io.report() == cost);
            CHECK(io.report().peak <= memory.fast_words);
            ioattn::DryRunCounter dry(memory.fast_words);
            sp::forward(ioattn::ForwardArgs<float>::shape_only(p), *s, plan, memory, dry);
            CHECK(dry.report() == cost);
            CHECK(max_error(c.o, ref.o) < 2e-6);
            for (std::size_t i = 0; i < c.lse.size(); ++i)
                CHECK(std::fabs(static_cast<double>(c.lse[i]) - ref.lse[i]) < 2e-4);
        }
        // a memory below the fused residency refuses the fused plan with a clear error
        Case<float> c(p, 4);
        NullCounter none;
        CHECK_THROWS_WITH(sp::forward(c.forward(), *s, fused, tight, none),
                          Catch::Contains("inside the tile blocks") &&
                              Catch::Contains(std::to_string(io_fused.peak)));
    }
}
