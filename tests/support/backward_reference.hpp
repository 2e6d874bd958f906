#pragma once
// The backward pass in the tests: a naive backward independent of the library (it takes the
// forward's O and L as given, like the kernels, and follows docs/design.md section 4.1 literally in
// the accumulation type Acc), owned seeded operands of one backward problem, and the test bodies
// shared by the three backward kernels (docs/design.md section 14, kinds 1-6). Each kernel's
// backward_*_test.cpp instantiates them for float and double.

#include "attention_case.hpp"
#include "case_data.hpp"
#include "random.hpp"
#include "reference.hpp"
#include "suite_checks.hpp"
#include "tolerance.hpp"

#include <ioattn/dense/backward.hpp>
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
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace ioattn::test {

// --- the naive backward ----------------------------------------------------------------------

/// Packed gradients: dq[((b*heads + h)*n_q + i)*d + c], dk/dv over kv heads and n_k.
template <typename Acc>
struct NaiveGrads {
    std::vector<Acc> dq;
    std::vector<Acc> dk;
    std::vector<Acc> dv;
};

/// Naive backward in Acc arithmetic from the given O and L: D_i = dO_i . O_i,
/// p_ij = exp(scale q_i . k_j - L_i), ds_ij = p_ij (dO_i . v_j - D_i), dQ_i += scale ds_ij k_j,
/// dK_j += scale ds_ij q_i, dV_j += p_ij dO_i over visible pairs; rows with L = -inf take no part.
/// With `absolute`, every term after P is replaced by its magnitude (|dO|, |V|, |O|, |K|, |Q|,
/// ds = p (|dp| + |D|)): the scale of the rounding noise of each gradient element.
template <typename Acc, typename T>
NaiveGrads<Acc> naive_backward(const Problem& problem,
                               const TensorView<const T>& q,
                               const TensorView<const T>& k,
                               const TensorView<const T>& v,
                               const TensorView<const T>& o,
                               const TensorView<const T>& lse,
                               const TensorView<const T>& d_o,
                               bool absolute = false) {
    const auto val = [absolute](T x) {
        const auto y = static_cast<Acc>(x);
        return absolute ? std::fabs(y) : y;
    };
    const Problem p = resolve(problem);
    const std::int64_t group = p.heads / p.kv_heads;
    const auto scale = static_cast<Acc>(p.scale);
    NaiveGrads<Acc> g;
    g.dq.assign(static_cast<std::size_t>(p.batch * p.heads * p.n_q * p.d), Acc(0));
    g.dk.assign(static_cast<std::size_t>(p.batch * p.kv_heads * p.n_k * p.d), Acc(0));
    g.dv.assign(static_cast<std::size_t>(p.batch * p.kv_heads * p.n_k * p.d_v), Acc(0));
    for (std::int64_t b = 0; b < p.batch; ++b)
        for (std::int64_t h = 0; h < p.heads; ++h) {
            const std::int64_t kvh = h / group;
            for (std::int64_t i = 0; i < p.n_q; ++i) {
                const auto L = static_cast<Acc>(at(lse, b, h, i, 0));
                if (L == -std::numeric_limits<Acc>::infinity())
                    continue;
                Acc delta(0); // D_i = rowsum(dO o O)
                for (std::int64_t c = 0; c < p.d_v; ++c)
                    delta += val(at(d_o, b, h, i, c)) * val(at(o, b, h, i, c));
                Acc* dq = g.dq.data() + ((b * p.heads + h) * p.n_q + i) * p.d;
                for (std::int64_t j = 0; j < p.n_k; ++j) {
                    if (!visible(p, i, j))
                        continue;
                    Acc s(0); // P = exp(scale Q K^T - L)
                    for (std::int64_t c = 0; c < p.d; ++c)
                        s += static_cast<Acc>(at(q, b, h, i, c)) *
                             static_cast<Acc>(at(k, b, kvh, j, c));
                    const Acc prob = std::exp(scale * s - L);
                    Acc dp(0); // dP = dO V^T, dS = P o (dP - D)
                    for (std::int64_t c = 0; c < p.d_v; ++c)
                        dp += val(at(d_o, b, h, i, c)) * val(at(v, b, kvh, j, c));
                    const Acc ds =
                        absolute ? prob * (std::fabs(dp) + std::fabs(delta)) : prob * (dp - delta);
                    const std::int64_t key = (b * p.kv_heads + kvh) * p.n_k + j;
                    Acc* dk = g.dk.data() + key * p.d;
                    Acc* dv = g.dv.data() + key * p.d_v;
                    for (std::int64_t c = 0; c < p.d; ++c) {
                        dq[c] += scale * ds * val(at(k, b, kvh, j, c));
                        dk[c] += scale * ds * val(at(q, b, h, i, c));
                    }
                    for (std::int64_t c = 0; c < p.d_v; ++c)
                        dv[c] += prob * val(at(d_o, b, h, i, c));
                }
            }
        }
    return g;
}

// --- operands of one backward problem ----------------------------------------------------------

/// Q, K, V, dO seeded uniform in [-1, 1); O and L from the naive forward in the oracle's
/// precision, rounded to T (so every kernel and the naive backward see the same inputs). Input
/// padding holds NaN, gradient padding a sentinel.
template <typename T>
struct BackwardCase {
    AttentionCase<T> fwd;
    Buffer<T> d_o;
    Buffer<T> d_q;
    Buffer<T> d_k;
    Buffer<T> d_v;

    BackwardCase(const Problem& p, std::uint64_t seed, Padding pad = {})
        : fwd(p, seed, pad)
        , d_o(fwd.problem.batch, fwd.problem.heads, fwd.problem.n_q, fwd.problem.d_v, pad, kNaN)
        , d_q(fwd.problem.batch, fwd.problem.heads, fwd.problem.n_q, fwd.problem.d, pad, kSentinel)
        , d_k(fwd.problem.batch,
              fwd.problem.kv_heads,
              fwd.problem.n_k,
              fwd.problem.d,
              pad,
              kSentinel)
        , d_v(fwd.problem.batch,
              fwd.problem.kv_heads,
              fwd.problem.n_k,
              fwd.problem.d_v,
              pad,
              kSentinel) {
        Rng rng(seed * 7919 + 13);
        d_o.randomize(rng);
        fwd.o.fill_padding(kNaN);
        fwd.lse.fill_padding(kNaN);
        refresh_forward();
    }

    [[nodiscard]] const Problem& problem() const { return fwd.problem; }

    /// Recomputes O and L from the current Q, K, V (after a test changed them).
    void refresh_forward() {
        const auto r = fwd.template naive<Oracle<T>>();
        const Problem& p = fwd.problem;
        for (std::int64_t b = 0; b < p.batch; ++b)
            for (std::int64_t h = 0; h < p.heads; ++h)
                for (std::int64_t i = 0; i < p.n_q; ++i) {
                    const std::int64_t row = (b * p.heads + h) * p.n_q + i;
                    fwd.lse(b, h, i, 0) = static_cast<T>(r.lse[static_cast<std::size_t>(row)]);
                    for (std::int64_t c = 0; c < p.d_v; ++c)
                        fwd.o(b, h, i, c) =
                            static_cast<T>(r.o[static_cast<std::size_t>(row * p.d_v + c)]);
                }
    }

    [[nodiscard]] BackwardArgs<T> args() const {
        BackwardArgs<T> a;
        static_cast<ForwardArgs<T>&>(a) = fwd.args();
        a.d_o = d_o.view;
        a.d_q = d_q.view;
        a.d_k = d_k.view;
        a.d_v = d_v.view;
        return a;
    }

    /// The naive backward of this case's inputs in Acc arithmetic (`absolute`: the noise scale).
    template <typename Acc>
    [[nodiscard]] NaiveGrads<Acc> naive(bool absolute = false) const {
        return naive_backward<Acc, T>(fwd.problem,
                                      fwd.q.view,
                                      fwd.k.view,
                                      fwd.v.view,
                                      fwd.o.view,
                                      fwd.lse.view,
                                      d_o.view,
                                      absolute);
    }

    [[nodiscard]] bool gradients_padding_intact() const {
        return d_q.padding_intact(kSentinel) && d_k.padding_intact(kSentinel) &&
               d_v.padding_intact(kSentinel);
    }

    /// Whether the gradients of two runs are bitwise equal.
    [[nodiscard]] bool same_gradients(const BackwardCase& other) const {
        return bitwise_equal(d_q, other.d_q) && bitwise_equal(d_k, other.d_k) &&
               bitwise_equal(d_v, other.d_v);
    }

    static constexpr T kNaN = std::numeric_limits<T>::quiet_NaN();
    static constexpr T kSentinel = T(-12345);
};

// --- running a kernel ------------------------------------------------------------------------

/// Runs one backward kernel by its own name (the reference ignores tiling and memory).
template <typename T, typename Counter>
void run_backward(const BackwardArgs<T>& args,
                  const Tiling& tiling,
                  const MemoryModel& memory,
                  Counter& counter) {
    switch (tiling.schedule) {
    case Schedule::reference:
        dense::backward_reference<T>(args);
        return;
    case Schedule::fused:
        dense::backward_fused<T, Counter>(args, tiling, memory, counter);
        return;
    case Schedule::materialized:
        dense::backward_materialized<T, Counter>(args, tiling, memory, counter);
        return;
    }
}

/// Runs one kernel uncounted with M exactly the tiling's backward residency.
template <typename T>
void run_backward(const BackwardArgs<T>& args, const Tiling& tiling) {
    NullCounter counter;
    run_backward<T, NullCounter>(
        args, tiling, exact_memory(tiling, args.problem, Pass::backward), counter);
}

// --- shapes and tilings ----------------------------------------------------------------------

/// n_q != n_k both ways (causal: fully masked rows when n_q > n_k), n_q = 1, n_k = 1, d = 1,
/// d_v != d both ways, sizes that are multiples of no tile, GQA and MQA, batch > 1.
inline std::vector<Shape> backward_edge_shapes() {
    return {
        {1, 1, 0, 1, 1, 1, 0, false},
        {1, 1, 0, 1, 37, 16, 0, true},
        {1, 1, 0, 37, 1, 16, 0, false},
        {1, 1, 0, 37, 1, 4, 0, true},
        {1, 1, 0, 29, 53, 1, 0, false},
        {1, 1, 0, 29, 53, 8, 3, true},
        {1, 1, 0, 53, 29, 8, 0, true},
        {1, 1, 0, 31, 17, 4, 13, false},
        {1, 1, 0, 10, 1, 1, 0, true},
        {1, 1, 0, 64, 64, 16, 0, true},
        {2, 4, 2, 33, 45, 8, 0, false},
        {2, 6, 3, 45, 33, 8, 5, true},
        {3, 2, 1, 17, 19, 12, 0, true},
        {1, 2, 1, 70, 50, 24, 0, true},
    };
}

/// Random backward cases: sizes up to 60, d and d_v up to 32.
inline constexpr RandomCases kBackwardRandom{Pass::backward, 60, 32};

// --- checks ------------------------------------------------------------------------------------

/// err(kernel<T>) <= 2*err(naive<T>) + tiny for one gradient, both against the oracle, with
/// tiny (tolerance.hpp) taken at the scale of the terms summed into each element rather than of
/// the result: a gradient holds the difference dP - D of nearly equal sums, so its rounding noise
/// follows the terms (with the result's scale, 1 case in ~1000 fails by chance).
template <typename T, typename N, typename O>
ErrorCheck gradient_rule(const std::vector<double>& kernel,
                         const std::vector<N>& naive_t,
                         const std::vector<O>& oracle,
                         const std::vector<O>& noise_scale) {
    ErrorCheck e = error_rule<T>(kernel, naive_t, oracle);
    e.allowed = 2 * e.naive_error + tiny<T>(noise_scale);
    return e;
}

/// The error rule on dQ, dK, dV against the naive oracle, and untouched gradient padding.
template <typename T>
void check_gradients(const BackwardCase<T>& c) {
    const auto oracle = c.template naive<Oracle<T>>();
    const auto naive_t = c.template naive<T>();
    const auto noise = c.template naive<Oracle<T>>(true);
    const ErrorCheck eq = gradient_rule<T>(c.d_q.packed(), naive_t.dq, oracle.dq, noise.dq);
    const ErrorCheck ek = gradient_rule<T>(c.d_k.packed(), naive_t.dk, oracle.dk, noise.dk);
    const ErrorCheck ev = gradient_rule<T>(c.d_v.packed(), naive_t.dv, oracle.dv, noise.dv);
    const auto show = [](const ErrorCheck& e) {
        std::ostringstream os;
        os << std::scientific << std::setprecision(3) << static_cast<double>(e.kernel_error)
           << " (naive " << static_cast<double>(e.naive_error) << ", allowed "
           << static_cast<double>(e.allowed) << ")";
        return os.str();
    };
    INFO("dQ: err(kernel) = " << show(eq));
    INFO("dK: err(kernel) = " << show(ek));
    INFO("dV: err(kernel) = " << show(ev));
    CHECK(eq.passed());
    CHECK(ek.passed());
    CHECK(ev.passed());
    CHECK(c.gradients_padding_intact());
}

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
