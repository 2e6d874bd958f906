// The I/O bound sweep of the forward (docs/design.md section 5.5): for (N, d) in {(1024, 32),
// (2048, 64)} and M over powers of two from 4d to N*d, every schedule's counted I/O is at least the
// explicit any-algorithm bound M*(ceil(N^2/B_max) - 1), and counted / max(compulsory, leading term)
// stays within a factor-4 band for the fused schedule where M >= d^2 and for the materialized one
// where M < d^2 (docs/design.md section 5.1). The measured crossover lies within a factor 4 of d^2
// (section 3.3).

#include "attention_case.hpp"
#include "bound_sweep.hpp"
#include "forward_suite.hpp"

#include <ioattn/dense/forward.hpp>
#include <ioattn/io_cost.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/tiling.hpp>

#include <catch2/catch.hpp>

#include <cstdint>

using ioattn::MemoryModel;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;
using ioattn::test::spread;
using ioattn::test::square;

TEST_CASE("forward bound sweep: explicit bound and the factor-4 band", "[dense][bound]") {
    for (const auto& [n, d] : ioattn::test::kSweepSizes) {
        const Problem p = square(n, d);
        ioattn::test::Bands bands;
        for (std::int64_t m = 4 * d; m <= n * d; m *= 2) {
            const MemoryModel memory{m};
            const ioattn::Bound bound = ioattn::forward_bound(p, memory);
            for (const Schedule s : {Schedule::fused, Schedule::materialized}) {
                const auto tiling = Tiling::try_for_memory(s, memory, p);
                if (!tiling)
                    continue;
                const double counted =
                    static_cast<double>(ioattn::io_cost_forward(p, *tiling).total());
                const double ratio = counted / bound.asymptotic();
                CAPTURE(n, d, m, *tiling, counted, bound.explicit_bound, bound.asymptotic());
                INFO("N=" << n << " d=" << d << " M=" << m << " " << *tiling
                          << " counted=" << counted << " explicit=" << bound.explicit_bound
                          << " asymptotic=" << bound.asymptotic() << " ratio=" << ratio);
                CHECK(counted >= bound.explicit_bound);
                bands.add(s, m, d, ratio);
            }
        }
        CAPTURE(n, d);
        REQUIRE(bands.fused.size() >= 3);
        REQUIRE(bands.materialized.size() >= 3);
        WARN("N=" << n << " d=" << d << " fused band (M >= d^2) max/min = " << spread(bands.fused)
                  << "; materialized band (M < d^2) max/min = " << spread(bands.materialized));
        CHECK(spread(bands.fused) <= 4.0);
        CHECK(spread(bands.materialized) <= 4.0);
    }
}

TEST_CASE("forward bound sweep: the dry run counts what io_cost says", "[dense][bound]") {
    for (const auto& [n, d] : ioattn::test::kSweepSizes) {
        const Problem p = square(n, d);
        for (const std::int64_t m : {4 * d, d * d, n * d}) {
            for (const Schedule s : {Schedule::fused, Schedule::materialized}) {
                const MemoryModel memory{m};
                const auto tiling = Tiling::try_for_memory(s, memory, p);
                if (!tiling)
                    continue;
                CAPTURE(n, d, m, *tiling);
                const ioattn::IoReport counted = ioattn::dense::dry_run_forward(p, *tiling, memory);
                CHECK(counted == ioattn::io_cost_forward(p, *tiling));
                CHECK(static_cast<double>(counted.total()) >=
                      ioattn::forward_bound(p, memory).explicit_bound);
            }
        }
    }
}

TEST_CASE("forward bound: real counted runs respect the explicit bound", "[dense][bound]") {
    const std::int64_t n = 256;
    const std::int64_t d = 16;
    Problem p;
    p.n_q = n;
    p.n_k = n;
    p.d = d;
    ioattn::test::AttentionCase<float> c(p, 31);
    for (std::int64_t m = 4 * d; m <= n * d; m *= 2) {
        for (const Schedule s : {Schedule::fused, Schedule::materialized}) {
            const MemoryModel memory{m};
            const auto tiling = Tiling::try_for_memory(s, memory, c.problem);
            if (!tiling)
                continue;
            CAPTURE(m, *tiling);
            ioattn::IoCounter counter(m);
            ioattn::test::run_kernel<float, ioattn::IoCounter>(c.args(), *tiling, memory, counter);
            CHECK(static_cast<double>(counter.report().total()) >=
                  ioattn::forward_bound(c.problem, memory).explicit_bound);
            CHECK(counter.report().peak <= m);
        }
    }
}

TEST_CASE("measured crossover lies within a factor 4 of d^2", "[dense][bound]") {
    for (const auto& [n, d] : ioattn::test::kSweepSizes) {
        const Problem p = square(n, d);
        const std::int64_t x = ioattn::measured_crossover(p, ioattn::Pass::forward, 4 * d, n * d);
        const double ratio = static_cast<double>(x) / static_cast<double>(d * d);
        CAPTURE(n, d, x, d * d, ratio);
        WARN("N=" << n << " d=" << d << " measured crossover M = " << x << " words, d^2 = " << d * d
                  << ", crossover/d^2 = " << ratio);
        CHECK(x > 0);
        CHECK(ratio >= 0.25);
        CHECK(ratio <= 4.0);
    }
}
