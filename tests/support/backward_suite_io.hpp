#pragma once
// Kind 3 of the dense backward suites (docs/design.md section 14): counted I/O equals the closed
// form and the dry run. Instantiated through backward_suite.hpp.

#include "backward_case.hpp"

namespace ioattn::test {

// --- kind 3: counted I/O equals the closed form -------------------------------------------------

template <typename T>
void backward_suite_io_exact(Schedule schedule) {
    const auto exact = [](Rng& rng, std::uint64_t seed, const Problem& p, const Tiling& tiling) {
        const std::int64_t need = tiling.resident_words(p, Pass::backward);
        const MemoryModel memory{need + rng.uniform_int(0, 3)};
        CAPTURE(p, tiling, memory.fast_words, seed);
        BackwardCase<T> c(p, seed);
        IoCounter counter(memory.fast_words);
        run_backward<T, IoCounter>(c.args(), tiling, memory, counter);
        const IoReport expect = io_cost_backward(p, tiling);
        const IoReport got = counter.report();
        CAPTURE(got.reads, got.writes, got.peak, expect.reads, expect.writes, expect.peak);
        CHECK(got == expect);
        CHECK(got.peak <= memory.fast_words);
        check_gradients(c);

        BackwardCase<T> plain(p, seed); // counting changes nothing
        run_backward<T>(plain.args(), tiling);
        CHECK(plain.same_gradients(c));

        check_one_word_short(
            [&](const MemoryModel& m, IoCounter& counted) {
                run_backward<T, IoCounter>(c.args(), tiling, m, counted);
            },
            memory,
            got.peak);

        DryRunCounter dry(memory.fast_words);
        run_backward<T, DryRunCounter>(c.args(), tiling, memory, dry);
        CHECK(dry.report() == expect);
        CHECK(dense::dry_run_backward(p, tiling, memory) == expect);
        CHECK_THROWS_AS(dense::dry_run_backward(p, tiling, MemoryModel{got.peak - 1}),
                        CapacityError);
    };
    for_each_random_case(kBackwardRandom, schedule, 30 * test_multiplier(), 9500, exact);
}

/// Counted I/O equals the closed form on every edge shape and tiling (including causal shapes
/// with n_q > n_k where only a short last row tile sees a key, which sets the peak).
template <typename T>
void backward_suite_io_edge(Schedule schedule) {
    for (const Shape& s : backward_edge_shapes()) {
        const Problem p = s.problem();
        for (const Tiling& tiling : edge_tilings(schedule, p, Pass::backward)) {
            const MemoryModel memory{tiling.resident_words(p, Pass::backward)};
            CAPTURE(p, tiling, memory.fast_words);
            BackwardCase<T> c(p, 31);
            IoCounter counter(memory.fast_words);
            run_backward<T, IoCounter>(c.args(), tiling, memory, counter);
            const IoReport expect = io_cost_backward(p, tiling);
            const IoReport got = counter.report();
            CAPTURE(got.reads, got.writes, got.peak, expect.reads, expect.writes, expect.peak);
            CHECK(got == expect);
            CHECK(dense::dry_run_backward(p, tiling, memory) == expect);
        }
    }
}

/// The for_memory tiling fits every M it is given, and the dry run of a problem far too large to
/// hold (data pointers null) walks the schedule with the closed-form counts.
inline void backward_suite_io_for_memory(Schedule schedule) {
    Problem p{.heads = 2, .kv_heads = 1, .n_q = 500, .n_k = 700, .d = 48, .d_v = 40};
    for (const bool causal : {false, true}) {
        p.causal = causal;
        for (const std::int64_t m : {20, 100, 1000, 5000, 40000, 300000}) {
            const auto tiling = Tiling::try_for_memory(schedule, MemoryModel{m}, p, Pass::backward);
            CAPTURE(p, m);
            if (!tiling)
                continue;
            CAPTURE(*tiling);
            const IoReport got = dense::dry_run_backward(p, *tiling, MemoryModel{m});
            CHECK(got == io_cost_backward(p, *tiling));
            CHECK(got.peak <= m);
        }
    }
    const Problem big{.heads = 4, .kv_heads = 2, .n_q = 6000, .n_k = 5000, .d = 64, .causal = true};
    const MemoryModel memory{1 << 16};
    const Tiling tiling = Tiling::for_memory(schedule, memory, big, Pass::backward);
    CAPTURE(big, tiling);
    CHECK(dense::dry_run_backward(big, tiling, memory) == io_cost_backward(big, tiling));
}

/// The recorded trace adds up to the counts, and (materialized) every allowed entry of S = Q K^T
/// of every query head becomes final exactly once.
template <typename T>
void backward_suite_io_trace(const Tiling& tiling) {
    const Problem p{.batch = 2,
                    .heads = 2,
                    .kv_heads = 1,
                    .n_q = 37,
                    .n_k = 29,
                    .d = 8,
                    .d_v = 5,
                    .causal = true};
    BackwardCase<T> c(p, 17);
    const Problem& r = c.problem();
    const MemoryModel memory{tiling.resident_words(r, Pass::backward)};
    IoCounter counter(memory.fast_words, true);
    run_backward<T, IoCounter>(c.args(), tiling, memory, counter);
    ScoreCoverage coverage(r);
    std::int64_t completes = 0;
    for (const TraceEvent& e : counter.trace()) {
        if (e.kind != TraceEvent::Kind::complete)
            continue;
        ++completes;
        REQUIRE(e.block.operand == Operand::scores);
        REQUIRE(coverage.contains(e.block));
        coverage.add(e.block);
    }
    CHECK(traced_words(counter, TraceEvent::Kind::read) == counter.report().reads);
    CHECK(traced_words(counter, TraceEvent::Kind::write) == counter.report().writes);
    CHECK(counter.report() == io_cost_backward(r, tiling));
    if (tiling.schedule != Schedule::materialized)
        return;
    CHECK(completes > 0);
    coverage.check_each_allowed_once();
}

} // namespace ioattn::test
