#pragma once
// Test bodies shared by the three dense backward kernels (docs/design.md section 14, kinds 1, 2,
// 4, 5, 6 and the bad-value cases; kind 3 in backward_suite_io.hpp). Each kernel's
// backward_*_test.cpp instantiates them for float and double.

#include "backward_case.hpp"
#include "backward_suite_io.hpp"

namespace ioattn::test {

// --- kind 1: agreement on edge shapes and tilings ----------------------------------------------

template <typename T>
void backward_suite_edge_shapes(Schedule schedule) {
    const auto agree = [](const Problem& p, const Tiling& tiling, std::uint64_t seed, bool padded) {
        BackwardCase<T> c(p, seed, edge_padding(padded));
        CAPTURE(p, tiling, seed, padded);
        BackwardArgs<T> args = c.args();
        args.problem = p; // unresolved: the kernel fills kv_heads, d_v, scale itself
        run_backward<T>(args, tiling);
        check_gradients(c);
    };
    for_each_edge_case(backward_edge_shapes(), schedule, Pass::backward, 2000, agree);
}

// --- kind 1: agreement on seeded random shapes -------------------------------------------------

template <typename T>
void backward_suite_random(Schedule schedule) {
    const auto agree = [](Rng& rng, std::uint64_t seed, const Problem& p, const Tiling& tiling) {
        const Padding pad = random_padding(rng);
        BackwardCase<T> c(p, seed, pad);
        CAPTURE(p, tiling, seed, pad.row, pad.head, pad.batch);
        run_backward<T>(c.args(), tiling);
        check_gradients(c);
    };
    for_each_random_case(kBackwardRandom, schedule, 24 * test_multiplier(), 8000, agree);
}

// --- kind 2: error ratio on a longer sequence with spread-out scores --------------------------

template <typename T>
void backward_suite_error_ratio(const Tiling& tiling) {
    for (const bool causal : {false, true}) {
        const Problem p{
            .heads = 2, .kv_heads = 1, .n_q = 96, .n_k = 300, .d = 64, .causal = causal};
        BackwardCase<T> c(p, 42);
        for (T& x : c.fwd.q.data) // scores spread over about [-16, 16]
            x = static_cast<T>(x * T(4));
        c.refresh_forward();
        CAPTURE(p, tiling);
        run_backward<T>(c.args(), tiling);
        check_gradients(c);
    }
}

// --- kind 4: central finite differences in double ----------------------------------------------

/// f(Q, K, V) = sum W o O(Q, K, V) with O from the naive forward in double; its gradients are
/// the backward of dO = W. Checks the kernel's dQ, dK, dV against central differences, which use
/// no backward code at all.
inline void backward_suite_finite_differences(Schedule schedule) {
    const std::vector<Shape> shapes = {
        {1, 1, 0, 3, 4, 2, 3, false},
        {1, 2, 1, 3, 4, 2, 0, false},
        {1, 1, 0, 5, 3, 3, 2, true},
        {1, 1, 0, 3, 5, 2, 0, true},
        {2, 2, 2, 4, 4, 1, 1, false},
        {1, 4, 2, 4, 3, 3, 2, true},
    };
    std::uint64_t seed = 300;
    for (const Shape& s : shapes) {
        const Problem p = s.problem();
        for (const Tiling& tiling : edge_tilings(schedule, p, Pass::backward)) {
            ++seed;
            BackwardCase<double> c(p, seed);
            CAPTURE(p, tiling, seed);
            run_backward<double>(c.args(), tiling);
            const std::vector<double> w = c.d_o.packed();
            const auto functional = [&] {
                const auto r = naive_forward<double, double>(
                    c.problem(), c.fwd.q.view, c.fwd.k.view, c.fwd.v.view);
                double f = 0.0;
                for (std::size_t e = 0; e < w.size(); ++e)
                    f += w[e] * r.o[e];
                return f;
            };
            const double h = 1e-5;
            const auto check = [&](Buffer<double>& x,
                                   const Buffer<double>& grad,
                                   const char* name) {
                const TensorView<double>& v = x.view;
                for (std::int64_t b = 0; b < v.batch; ++b)
                    for (std::int64_t hh = 0; hh < v.heads; ++hh)
                        for (std::int64_t i = 0; i < v.rows; ++i)
                            for (std::int64_t col = 0; col < v.cols; ++col) {
                                const double saved = x(b, hh, i, col);
                                x(b, hh, i, col) = saved + h;
                                const double up = functional();
                                x(b, hh, i, col) = saved - h;
                                const double down = functional();
                                x(b, hh, i, col) = saved;
                                const double fd = (up - down) / (2 * h);
                                const double got = grad(b, hh, i, col);
                                CAPTURE(name, b, hh, i, col, fd, got);
                                CHECK(std::fabs(got - fd) <= 1e-7 * std::max(1.0, std::fabs(fd)));
                            }
            };
            check(c.fwd.q, c.d_q, "dQ");
            check(c.fwd.k, c.d_k, "dK");
            check(c.fwd.v, c.d_v, "dV");
        }
    }
}

// --- kind 5: determinism across thread counts -----------------------------------------------

template <typename T>
void backward_suite_determinism(const Tiling& tiling) {
    for (const bool causal : {false, true}) {
        const Problem p{.batch = 2,
                        .heads = 4,
                        .kv_heads = 2,
                        .n_q = 90,
                        .n_k = 70,
                        .d = 24,
                        .d_v = 20,
                        .causal = causal};
        CAPTURE(p, tiling);
        BackwardCase<T> one(p, 99);
        BackwardCase<T> two(p, 99);
        BackwardCase<T> arena(p, 99);
        run_at_thread_counts(
            one, two, arena, [&](BackwardCase<T>& c) { run_backward<T>(c.args(), tiling); });
        CHECK(one.same_gradients(two));
        CHECK(one.same_gradients(arena));
        check_gradients(two);
    }
}

// --- bad values: fully masked rows and NaN in hidden rows ----------------------------------------

/// Causal with n_q > n_k: the first n_q - n_k rows see no key (L = -inf). Their dQ is exactly 0,
/// and whatever their Q and dO hold (NaN included) changes no bit of dK and dV.
template <typename T>
void backward_suite_fully_masked(const Tiling& tiling) {
    const Problem p{
        .heads = 2, .kv_heads = 1, .n_q = 30, .n_k = 12, .d = 6, .d_v = 5, .causal = true};
    BackwardCase<T> clean(p, 21);
    BackwardCase<T> poisoned(p, 21);
    const std::int64_t masked = p.n_q - p.n_k;
    for (std::int64_t h = 0; h < p.heads; ++h)
        for (std::int64_t i = 0; i < masked; ++i) {
            for (std::int64_t col = 0; col < p.d; ++col)
                poisoned.fwd.q(0, h, i, col) = std::numeric_limits<T>::quiet_NaN();
            for (std::int64_t col = 0; col < p.d_v; ++col)
                poisoned.d_o(0, h, i, col) = std::numeric_limits<T>::quiet_NaN();
        }
    CAPTURE(p, tiling);
    run_backward<T>(clean.args(), tiling);
    run_backward<T>(poisoned.args(), tiling);
    for (const BackwardCase<T>* c : {&clean, &poisoned}) {
        for (std::int64_t h = 0; h < p.heads; ++h)
            for (std::int64_t i = 0; i < masked; ++i)
                for (std::int64_t col = 0; col < p.d; ++col) {
                    CAPTURE(h, i, col);
                    CHECK(c->d_q(0, h, i, col) == T(0)); // exactly zero, not NaN
                }
        for (const double x : c->d_q.packed())
            CHECK(std::isfinite(x));
    }
    CHECK(bitwise_equal(clean.d_k, poisoned.d_k));
    CHECK(bitwise_equal(clean.d_v, poisoned.d_v));
    CHECK(bitwise_equal(clean.d_q, poisoned.d_q));
    check_gradients(clean);
}

/// NaN in a key/value row that causal masking hides from the first rows: their dQ stays finite
/// (and correct), and the NaN reaches exactly the gradients the naive computation says.
template <typename T>
void backward_suite_nan_hidden_kv(const Tiling& tiling) {
    const Problem p{
        .heads = 2, .kv_heads = 1, .n_q = 24, .n_k = 40, .d = 8, .d_v = 5, .causal = true};
    BackwardCase<T> c(p, 8);
    const std::int64_t j = 30; // seen by rows i >= j - (n_k - n_q) = 14
    for (std::int64_t col = 0; col < p.d; ++col)
        c.fwd.k(0, 0, j, col) = std::numeric_limits<T>::quiet_NaN();
    for (std::int64_t col = 0; col < p.d_v; ++col)
        c.fwd.v(0, 0, j, col) = std::numeric_limits<T>::quiet_NaN();
    c.refresh_forward();
    CAPTURE(p, tiling);
    run_backward<T>(c.args(), tiling);
    const std::int64_t first_seeing = j - (p.n_k - p.n_q);
    for (std::int64_t h = 0; h < p.heads; ++h)
        for (std::int64_t i = 0; i < first_seeing; ++i)
            for (std::int64_t col = 0; col < p.d; ++col) {
                CAPTURE(h, i, col);
                CHECK(std::isfinite(c.d_q(0, h, i, col)));
            }
    check_gradients(c); // NaN positions must match the oracle's exactly
}

// --- kind 6: documented throws -----------------------------------------------------------------

template <typename T>
void backward_suite_throws(Schedule schedule) {
    const Problem base{
        .batch = 2, .heads = 4, .kv_heads = 2, .n_q = 12, .n_k = 10, .d = 6, .d_v = 5};
    BackwardCase<T> c(base, 12);
    const Tiling tiling = edge_tilings(schedule, base, Pass::backward).back();
    const std::string name = kernel_name(Pass::backward, schedule);
    const MemoryModel big{std::int64_t{1} << 30};
    const auto run = [&](const BackwardArgs<T>& args) {
        NullCounter counter;
        run_backward<T, NullCounter>(args, tiling, big, counter);
    };
    const auto expect_invalid = [&](const BackwardArgs<T>& args) {
        CHECK_THROWS_AS(run(args), InvalidArgument);
        CHECK_THROWS_WITH(run(args), Catch::Contains(name));
    };
    CAPTURE(tiling);

    SECTION("the valid arguments run") {
        CHECK_NOTHROW(run(c.args()));
    }
    SECTION("bad problem sizes") {
        BackwardArgs<T> a = c.args();
        a.problem.n_q = 0;
        expect_invalid(a);
        a = c.args();
        a.problem.kv_heads = 3;
        expect_invalid(a);
    }
    SECTION("gradient view shape mismatch") {
        BackwardArgs<T> a = c.args();
        a.d_o.rows -= 1;
        expect_invalid(a);
        a = c.args();
        a.d_o.cols = base.d; // d_o is n_q x d_v
        expect_invalid(a);
        a = c.args();
        a.d_q.rows -= 1;
        expect_invalid(a);
        a = c.args();
        a.d_k.heads = base.heads; // d_k has kv_heads heads
        expect_invalid(a);
        a = c.args();
        a.d_v.cols = base.d; // d_v is n_k x d_v
        expect_invalid(a);
        a = c.args();
        a.o.rows -= 1;
        expect_invalid(a);
        a = c.args();
        a.lse.cols = 2;
        expect_invalid(a);
    }
    SECTION("null gradient data") {
        BackwardArgs<T> a = c.args();
        a.d_o.data = nullptr;
        expect_invalid(a);
        a = c.args();
        a.d_k.data = nullptr;
        expect_invalid(a);
    }
    SECTION("overlapping outputs") {
        std::vector<T> shared(static_cast<std::size_t>(1) << 12, T(0.5));
        T* const mem = shared.data();
        const auto view = [&](T* data, std::int64_t heads, std::int64_t rows, std::int64_t cols) {
            return TensorView<T>::packed(data, base.batch, heads, rows, cols);
        };
        BackwardArgs<T> a = c.args();
        a.d_k = view(mem, base.kv_heads, base.n_k, base.d);
        a.d_v = view(mem + 8, base.kv_heads, base.n_k, base.d_v);
        expect_invalid(a); // d_k overlaps d_v
        a = c.args();
        a.d_q = view(mem, base.heads, base.n_q, base.d);
        a.d_k = view(mem + 500, base.kv_heads, base.n_k, base.d);
        expect_invalid(a); // d_q overlaps d_k
        a = c.args();
        a.d_o = view(mem, base.heads, base.n_q, base.d_v);
        a.d_q = view(mem + 100, base.heads, base.n_q, base.d);
        expect_invalid(a); // d_q overlaps the input d_o
        a = c.args();
        a.d_v = view(c.fwd.v.data.data(), base.kv_heads, base.n_k, base.d_v);
        expect_invalid(a); // d_v is v: in place is not allowed
        a = c.args();
        a.d_q = view(c.fwd.q.data.data(), base.heads, base.n_q, base.d);
        expect_invalid(a); // d_q is q
        a = c.args();
        a.d_k = view(mem, base.kv_heads, base.n_k, base.d);
        a.o = view(mem + 1, base.heads, base.n_q, base.d_v);
        expect_invalid(a); // d_k overlaps o
    }
    if (schedule != Schedule::reference) {
        SECTION("a tiling of another schedule") {
            const Tiling other{
                schedule == Schedule::fused ? Schedule::materialized : Schedule::fused, 4, 4};
            NullCounter counter;
            if (schedule == Schedule::fused)
                CHECK_THROWS_AS(
                    (dense::backward_fused<T, NullCounter>(c.args(), other, big, counter)),
                    InvalidArgument);
            else
                CHECK_THROWS_AS(
                    (dense::backward_materialized<T, NullCounter>(c.args(), other, big, counter)),
                    InvalidArgument);
        }
        SECTION("non-positive tile sizes") {
            NullCounter counter;
            const Tiling zero{schedule, 0, 0};
            CHECK_THROWS_AS((run_backward<T, NullCounter>(c.args(), zero, big, counter)),
                            InvalidArgument);
        }
        SECTION("M too small for the tiling") {
            const MemoryModel tiny_m{tiling.resident_words(c.problem(), Pass::backward) - 1};
            NullCounter counter;
            CHECK_THROWS_AS((run_backward<T, NullCounter>(c.args(), tiling, tiny_m, counter)),
                            CapacityError);
        }
    }
}

} // namespace ioattn::test
