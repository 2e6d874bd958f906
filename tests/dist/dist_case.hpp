#pragma once
// The distributed tests' data: a global problem's operands, the same on every rank (seeded),
// the shard of a rank, a naive oracle over any allowed-pair predicate (forward and backward,
// with the backward's noise scale), the error rule against the single-process kernels, and a
// reduction of every rank's verdict.

#include "tolerance.hpp"

#include <ioattn/dist/sharding.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

#include <tbb/global_control.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <mpi.h>

namespace ioattn::dist::test {

/// The fast memory and the fused tiling of the tests' ranks.
inline const MemoryModel kMemory{1 << 16};
inline const Tiling kTiling{Schedule::fused, 8, 8};

using ioattn::test::ErrorCheck;
using ioattn::test::Oracle;

/// Whether query i may see key j (global indices).
using Allowed = std::function<bool(std::int64_t, std::int64_t)>;

inline int world_rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

inline int world_size() {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

/// True iff `ok` holds on every rank (collective).
inline bool all_ranks(bool ok) {
    int mine = ok ? 1 : 0;
    int all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all == 1;
}

/// Packed [rows][cols] slices of a [batch][heads][n][cols] tensor as a vector.
template <typename T>
struct Tensor {
    std::int64_t batch = 0, heads = 0, rows = 0, cols = 0;
    std::vector<T> data;

    Tensor() = default;

    Tensor(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t c, T fill = T(0))
        : batch(b)
        , heads(h)
        , rows(n)
        , cols(c)
        , data(static_cast<std::size_t>(b * h * n * c), fill) {}

    T& operator()(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) {
        return data[static_cast<std::size_t>(((b * heads + h) * rows + i) * cols + c)];
    }

    const T& operator()(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) const {
        return data[static_cast<std::size_t>(((b * heads + h) * rows + i) * cols + c)];
    }

    TensorView<T> view() { return TensorView<T>::packed(data.data(), batch, heads, rows, cols); }

    [[nodiscard]] TensorView<const T> cview() const {
        return TensorView<const T>::packed(data.data(), batch, heads, rows, cols);
    }

    /// The rows a rank holds under `s`, in its local order.
    [[nodiscard]] Tensor shard(const Sharding& s, int rank) const {
        Tensor out(batch, heads, s.rows(rank), cols);
        for (std::int64_t b = 0; b < batch; ++b)
            for (std::int64_t h = 0; h < heads; ++h)
                for (std::int64_t l = 0; l < out.rows; ++l)
                    for (std::int64_t c = 0; c < cols; ++c)
                        out(b, h, l, c) = (*this)(b, h, s.global_row(rank, l), c);
        return out;
    }

    template <typename U>
    [[nodiscard]] Tensor<U> as() const {
        Tensor<U> out(batch, heads, rows, cols);
        for (std::size_t e = 0; e < data.size(); ++e)
            out.data[e] = static_cast<U>(data[e]);
        return out;
    }
};

/// Forward outputs in type A.
template <typename A>
struct Outputs {
    Tensor<A> o, lse;
};

/// Gradients in type A.
template <typename A>
struct Grads {
    Tensor<A> dq, dk, dv;
};

/// Naive forward in Acc over the allowed pairs (a row with none: O = 0, L = -inf).
template <typename Acc, typename T>
Outputs<Acc> oracle_forward(const Problem& p,
                            const Tensor<T>& q,
                            const Tensor<T>& k,
                            const Tensor<T>& v,
                            const Allowed& allowed) {
    Outputs<Acc> r{Tensor<Acc>(p.batch, p.heads, p.n_q, p.d_v),
                   Tensor<Acc>(p.batch, p.heads, p.n_q, 1)};
    const auto scale = static_cast<Acc>(p.scale);
    std::vector<Acc> s(static_cast<std::size_t>(p.n_k));
    for (std::int64_t b = 0; b < p.batch; ++b)
        for (std::int64_t h = 0; h < p.heads; ++h)
            for (std::int64_t i = 0; i < p.n_q; ++i) {
                const std::int64_t g = h / p.group();
                Acc m = -std::numeric_limits<Acc>::infinity();
                for (std::int64_t j = 0; j < p.n_k; ++j) {
                    if (!allowed(i, j))
                        continue;
                    Acc dot(0); // S = scale Q K^T
                    for (std::int64_t c = 0; c < p.d; ++c)
                        dot += static_cast<Acc>(q(b, h, i, c)) * static_cast<Acc>(k(b, g, j, c));
                    s[static_cast<std::size_t>(j)] = scale * dot;
                    m = std::fmax(m, scale * dot);
                }
                if (m == -std::numeric_limits<Acc>::infinity()) {
                    r.lse(b, h, i, 0) = m;
                    continue;
                }
                Acc l(0); // O = exp(S - m) V / l, L = m + log l
                for (std::int64_t j = 0; j < p.n_k; ++j) {
                    if (!allowed(i, j))
                        continue;
                    const Acc e = std::exp(s[static_cast<std::size_t>(j)] - m);
                    l += e;
                    for (std::int64_t c = 0; c < p.d_v; ++c)
                        r.o(b, h, i, c) += e * static_cast<Acc>(v(b, g, j, c));
                }
                for (std::int64_t c = 0; c < p.d_v; ++c)
                    r.o(b, h, i, c) /= l;
                r.lse(b, h, i, 0) = m + std::log(l);
            }
    return r;
}

/// Naive backward in Acc from the given O, L over the allowed pairs; with `absolute` every term
/// after P is taken by magnitude: the scale of each gradient element's rounding noise.
template <typename Acc, typename T>
Grads<Acc> oracle_backward(const Problem& p,
                           const Tensor<T>& q,
                           const Tensor<T>& k,
                           const Tensor<T>& v,
                           const Tensor<T>& o,
                           const Tensor<T>& lse,
                           const Tensor<T>& d_o,
                           const Allowed& allowed,
                           bool absolute = false) {
    const auto val = [absolute](T x) {
        const auto y = static_cast<Acc>(x);
        return absolute ? std::fabs(y) : y;
    };
    Grads<Acc> g{Tensor<Acc>(p.batch, p.heads, p.n_q, p.d),
                 Tensor<Acc>(p.batch, p.kv_heads, p.n_k, p.d),
                 Tensor<Acc>(p.batch, p.kv_heads, p.n_k, p.d_v)};
    const auto scale = static_cast<Acc>(p.scale);
    for (std::int64_t b = 0; b < p.batch; ++b)
        for (std::int64_t h = 0; h < p.heads; ++h)
            for (std::int64_t i = 0; i < p.n_q; ++i) {
                const auto L = static_cast<Acc>(lse(b, h, i, 0));
                if (L == -std::numeric_limits<Acc>::infinity())
                    continue;
                const std::int64_t kvh = h / p.group();
                Acc delta(0); // D = rowsum(dO o O)
                for (std::int64_t c = 0; c < p.d_v; ++c)
                    delta += val(d_o(b, h, i, c)) * val(o(b, h, i, c));
                for (std::int64_t j = 0; j < p.n_k; ++j) {
                    if (!allowed(i, j))
                        continue;
                    Acc s(0); // P = exp(scale S - L), dP = dO V^T, dS = P o (dP - D)
                    for (std::int64_t c = 0; c < p.d; ++c)
                        s += static_cast<Acc>(q(b, h, i, c)) * static_cast<Acc>(k(b, kvh, j, c));
                    const Acc prob = std::exp(scale * s - L);
                    Acc dp(0);
                    for (std::int64_t c = 0; c < p.d_v; ++c)
                        dp += val(d_o(b, h, i, c)) * val(v(b, kvh, j, c));
                    const Acc ds =
                        absolute ? prob * (std::fabs(dp) + std::fabs(delta)) : prob * (dp - delta);
                    for (std::int64_t c = 0; c < p.d; ++c) {
                        g.dq(b, h, i, c) += scale * ds * val(k(b, kvh, j, c));
                        g.dk(b, kvh, j, c) += scale * ds * val(q(b, h, i, c));
                    }
                    for (std::int64_t c = 0; c < p.d_v; ++c)
                        g.dv(b, kvh, j, c) += prob * val(d_o(b, h, i, c));
                }
            }
    return g;
}

/// The operands of one global problem, identical on every rank: Q, K, V, dO seeded uniform in
/// [-1, 1), and O, L from the oracle forward rounded to T (the backward's given inputs).
template <typename T>
struct Global {
    Problem p;
    Tensor<T> q, k, v, d_o, o, lse;

    Global(const Problem& problem, std::uint64_t seed, const Allowed& allowed)
        : p(problem.resolved())
        , q(p.batch, p.heads, p.n_q, p.d)
        , k(p.batch, p.kv_heads, p.n_k, p.d)
        , v(p.batch, p.kv_heads, p.n_k, p.d_v)
        , d_o(p.batch, p.heads, p.n_q, p.d_v) {
        std::mt19937_64 rng(seed);
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        for (Tensor<T>* t : {&q, &k, &v, &d_o})
            for (T& x : t->data)
                x = static_cast<T>(u(rng));
        const Outputs<Oracle<T>> f = oracle_forward<Oracle<T>>(p, q, k, v, allowed);
        o = f.o.template as<T>();
        lse = f.lse.template as<T>();
    }
};

/// err(dist) <= 2 err(single-process kernel) + tiny, both against the oracle, on one rank's
/// rows; tiny at the scale of `noise` (the oracle itself for outputs, the noise scale for
/// gradients).
template <typename T, typename A>
ErrorCheck agrees(const Tensor<T>& dist,
                  const Tensor<T>& single,
                  const Tensor<A>& oracle,
                  const Tensor<A>& noise) {
    ErrorCheck e = ioattn::test::error_rule<T>(dist.data, single.data, oracle.data);
    e.allowed = 2 * e.naive_error + ioattn::test::tiny<T>(noise.data);
    return e;
}

/// fn() with at most `threads` oneTBB workers (threads <= 0: no cap).
template <typename Fn>
auto with_parallelism(int threads, Fn fn) -> decltype(fn()) {
    if (threads <= 0)
        return fn();
    tbb::global_control cap(tbb::global_control::max_allowed_parallelism,
                            static_cast<std::size_t>(threads));
    return fn();
}

/// Bitwise equality of two tensors (NaN patterns included).
template <typename T>
bool bitwise(const Tensor<T>& a, const Tensor<T>& b) {
    if (a.data.size() != b.data.size())
        return false;
    for (std::size_t e = 0; e < a.data.size(); ++e)
        if (std::memcmp(&a.data[e], &b.data[e], sizeof(T)) != 0)
            return false;
    return true;
}

} // namespace ioattn::dist::test
