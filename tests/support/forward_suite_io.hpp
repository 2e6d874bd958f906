#pragma once
// Kind 3 of the dense forward suites (docs/design.md section 14): counted I/O equals the closed
// form and the dry run, and the recorded trace. Instantiated through forward_suite.hpp.

#include "forward_kernel_run.hpp"

namespace ioattn::test {

// --- kind 3: I/O exactness -----------------------------------------------------------------

/// Counted I/O equals io_cost_forward exactly (peak included) on random shapes and valid random
/// tilings; peak <= M; one word less of M, or of the counter's capacity, throws CapacityError;
/// the dry run counts the same; counting does not change the result.
template <typename T>
void suite_io_exact(Schedule schedule) {
    const auto exact = [](Rng& rng, std::uint64_t seed, const Problem& p, const Tiling& tiling) {
        const std::int64_t need = tiling.resident_words(p);
        const MemoryModel memory{need + rng.uniform_int(0, 3)};
        CAPTURE(p, tiling, memory.fast_words, seed);
        AttentionCase<T> c(p, seed);
        IoCounter counter(memory.fast_words);
        run_kernel<T, IoCounter>(c.args(), tiling, memory, counter);
        const IoReport expect = io_cost_forward(p, tiling);
        const IoReport got = counter.report();
        CAPTURE(got, expect);
        CHECK(got == expect);
        CHECK(got.peak <= memory.fast_words);
        check_outputs(c);

        AttentionCase<T> plain(p, seed);
        run_kernel<T>(plain.args(), tiling);
        CHECK(bitwise_equal(plain.o, c.o));

        check_one_word_short(
            [&](const MemoryModel& m, IoCounter& counted) {
                run_kernel<T, IoCounter>(c.args(), tiling, m, counted);
            },
            memory,
            got.peak);

        CHECK(dense::dry_run_forward(p, tiling, memory) == expect);

        // the kernel with DryRunCounter: shape-only views with null data count the same, and
        // with real views it leaves the outputs alone
        ForwardArgs<T> shapes = c.args();
        shapes.q.data = nullptr;
        shapes.k.data = nullptr;
        shapes.v.data = nullptr;
        shapes.o.data = nullptr;
        shapes.lse.data = nullptr;
        DryRunCounter dry(memory.fast_words);
        run_kernel<T, DryRunCounter>(shapes, tiling, memory, dry);
        CHECK(dry.report() == expect);
        AttentionCase<T> untouched(p, seed);
        DryRunCounter dry_real(memory.fast_words);
        run_kernel<T, DryRunCounter>(untouched.args(), tiling, memory, dry_real);
        CHECK(dry_real.report() == expect);
        CHECK(std::all_of(untouched.o.data.begin(), untouched.o.data.end(), [](T x) {
            return x == kOutputSentinel<T>;
        }));
        CHECK_THROWS_AS(dense::dry_run_forward(p, tiling, MemoryModel{got.peak - 1}),
                        CapacityError);
    };
    for_each_random_case(kForwardRandom, schedule, 30 * test_multiplier(), 9000, exact);
}

/// The recorded trace adds up to the counts.
template <typename T>
void suite_io_trace(const Tiling& tiling) {
    const Problem p{.batch = 2,
                    .heads = 2,
                    .kv_heads = 1,
                    .n_q = 37,
                    .n_k = 29,
                    .d = 8,
                    .d_v = 5,
                    .causal = true};
    AttentionCase<T> c(p, 17);
    const MemoryModel memory{tiling.resident_words(c.problem)};
    IoCounter counter(memory.fast_words, true);
    run_kernel<T, IoCounter>(c.args(), tiling, memory, counter);
    CHECK(traced_words(counter, TraceEvent::Kind::read) == counter.report().reads);
    CHECK(traced_words(counter, TraceEvent::Kind::write) == counter.report().writes);
    CHECK(counter.report() == io_cost_forward(p, tiling));

    // `complete` events: every allowed entry of S = Q K^T of every slice becomes final exactly
    // once (the epoch check of the ff verifier relies on this)
    ScoreCoverage coverage(c.problem);
    bool in_range = true;
    for (const TraceEvent& e : counter.trace()) {
        if (e.kind != TraceEvent::Kind::complete)
            continue;
        CHECK(e.block.operand == Operand::scores);
        if (!coverage.contains(e.block)) {
            in_range = false;
            continue;
        }
        coverage.add(e.block);
    }
    CHECK(in_range);
    coverage.check_each_allowed_once();
}

} // namespace ioattn::test
