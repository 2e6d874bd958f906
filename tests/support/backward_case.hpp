#pragma once
// The backward pass in the tests: a naive backward independent of the library (it takes the
// forward's O and L as given, like the kernels, and follows docs/design.md section 4.1 literally in
// the accumulation type Acc), owned seeded operands of one backward problem, running a kernel,
// the edge shapes and the error rule on the gradients (used by backward_suite.hpp).

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

} // namespace ioattn::test
