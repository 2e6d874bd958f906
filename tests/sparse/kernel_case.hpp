#pragma once
// Owned operands of one sparse attention problem, a naive working-type oracle (for the error
// rule), and small comparison helpers for the sparse kernel tests.

#include <ioattn/problem.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/view.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace ioattn::sparse::test {

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

template <typename T>
std::vector<double> as_double(const std::vector<T>& x) {
    return {x.begin(), x.end()};
}

/// One batch, 4 query heads on 2 key/value heads, d_v = 5: the backward tests' shape.
inline Problem backward_shape(std::int64_t n_q, std::int64_t n_k, std::int64_t d) {
    Problem p;
    p.batch = 1;
    p.heads = 4;
    p.kv_heads = 2;
    p.n_q = n_q;
    p.n_k = n_k;
    p.d = d;
    p.d_v = 5;
    return p.resolved();
}

} // namespace ioattn::sparse::test
