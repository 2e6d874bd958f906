#pragma once
// Bad values in the dense forward suites (docs/design.md section 14): NaN in Q or K, NaN or Inf
// in masked V, -inf and huge scores, fully masked rows. Instantiated through forward_suite.hpp.

#include "forward_kernel_run.hpp"

namespace ioattn::test {

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

} // namespace ioattn::test
