#pragma once
// Test bodies shared by the three dense forward kernels (docs/design.md section 14, kinds 1, 2, 5,
// 6 and the bad-value cases). Each kernel's *_test.cpp instantiates them for float and double.

#include "attention_case.hpp"
#include "case_data.hpp"
#include "printing.hpp"
#include "random.hpp"
#include "reference.hpp"
#include "suite_checks.hpp"
#include "tolerance.hpp"

#include <ioattn/dense/forward.hpp>
#include <ioattn/error.hpp>
#include <ioattn/io_cost.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace ioattn::test {

/// Runs one kernel. The reference ignores tiling and memory.
template <typename T, typename Counter>
void run_kernel(const ForwardArgs<T>& args,
                const Tiling& tiling,
                const MemoryModel& memory,
                Counter& counter) {
    switch (tiling.schedule) {
    case Schedule::reference:
        dense::forward_reference<T>(args);
        return;
    case Schedule::fused:
        dense::forward_fused<T, Counter>(args, tiling, memory, counter);
        return;
    case Schedule::materialized:
        dense::forward_materialized<T, Counter>(args, tiling, memory, counter);
        return;
    }
}

/// Runs one kernel uncounted with M exactly the tiling's residency (generous for reference).
template <typename T>
void run_kernel(const ForwardArgs<T>& args, const Tiling& tiling) {
    NullCounter counter;
    run_kernel<T, NullCounter>(
        args, tiling, exact_memory(tiling, args.problem, Pass::forward), counter);
}

/// Edge shapes: n_q != n_k both ways, n_q = 1, n_k = 1, d = 1, d_v != d both ways, sizes that
/// are multiples of no tile, causal both ways (fully masked rows when n_q > n_k), GQA/MQA, batch.
inline std::vector<Shape> edge_shapes() {
    return {
        {1, 1, 0, 1, 1, 1, 0, false},
        {1, 1, 0, 1, 37, 16, 0, false},
        {1, 1, 0, 1, 37, 16, 0, true},
        {1, 1, 0, 37, 1, 16, 0, false},
        {1, 1, 0, 29, 53, 1, 0, false},
        {1, 1, 0, 53, 29, 8, 0, false},
        {1, 1, 0, 29, 53, 8, 3, false},
        {1, 1, 0, 31, 17, 4, 13, false},
        {1, 1, 0, 29, 53, 8, 0, true},
        {1, 1, 0, 53, 29, 8, 0, true},
        {1, 1, 0, 64, 64, 16, 0, true},
        {2, 4, 2, 33, 45, 8, 0, false},
        {2, 6, 3, 45, 33, 8, 5, true},
        {3, 2, 1, 17, 19, 12, 0, false},
        {1, 1, 0, 7, 300, 64, 0, false},
        {1, 2, 1, 100, 100, 32, 0, true},
    };
}

/// Checks a finished run of `c` against the naive oracle with the error rule, and that the
/// output padding is untouched.
template <typename T>
void check_outputs(const AttentionCase<T>& c) {
    const auto oracle = c.template naive<Oracle<T>>();
    const auto naive_t = c.template naive<T>();
    const std::vector<double> o = c.o.packed();
    const std::vector<double> lse = c.lse.packed();
    const ErrorCheck eo = error_rule<T>(o, naive_t.o, oracle.o);
    const ErrorCheck el = error_rule<T>(lse, naive_t.lse, oracle.lse);
    INFO("O: err(kernel) = " << static_cast<double>(eo.kernel_error)
                             << ", err(naive) = " << static_cast<double>(eo.naive_error)
                             << ", allowed = " << static_cast<double>(eo.allowed));
    INFO("L: err(kernel) = " << static_cast<double>(el.kernel_error)
                             << ", err(naive) = " << static_cast<double>(el.naive_error)
                             << ", allowed = " << static_cast<double>(el.allowed));
    CHECK(eo.passed());
    CHECK(el.passed());
    CHECK(c.outputs_padding_intact());
}

/// Rows with no visible key must give O = 0 and L = -inf exactly.
template <typename T>
void check_masked_rows_exact(const AttentionCase<T>& c) {
    const Problem& p = c.problem;
    std::int64_t masked = 0;
    for (std::int64_t b = 0; b < p.batch; ++b)
        for (std::int64_t h = 0; h < p.heads; ++h)
            for (std::int64_t i = 0; i < p.n_q; ++i) {
                bool any = false;
                for (std::int64_t j = 0; j < p.n_k; ++j)
                    any = any || visible(p, i, j);
                if (any)
                    continue;
                ++masked;
                CAPTURE(b, h, i);
                CHECK(c.lse(b, h, i, 0) == -std::numeric_limits<T>::infinity());
                for (std::int64_t col = 0; col < p.d_v; ++col)
                    CHECK(c.o(b, h, i, col) == T(0));
            }
    if (p.causal && p.n_q > p.n_k)
        CHECK(masked == p.batch * p.heads * (p.n_q - p.n_k));
}

// --- kind 1: agreement on edge shapes and tilings ----------------------------------------------

template <typename T>
void suite_edge_shapes(Schedule schedule) {
    const auto agree = [](const Problem& p, const Tiling& tiling, std::uint64_t seed, bool padded) {
        AttentionCase<T> c(p, seed, edge_padding(padded));
        CAPTURE(p, tiling, seed, padded);
        // the unresolved problem: the kernel fills kv_heads, d_v, scale itself
        ForwardArgs<T> args = c.args();
        args.problem = p;
        run_kernel<T>(args, tiling);
        check_outputs(c);
        check_masked_rows_exact(c);
    };
    for_each_edge_case(edge_shapes(), schedule, Pass::forward, 1000, agree);
}

// --- kind 1: agreement on seeded random shapes and tilings ---------------------------------------

/// Random forward cases: sizes up to 80, d and d_v up to 40.
inline constexpr RandomCases kForwardRandom{Pass::forward, 80, 40};

template <typename T>
void suite_random(Schedule schedule) {
    const auto agree = [](Rng& rng, std::uint64_t seed, const Problem& p, const Tiling& tiling) {
        const Padding pad = random_padding(rng);
        AttentionCase<T> c(p, seed, pad);
        CAPTURE(p, tiling, seed, pad.row, pad.head, pad.batch);
        run_kernel<T>(c.args(), tiling);
        check_outputs(c);
    };
    for_each_random_case(kForwardRandom, schedule, 24 * test_multiplier(), 7000, agree);
}

// --- kind 2: error ratio on a longer sequence with spread-out scores --------------------------

template <typename T>
void suite_error_ratio(const Tiling& tiling) {
    const Problem p{.n_q = 96, .n_k = 700, .d = 64};
    AttentionCase<T> c(p, 42);
    // Q scaled up: scores spread over about [-16, 16], so exp() and the rescaling matter.
    for (T& x : c.q.data)
        x = static_cast<T>(x * T(4));
    CAPTURE(p, tiling);
    run_kernel<T>(c.args(), tiling);
    check_outputs(c);
}

// --- kind 5: determinism across thread counts -----------------------------------------------

template <typename T>
void suite_determinism(const Tiling& tiling) {
    for (const bool causal : {false, true}) {
        const Problem p{.batch = 2,
                        .heads = 4,
                        .kv_heads = 2,
                        .n_q = 150,
                        .n_k = 130,
                        .d = 24,
                        .causal = causal};
        CAPTURE(p, tiling);
        AttentionCase<T> one(p, 99);
        AttentionCase<T> two(p, 99);
        AttentionCase<T> arena(p, 99);
        run_at_thread_counts(
            one, two, arena, [&](AttentionCase<T>& c) { run_kernel<T>(c.args(), tiling); });
        CHECK(bitwise_equal(one.o, two.o));
        CHECK(bitwise_equal(one.lse, two.lse));
        CHECK(bitwise_equal(one.o, arena.o));
        check_outputs(two);
    }
}

// --- bad values ----------------------------------------------------------------------------

/// Counts NaN elements of a packed vector in [first, first + count).
inline std::int64_t
count_nan(const std::vector<double>& x, std::int64_t first, std::int64_t count) {
    std::int64_t n = 0;
    for (std::int64_t e = first; e < first + count; ++e)
        n += std::isnan(x[static_cast<std::size_t>(e)]) ? 1 : 0;
    return n;
}

template <typename T>
void suite_nan_in_q(const Tiling& tiling) {
    Problem p{.batch = 2, .heads = 4, .kv_heads = 2, .n_q = 23, .n_k = 31, .d = 8, .d_v = 6};
    for (const bool causal : {false, true}) {
        p.causal = causal;
        AttentionCase<T> c(p, 5);
        const std::int64_t b = 1, h = 2, i = 21;
        c.q(b, h, i, 3) = std::numeric_limits<T>::quiet_NaN();
        CAPTURE(p, tiling);
        run_kernel<T>(c.args(), tiling);
        const std::vector<double> o = c.o.packed();
        const std::vector<double> lse = c.lse.packed();
        const std::int64_t row = (b * p.heads + h) * p.n_q + i;
        CHECK(count_nan(o, row * p.d_v, p.d_v) == p.d_v);                     // the row: all NaN
        CHECK(count_nan(o, 0, static_cast<std::int64_t>(o.size())) == p.d_v); // nowhere else
        CHECK(std::isnan(lse[static_cast<std::size_t>(row)]));
        CHECK(count_nan(lse, 0, static_cast<std::int64_t>(lse.size())) == 1);
        check_outputs(c); // the other rows are finite and correct
    }
}

template <typename T>
void suite_nan_in_k(const Tiling& tiling) {
    const Problem p{.heads = 4, .kv_heads = 2, .n_q = 30, .n_k = 30, .d = 8, .causal = true};
    AttentionCase<T> c(p, 6);
    const std::int64_t kvh = 1, j = 17;
    c.k(0, kvh, j, 2) = std::numeric_limits<T>::quiet_NaN();
    CAPTURE(p, tiling);
    run_kernel<T>(c.args(), tiling);
    for (std::int64_t h = 0; h < p.heads; ++h)
        for (std::int64_t i = 0; i < p.n_q; ++i) {
            const bool reached = h / 2 == kvh && i >= j;
            CAPTURE(h, i);
            CHECK(std::isnan(c.lse(0, h, i, 0)) == reached);
            for (std::int64_t col = 0; col < p.d_v; ++col)
                CHECK(std::isnan(c.o(0, h, i, col)) == reached);
        }
    check_outputs(c);
}

/// A NaN (or +-Inf) row of V that causal masking hides from the first rows must not reach them;
/// it reaches every O column of the rows that see it, and never L.
template <typename T>
void suite_bad_v_masked(const Tiling& tiling, bool use_inf) {
    for (const std::int64_t n_q : {40, 24}) {
        const Problem p{.n_q = n_q, .n_k = 40, .d = 8, .d_v = 5, .causal = true};
        AttentionCase<T> c(p, 7);
        const std::int64_t j = 30; // seen by rows i >= j - (n_k - n_q)
        for (std::int64_t col = 0; col < p.d_v; ++col)
            c.v(0, 0, j, col) = std::numeric_limits<T>::quiet_NaN();
        if (use_inf) {
            c.v(0, 0, j, 0) = std::numeric_limits<T>::infinity();
            c.v(0, 0, j, 1) = -std::numeric_limits<T>::infinity();
            for (std::int64_t col = 2; col < p.d_v; ++col)
                c.v(0, 0, j, col) = T(0.5);
        }
        CAPTURE(p, tiling, use_inf);
        run_kernel<T>(c.args(), tiling);
        const std::int64_t first_seeing = j - (p.n_k - p.n_q);
        for (std::int64_t i = 0; i < p.n_q; ++i) {
            CAPTURE(i);
            const bool sees = i >= first_seeing;
            CHECK(std::isfinite(c.lse(0, 0, i, 0)));
            for (std::int64_t col = 0; col < p.d_v; ++col) {
                CAPTURE(col);
                const T x = c.o(0, 0, i, col);
                if (!sees)
                    CHECK(std::isfinite(x));
                else if (!use_inf)
                    CHECK(std::isnan(x));
                else if (col == 0)
                    CHECK(x == std::numeric_limits<T>::infinity());
                else if (col == 1)
                    CHECK(x == -std::numeric_limits<T>::infinity());
                else
                    CHECK(std::isfinite(x));
            }
        }
        check_outputs(c);
    }
}

/// Every element of O and L is finite, and the outputs pass check_outputs.
template <typename T>
void check_finite_outputs(const AttentionCase<T>& c) {
    for (const double x : c.o.packed())
        CHECK(std::isfinite(x));
    for (const double x : c.lse.packed())
        CHECK(std::isfinite(x));
    check_outputs(c);
}

/// -Inf in K makes one key's scores -inf for every row: it takes no part (weight exp(-inf) = 0)
/// and nothing becomes NaN.
template <typename T>
void suite_minus_inf_scores(const Tiling& tiling) {
    for (const bool causal : {false, true}) {
        const Problem p{.n_q = 33, .n_k = 33, .d = 8, .causal = causal};
        AttentionCase<T> c(p, 8);
        Rng rng(81);
        for (std::int64_t i = 0; i < p.n_q; ++i)
            c.q(0, 0, i, 0) = static_cast<T>(rng.uniform(0.5, 1.0));
        const std::int64_t j = p.n_k - 1; // never the only visible key of a row
        c.k(0, 0, j, 0) = -std::numeric_limits<T>::infinity();
        CAPTURE(p, tiling);
        run_kernel<T>(c.args(), tiling);
        check_finite_outputs(c);
    }
}

/// Scores of magnitude ~1e30 (Q scaled): softmax is well defined (nearly one-hot), so no NaN and
/// agreement with the oracle.
template <typename T>
void suite_huge_scores(const Tiling& tiling) {
    for (const bool causal : {false, true}) {
        for (const double sign : {1.0, -1.0}) {
            const Problem p{.n_q = 21, .n_k = 35, .d = 8, .causal = causal};
            AttentionCase<T> c(p, 9);
            for (T& x : c.q.data)
                x = static_cast<T>(static_cast<double>(x) * sign * 1e30);
            CAPTURE(p, tiling, sign);
            run_kernel<T>(c.args(), tiling);
            check_finite_outputs(c);
        }
    }
}

/// Causal with n_q > n_k: the first n_q - n_k rows see nothing: O = 0, L = -inf exactly, even
/// with NaN in V (no key is visible, so no V row is used).
template <typename T>
void suite_fully_masked(const Tiling& tiling) {
    const Problem p{
        .batch = 2, .heads = 2, .kv_heads = 1, .n_q = 40, .n_k = 16, .d = 8, .causal = true};
    AttentionCase<T> c(p, 10);
    CAPTURE(p, tiling);
    run_kernel<T>(c.args(), tiling);
    check_masked_rows_exact(c);
    check_outputs(c);

    AttentionCase<T> poisoned(p, 11);
    for (std::int64_t col = 0; col < p.d_v; ++col)
        poisoned.v(1, 0, p.n_k - 1, col) = std::numeric_limits<T>::quiet_NaN();
    run_kernel<T>(poisoned.args(), tiling);
    check_masked_rows_exact(poisoned);
}

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

// --- kind 6: every documented throw --------------------------------------------------------

template <typename T>
void suite_throws(Schedule schedule) {
    const Problem base{.batch = 2, .heads = 4, .kv_heads = 2, .n_q = 12, .n_k = 10, .d = 6};
    AttentionCase<T> c(base, 12);
    const Tiling tiling = edge_tilings(schedule, base, Pass::forward).back();
    const std::string name = kernel_name(Pass::forward, schedule);
    const MemoryModel big{std::int64_t{1} << 30};
    const auto run = [&](const ForwardArgs<T>& args) {
        NullCounter counter;
        run_kernel<T, NullCounter>(args, tiling, big, counter);
    };
    const auto expect_invalid = [&](const ForwardArgs<T>& args) {
        CHECK_THROWS_AS(run(args), InvalidArgument);
        CHECK_THROWS_WITH(run(args), Catch::Contains(name));
    };
    CAPTURE(tiling);

    SECTION("the valid arguments run") {
        CHECK_NOTHROW(run(c.args()));
    }
    SECTION("zero or negative sizes") {
        for (const std::int64_t bad : {0, -1}) {
            CAPTURE(bad);
            ForwardArgs<T> a = c.args();
            a.problem.n_q = bad;
            expect_invalid(a);
            a = c.args();
            a.problem.n_k = bad;
            expect_invalid(a);
            a = c.args();
            a.problem.d = bad;
            expect_invalid(a);
            a = c.args();
            a.problem.batch = bad;
            expect_invalid(a);
            a = c.args();
            a.problem.heads = bad;
            expect_invalid(a);
            a = c.args();
            a.problem.d_v = -1;
            expect_invalid(a);
            a = c.args();
            a.problem.kv_heads = -1;
            expect_invalid(a);
        }
    }
    SECTION("heads not divisible by kv_heads") {
        ForwardArgs<T> a = c.args();
        a.problem.kv_heads = 3;
        expect_invalid(a);
    }
    SECTION("negative or non-finite scale") {
        for (const double bad : {-0.5,
                                 std::numeric_limits<double>::quiet_NaN(),
                                 std::numeric_limits<double>::infinity()}) {
            ForwardArgs<T> a = c.args();
            a.problem.scale = bad;
            expect_invalid(a);
        }
    }
    SECTION("view shape mismatch") {
        ForwardArgs<T> a = c.args();
        a.q.rows -= 1;
        expect_invalid(a);
        a = c.args();
        a.k.heads = base.heads; // k must have kv_heads heads
        expect_invalid(a);
        a = c.args();
        a.v.cols += 1;
        a.v.stride_row += 1;
        expect_invalid(a);
        a = c.args();
        a.o.batch = 1;
        expect_invalid(a);
        a = c.args();
        a.lse.cols = 2;
        a.lse.stride_row = 2;
        expect_invalid(a);
    }
    SECTION("view extent too short") {
        ForwardArgs<T> a = c.args();
        a.q.extent -= 1;
        expect_invalid(a);
        a = c.args();
        a.v.extent -= 1;
        expect_invalid(a);
        a = c.args();
        a.o.extent -= 1;
        expect_invalid(a);
        a = c.args();
        a.lse.extent -= 1;
        expect_invalid(a);
    }
    SECTION("bad strides and null data") {
        ForwardArgs<T> a = c.args();
        a.k.stride_head = -1;
        expect_invalid(a);
        a = c.args();
        a.q.stride_row = base.d - 1; // rows overlap
        expect_invalid(a);
        a = c.args();
        a.v.data = nullptr;
        expect_invalid(a);
        a = c.args();
        a.o.data = nullptr;
        expect_invalid(a);
    }
    SECTION("output overlapping an input") {
        const Problem p = resolve(base);
        // q and o share one buffer, o starting on q's last element
        const std::int64_t q_words = p.batch * p.heads * p.n_q * p.d;
        const std::int64_t o_words = p.batch * p.heads * p.n_q * p.d_v;
        std::vector<T> shared(static_cast<std::size_t>(q_words + o_words), T(0));
        ForwardArgs<T> a = c.args();
        a.q = TensorView<T>::packed(shared.data(), p.batch, p.heads, p.n_q, p.d);
        a.o = TensorView<T>::packed(shared.data() + q_words - 1, p.batch, p.heads, p.n_q, p.d_v);
        expect_invalid(a);
        // one element further they are disjoint and the run succeeds
        a.o = TensorView<T>::packed(shared.data() + q_words, p.batch, p.heads, p.n_q, p.d_v);
        CHECK_NOTHROW(run(a));
        // lse inside o, and o over v
        a = c.args();
        a.lse = TensorView<T>::packed(c.o.data.data(), p.batch, p.heads, p.n_q, 1);
        expect_invalid(a);
        a = c.args();
        a.o = TensorView<T>::packed(c.v.data.data(), p.batch, p.kv_heads, p.n_k, p.d_v);
        a.o.heads = p.heads;
        a.o.rows = p.n_q;
        a.o.stride_batch = 0;
        a.o.stride_head = 0;
        expect_invalid(a);
    }
    if (schedule != Schedule::reference) {
        NullCounter counter;
        const auto run_with = [&](const Tiling& t, const MemoryModel& m) {
            run_kernel<T, NullCounter>(c.args(), t, m, counter);
        };
        SECTION("non-positive tile sizes") {
            CHECK_THROWS_AS(run_with(Tiling{schedule, 0, 4}, big), InvalidArgument);
            CHECK_THROWS_AS(run_with(Tiling{schedule, 4, -1}, big), InvalidArgument);
        }
        SECTION("non-positive M") {
            CHECK_THROWS_AS(run_with(tiling, MemoryModel{0}), InvalidArgument);
        }
        SECTION("tiling larger than M") {
            const std::int64_t need = tiling.resident_words(c.problem);
            CHECK_NOTHROW(run_with(tiling, MemoryModel{need}));
            CHECK_THROWS_AS(run_with(tiling, MemoryModel{need - 1}), CapacityError);
        }
        if (schedule == Schedule::materialized) {
            SECTION("non-square materialized tiling") {
                CHECK_THROWS_AS(run_with(Tiling{Schedule::materialized, 4, 5}, big),
                                InvalidArgument);
            }
        }
    }
}

} // namespace ioattn::test
