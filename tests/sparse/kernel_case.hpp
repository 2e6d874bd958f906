#pragma once
// Owned operands of one sparse attention problem, a naive working-type oracle (for the error
// rule), small comparison helpers for the sparse kernel tests, and the checks the backward
// kernels' tests share.

#include "brute_force.hpp"

#include <ioattn/problem.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/sparse_rows.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/view.hpp>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ioattn::sparse::test {

/// A fast memory every tiling of the tests fits in.
inline const MemoryModel kAmple{1 << 22};

template <typename T>
struct Case {
    Problem p;
    std::vector<T> q, k, v, o, lse, d_o, d_q, d_k, d_v;

    Case(Problem problem, std::uint64_t seed)
        : p(problem.resolved()) {
        std::mt19937_64 rng(seed);
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        const auto fill = [&](std::vector<T>& x, std::int64_t n) {
            x.resize(static_cast<std::size_t>(n));
            for (T& e : x)
                e = static_cast<T>(u(rng));
        };
        const std::int64_t bh = p.batch_heads(), kv = p.batch * p.kv_heads;
        fill(q, bh * p.n_q * p.d);
        fill(k, kv * p.n_k * p.d);
        fill(v, kv * p.n_k * p.d_v);
        fill(d_o, bh * p.n_q * p.d_v);
        o.assign(static_cast<std::size_t>(bh * p.n_q * p.d_v), T(0));
        lse.assign(static_cast<std::size_t>(bh * p.n_q), T(0));
        d_q.assign(q.size(), T(0));
        d_k.assign(k.size(), T(0));
        d_v.assign(v.size(), T(0));
    }

    ForwardArgs<T> forward() {
        const std::int64_t b = p.batch, h = p.heads, g = p.kv_heads;
        return {p,
                TensorView<const T>::packed(q.data(), b, h, p.n_q, p.d),
                TensorView<const T>::packed(k.data(), b, g, p.n_k, p.d),
                TensorView<const T>::packed(v.data(), b, g, p.n_k, p.d_v),
                TensorView<T>::packed(o.data(), b, h, p.n_q, p.d_v),
                TensorView<T>::packed(lse.data(), b, h, p.n_q, 1)};
    }

    BackwardArgs<T> backward() {
        BackwardArgs<T> a;
        static_cast<ForwardArgs<T>&>(a) = forward();
        const std::int64_t b = p.batch, h = p.heads, g = p.kv_heads;
        a.d_o = TensorView<const T>::packed(d_o.data(), b, h, p.n_q, p.d_v);
        a.d_q = TensorView<T>::packed(d_q.data(), b, h, p.n_q, p.d);
        a.d_k = TensorView<T>::packed(d_k.data(), b, g, p.n_k, p.d);
        a.d_v = TensorView<T>::packed(d_v.data(), b, g, p.n_k, p.d_v);
        return a;
    }
};

/// Naive sparse attention in the working type T (no max tricks beyond the usual one): the
/// "naive<float>" of the error rule.
template <typename T>
std::vector<double> naive_output(Case<T>& c, const Support& s) {
    const Problem& p = c.p;
    std::vector<double> out;
    for (std::int64_t sl = 0; sl < p.batch_heads(); ++sl) {
        const std::int64_t b = sl / p.heads, h = sl % p.heads, g = h / p.group();
        for (std::int64_t i = 0; i < p.n_q; ++i) {
            const auto cols = s.row(i);
            std::vector<T> w;
            T m = -std::numeric_limits<T>::infinity();
            for (const std::int64_t j : cols) {
                T dot = 0;
                for (std::int64_t x = 0; x < p.d; ++x)
                    dot +=
                        c.q[static_cast<std::size_t>((sl * p.n_q + i) * p.d + x)] *
                        c.k[static_cast<std::size_t>(((b * p.kv_heads + g) * p.n_k + j) * p.d + x)];
                w.push_back(dot * static_cast<T>(p.scale));
                m = std::max(m, w.back());
            }
            T l = 0;
            for (T& e : w)
                l += (e = std::exp(e - m));
            for (std::int64_t x = 0; x < p.d_v; ++x) {
                T acc = 0;
                for (std::size_t y = 0; y < cols.size(); ++y)
                    acc += w[y] * c.v[static_cast<std::size_t>(
                                      ((b * p.kv_heads + g) * p.n_k + cols[y]) * p.d_v + x)];
                out.push_back(cols.empty() ? 0.0 : static_cast<double>(acc / l));
            }
        }
    }
    return out;
}

template <typename A, typename B>
double max_error(const std::vector<A>& a, const std::vector<B>& b) {
    double e = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        e = std::max(e, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    return e;
}

/// Checks a kernel's L against the double reference's: -inf exactly where it is -inf, else
/// within 64 eps of T relative to 1 + |L|.
template <typename T>
void check_lse(const std::vector<T>& lse, const std::vector<double>& oracle) {
    for (std::size_t i = 0; i < lse.size(); ++i) {
        if (std::isinf(oracle[i]))
            CHECK(lse[i] == static_cast<T>(oracle[i]));
        else
            CHECK(std::fabs(static_cast<double>(lse[i]) - oracle[i]) <=
                  64 * static_cast<double>(std::numeric_limits<T>::epsilon()) *
                      (1 + std::fabs(oracle[i])));
    }
}

template <typename T>
std::vector<double> as_double(const std::vector<T>& x) {
    return {x.begin(), x.end()};
}

/// `batch` batches of 4 query heads on 2 key/value heads, d_v = 5: the kernel tests' shape.
inline Problem
kernel_shape(std::int64_t batch, std::int64_t n_q, std::int64_t n_k, std::int64_t d) {
    Problem p;
    p.batch = batch;
    p.heads = 4;
    p.kv_heads = 2;
    p.n_q = n_q;
    p.n_k = n_k;
    p.d = d;
    p.d_v = 5;
    return p.resolved();
}

/// One batch: the backward tests' shape.
inline Problem backward_shape(std::int64_t n_q, std::int64_t n_k, std::int64_t d) {
    return kernel_shape(1, n_q, n_k, d);
}

/// The double reference's outputs on the inputs of c (q, k, v copied).
template <typename T>
Case<double> reference_of(const Problem& p, const Case<T>& c, const Support& s) {
    Case<double> ref(p, 3);
    std::copy(c.q.begin(), c.q.end(), ref.q.begin());
    std::copy(c.k.begin(), c.k.end(), ref.k.begin());
    std::copy(c.v.begin(), c.v.end(), ref.v.begin());
    ioattn::sparse::forward_reference(ref.forward(), s);
    return ref;
}

// --- shared by the backward kernels' tests -------------------------------------------------------

/// Every entry of a row-major matrix as CSR rows (zeros and NaN stored too): an operand given
/// as sparse input that holds what the dense one does, so that a kernel takes its sparse-input
/// paths on the same values (the backward's narrow key blocks, which fold into pass 0 only
/// with dense inputs: folded_keys.hpp).
template <typename T>
ioattn::sparse::SparseRows<T> all_stored(const std::vector<T>& x, std::int64_t cols) {
    const std::int64_t rows = static_cast<std::int64_t>(x.size()) / cols;
    std::vector<std::int64_t> offsets{0}, indices;
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < cols; ++j)
            indices.push_back(j);
        offsets.push_back(static_cast<std::int64_t>(indices.size()));
    }
    return {rows, cols, std::move(offsets), std::move(indices), x};
}

/// Runs the forward reference so that o and lse hold the forward's outputs.
template <typename T>
void run_forward_reference(Case<T>& c, const Support& s) {
    ioattn::sparse::forward_reference(c.forward(), s);
}

/// Rows made of a run of consecutive keys and extra keys around it, the shape the fused kernels'
/// masks take apart (kernels/tile/chunks.hpp): row i (n_k >= 64) sees the run
/// [i + 16, i + 16 + 16 + i % 21), two keys below it (one of them beside its start, a gap of one
/// key) and two above (one beside its end); every 7th row instead sees two runs of 10 keys (a tie
/// for the longest: the first is its run) with extra keys before, between and after them, every
/// 11th row none, and every 13th row every key. Runs shorter than kMinRun share a gathered chunk
/// with the extras on both sides of them when a block holds few rows and a chunk many keys.
inline Support runs_with_extras(std::int64_t n_q, std::int64_t n_k) {
    std::vector<std::int64_t> offsets{0}, cols;
    const auto add = [&](std::int64_t j) {
        if (j >= 0 && j < n_k &&
            (cols.size() == static_cast<std::size_t>(offsets.back()) || cols.back() < j))
            cols.push_back(j);
    };
    for (std::int64_t i = 0; i < n_q; ++i) {
        if (i % 11 == 5) {
        } else if (i % 13 == 6) {
            for (std::int64_t j = 0; j < n_k; ++j)
                add(j);
        } else if (i % 7 == 3) {
            add(0);
            for (std::int64_t j = 0; j < 10; ++j)
                add(2 + j);
            add(14);
            for (std::int64_t j = 0; j < 10; ++j)
                add(n_k / 2 + j);
            add(n_k - 1);
        } else {
            const std::int64_t lo = (i + 16) % (n_k - 48), hi = lo + 16 + i % 21;
            add(i % 5 < lo - 2 ? i % 5 : lo - 4);
            add(lo - 2);
            for (std::int64_t j = lo; j < hi; ++j)
                add(j);
            add(hi + 1);
            add(n_k - 1 - i % 3);
        }
        offsets.push_back(static_cast<std::int64_t>(cols.size()));
    }
    return Support(n_q, n_k, std::move(offsets), std::move(cols));
}

/// The pattern families and (n_q, n_k) of the backward agreement tests.
inline const std::vector<std::string> kBackwardPatterns = {"dense",
                                                           "causal",
                                                           "window:2",
                                                           "global:1+window:2",
                                                           "bigbird:2:1:2",
                                                           "random:0.3",
                                                           "strided:3",
                                                           "block:3:0.5"};
inline const std::vector<std::pair<int, int>> kBackwardSizes = {{11, 11}, {7, 13}, {13, 6}};

/// The double reference's gradients on the inputs of c (Q, K, V, dO copied), O and L of both
/// from the forward reference first (c's are what a backward kernel under test reads).
template <typename T>
Case<double>
reference_gradients(const Problem& p, Case<T>& c, const Support& s, std::uint64_t seed) {
    Case<double> ref(p, seed);
    std::copy(c.q.begin(), c.q.end(), ref.q.begin());
    std::copy(c.k.begin(), c.k.end(), ref.k.begin());
    std::copy(c.v.begin(), c.v.end(), ref.v.begin());
    std::copy(c.d_o.begin(), c.d_o.end(), ref.d_o.begin());
    run_forward_reference(c, s);
    run_forward_reference(ref, s);
    ioattn::sparse::backward_reference(ref.backward(), s);
    return ref;
}

/// dK and dV of c against the reference's where those are finite (2e-5 in float, 1e-13 in
/// double), and non-finite exactly where they are: a backward kernel on inputs with a
/// non-finite row that only some keys may see.
template <typename T>
void check_kv_gradients_where_finite(const Case<T>& c, const Case<double>& ref) {
    const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-13;
    for (const auto& [got, want] : {std::pair{&c.d_k, &ref.d_k}, std::pair{&c.d_v, &ref.d_v}})
        for (std::size_t e = 0; e < got->size(); ++e) {
            CAPTURE(e);
            const double g = static_cast<double>((*got)[e]), w = (*want)[e];
            CHECK(std::isfinite(g) == std::isfinite(w));
            if (std::isfinite(w))
                CHECK(std::abs(g - w) < tol);
        }
}

/// A backward kernel, run by `run(c, s)` on the case of p with `seed`, agrees with
/// backward_reference in double on the same inputs (Q, K, V, dO rounded to T): dQ, dK and dV
/// within 2e-5 (float) or 1e-13 (double).
template <typename T, typename Run>
void check_backward_agrees(const Problem& p, const Support& s, std::uint64_t seed, const Run& run) {
    Case<T> c(p, seed);
    const Case<double> ref = reference_gradients(p, c, s, seed);
    run(c, s);
    const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-13;
    CHECK(max_error(c.d_q, ref.d_q) < tol);
    CHECK(max_error(c.d_k, ref.d_k) < tol);
    CHECK(max_error(c.d_v, ref.d_v) < tol);
}

/// Keys 0 and 1 see every query of 160 (global keys: a block of their own), except that key 1
/// does not see query 70, whose Q row holds inf and NaN (a 9-key band besides).
inline Support global_keys_but_one_query() {
    return from_predicate(160, 160, [](std::int64_t q, std::int64_t k) {
        return k == 0 || (k == 1 && q != 70) || (q - k <= 4 && k - q <= 4);
    });
}

/// A backward kernel run by `run(c, s)` on global_keys_but_one_query keeps query 70's
/// non-finite Q row from key 1: dK, dV of key 1 stay finite, key 0's are not, and every
/// finite gradient agrees with the reference.
template <typename T, typename Run>
void check_global_key_hides_nonfinite_query(const Run& run) {
    const std::int64_t n = 160, i = 70;
    const Problem p = backward_shape(n, n, 5);
    const Support s = global_keys_but_one_query();
    Case<T> c(p, 11);
    for (std::int64_t h = 0; h < p.heads; ++h) {
        const auto at = static_cast<std::size_t>((h * n + i) * p.d);
        c.q[at] = std::numeric_limits<T>::infinity();
        c.q[at + 1] = std::numeric_limits<T>::quiet_NaN();
    }
    const Case<double> ref = reference_gradients(p, c, s, 11);
    run(c, s);
    check_kv_gradients_where_finite(c, ref);
    std::int64_t key1_finite = 0; // the case is what it claims to be
    for (const auto& [got, width] : {std::pair{&c.d_k, p.d}, std::pair{&c.d_v, p.d_v}})
        for (std::size_t e = 0; e < got->size(); ++e)
            key1_finite += static_cast<std::int64_t>(e) / width % n == 1 &&
                                   std::isfinite(static_cast<double>((*got)[e]))
                               ? 1
                               : 0;
    CHECK(key1_finite == p.kv_heads * (p.d + p.d_v));
}

/// Empty rows and a hidden key: on 16 x 12 with rows i % 3 == 0 empty and key 7 allowed to no
/// query (NaN in its K and V rows), a backward kernel run by `run(c, s)` with at most 1 thread and
/// with at most 2 gives bitwise equal gradients, dQ = 0 on the empty rows, no NaN anywhere, and
/// dK = 0 on the hidden key.
template <typename Run>
void check_empty_rows_and_hidden_key(const Run& run) {
    constexpr std::int64_t kHidden = 7; // a key no query may see: NaN in its K and V rows
    const Problem p = backward_shape(16, 12, 5);
    const Support s = from_predicate(16, 12, [](std::int64_t i, std::int64_t j) {
        return i % 3 != 0 && (i + j) % 4 != 0 && j != kHidden;
    });
    Case<float> one(p, 3), two(p, 3);
    for (Case<float>* c : {&one, &two}) {
        for (std::int64_t g = 0; g < p.batch * p.kv_heads; ++g) {
            for (std::int64_t x = 0; x < p.d; ++x)
                c->k[static_cast<std::size_t>((g * p.n_k + kHidden) * p.d + x)] =
                    std::numeric_limits<float>::quiet_NaN();
            for (std::int64_t x = 0; x < p.d_v; ++x)
                c->v[static_cast<std::size_t>((g * p.n_k + kHidden) * p.d_v + x)] =
                    std::numeric_limits<float>::quiet_NaN();
        }
        run_forward_reference(*c, s);
    }
    {
        tbb::global_control gc(tbb::global_control::max_allowed_parallelism, 1);
        run(one, s);
    }
    {
        tbb::global_control gc(tbb::global_control::max_allowed_parallelism, 2);
        run(two, s);
    }
    CHECK(one.d_q == two.d_q);
    CHECK(one.d_k == two.d_k);
    CHECK(one.d_v == two.d_v);
    for (std::int64_t sl = 0; sl < p.batch_heads(); ++sl)
        for (std::int64_t i = 0; i < 16; i += 3)
            for (std::int64_t x = 0; x < p.d; ++x)
                CHECK(one.d_q[static_cast<std::size_t>((sl * 16 + i) * p.d + x)] == 0.0F);
    for (const auto* grad : {&one.d_q, &one.d_k, &one.d_v})
        for (const float g : *grad)
            CHECK(std::isfinite(g));
    for (std::int64_t g = 0; g < p.batch * p.kv_heads; ++g)
        for (std::int64_t x = 0; x < p.d; ++x)
            CHECK(one.d_k[static_cast<std::size_t>((g * p.n_k + kHidden) * p.d + x)] == 0.0F);
}

} // namespace ioattn::sparse::test
