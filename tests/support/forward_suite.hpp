#pragma once
// Test bodies shared by the three dense forward kernels (docs/design.md section 14, kinds 1, 2, 5,
// 6; the bad-value cases in forward_suite_values.hpp, kind 3 in forward_suite_io.hpp). Each
// kernel's *_test.cpp instantiates them for float and double.

#include "forward_kernel_run.hpp"
#include "forward_suite_io.hpp"
#include "forward_suite_values.hpp"

namespace ioattn::test {

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
