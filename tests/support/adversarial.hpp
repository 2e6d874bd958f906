#pragma once
// Adversarial inputs for online softmax and its backward and the rule they are judged
// by. A case is a small seeded problem of one kind: scores spanning 1e-30..1e30, one enormous
// key, identical keys, fully masked rows, a NaN or an infinity in one element of Q, K, V or dO,
// denormal scores and values, n_k = 1 and d = 1, a scale that rounds to 0 in float, a huge
// scale. The mask (which query sees which key) is causal or dense for the dense kernels, random
// with empty rows for the sparse ones. The oracle is the naive computation in Oracle<T>
// (double for float, long double for double) over the mask; naive<T> is the same code in T.
// The rule they are judged by and the runner are in adversarial_rule.hpp.
// Rule, per output row (a row of O, L, dQ, dK or dV): where the oracle is finite the kernel is
// finite and err(kernel) <= 2 err(naive<T>) + tiny, tiny = 4 eps(T) |row| + noise +
// 8 min_normal(T) with noise the row's largest rounding bound (see Outputs); where the oracle is not
// finite (it depends on a NaN or an infinity, or overflows) anything goes.

#include "random.hpp"

#include <ioattn/problem.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace ioattn::test::adversarial {

inline constexpr const char* kKinds[] = {"wide scores",
                                         "one enormous key",
                                         "identical keys",
                                         "fully masked rows",
                                         "NaN in one element",
                                         "infinity in one element",
                                         "denormals",
                                         "n_k = 1, d = 1",
                                         "scale rounds to 0",
                                         "huge scale"};
inline constexpr int kKindCount = 10;

/// Packed operands ([b][h][i][c]) and the mask of one case.
template <typename T>
struct Case {
    Problem p; ///< resolved
    int kind = 0;
    std::vector<char> allowed; ///< n_q x n_k, shared by every head
    std::vector<T> q, k, v, d_o;

    [[nodiscard]] bool sees(std::int64_t i, std::int64_t j) const {
        return allowed[static_cast<std::size_t>(i * p.n_k + j)] != 0;
    }
};

/// Outputs in packed layout, in type A, and beside each a bound on how far rounding in T can
/// move it. Each probability is exp(e) of an exponent e (S - m forward, S - L backward) that T
/// computes within delta = 4 eps(T) (|S|_abs + |m| or |L|), |S|_abs = scale sum_c |q_c k_c|;
/// so P lies in [exp(min(e - delta, 0)), exp(min(e + delta, 0))], width u. The bounds are then
/// first order in u and eps (P_hi the top of P's interval): O moves by sum_j (u_j |V_j - O| +
/// eps P_hi |V_j|) / l, L by eps |S_max|_abs + sum_j u_j / l, dV by (u + eps P_hi) |dO|, dS by
/// u |dP - D| + eps P_hi (|dP|_abs + |D|_abs), and dQ, dK by scale (that + eps |dS|) |K| resp.
/// |Q|. Ill-conditioned rows (near-tied scores of 1e30) get a
/// wide bound; well-separated ones (one enormous key) do not.
template <typename A>
struct Outputs {
    std::vector<A> o, lse, d_q, d_k, d_v;
    std::vector<A> o_noise, lse_noise, d_q_noise, d_k_noise, d_v_noise;
};

namespace detail {

inline std::size_t at(std::int64_t x) {
    return static_cast<std::size_t>(x);
}

/// 10^e for a uniform e in [lo, hi], with a random sign.
inline double magnitude(Rng& rng, double lo, double hi) {
    const double m = std::pow(10.0, rng.uniform(lo, hi));
    return rng.uniform_int(0, 1) == 0 ? m : -m;
}

} // namespace detail

/// The case of `seed`: kind seed % kKindCount; `sparse` draws a random mask with empty rows.
template <typename T>
Case<T> make_case(std::uint64_t seed, bool sparse) {
    Rng rng(seed * 2654435761ULL + 17);
    Case<T> c;
    c.kind = static_cast<int>(seed % kKindCount);
    Problem& p = c.p;
    p.batch = rng.uniform_int(1, 2);
    p.kv_heads = 1;
    p.heads = rng.uniform_int(1, 2);
    p.n_q = rng.uniform_int(1, 20);
    p.n_k = rng.uniform_int(1, 20);
    p.d = rng.uniform_int(1, 9);
    p.d_v = rng.uniform_int(1, 9);
    p.causal = !sparse && rng.uniform_int(0, 1) == 1;
    const bool float_like = sizeof(T) == 4;
    if (c.kind == 3 && !sparse) { // causal with n_q > n_k: the first rows see nothing
        p.causal = true;
        p.n_q = p.n_k + rng.uniform_int(1, 6);
    }
    if (c.kind == 7) {
        p.n_k = 1;
        p.d = 1;
    }
    if (c.kind == 8)
        p.scale = 1e-300; // validate() wants > 0; in float scale * log2(e) is 0
    if (c.kind == 9)
        p.scale = float_like ? 1e20 : 1e150;
    p = p.resolved();
    c.allowed.assign(detail::at(p.n_q * p.n_k), 1);
    for (std::int64_t i = 0; i < p.n_q; ++i)
        for (std::int64_t j = 0; j < p.n_k; ++j) {
            char& a = c.allowed[detail::at(i * p.n_k + j)];
            if (!sparse)
                a = static_cast<char>(p.visible_keys(i) > j ? 1 : 0);
            else
                a = static_cast<char>(rng.uniform(0, 1) < 0.5 ? 1 : 0);
        }
    if (sparse && (c.kind == 3 || rng.uniform_int(0, 3) == 0)) // empty rows
        for (std::int64_t i = 0; i < p.n_q; i += rng.uniform_int(1, 3))
            std::fill_n(c.allowed.begin() + static_cast<std::ptrdiff_t>(i * p.n_k), p.n_k, 0);
    const std::int64_t bh = p.batch * p.heads, bkv = p.batch * p.kv_heads;
    c.q.resize(detail::at(bh * p.n_q * p.d));
    c.k.resize(detail::at(bkv * p.n_k * p.d));
    c.v.resize(detail::at(bkv * p.n_k * p.d_v));
    c.d_o.resize(detail::at(bh * p.n_q * p.d_v));
    for (auto* x : {&c.q, &c.k, &c.v, &c.d_o})
        rng.fill(*x);
    switch (c.kind) {
    case 0: // scores spanning 1e-30 .. 1e30: rows of Q and K scaled by 10^[-15, 15]
        for (std::int64_t r = 0; r < bh * p.n_q; ++r) {
            const double m = detail::magnitude(rng, -15, 15);
            for (std::int64_t x = 0; x < p.d; ++x)
                c.q[detail::at(r * p.d + x)] = static_cast<T>(m * rng.uniform(0.5, 1.0));
        }
        for (std::int64_t r = 0; r < bkv * p.n_k; ++r) {
            const double m = detail::magnitude(rng, -15, 15);
            for (std::int64_t x = 0; x < p.d; ++x)
                c.k[detail::at(r * p.d + x)] = static_cast<T>(m * rng.uniform(0.5, 1.0));
        }
        break;
    case 1: { // one key row 1e15 times the others
        const std::int64_t r = rng.uniform_int(0, bkv * p.n_k - 1);
        for (std::int64_t x = 0; x < p.d; ++x)
            c.k[detail::at(r * p.d + x)] *= T(1e15);
        break;
    }
    case 2: // every key the same: ties everywhere
        for (std::int64_t r = 1; r < bkv * p.n_k; ++r)
            std::copy_n(c.k.begin(), p.d, c.k.begin() + static_cast<std::ptrdiff_t>(r * p.d));
        break;
    case 4:
    case 5: { // one element of Q, K, V or dO
        std::vector<T>* target[] = {&c.q, &c.k, &c.v, &c.d_o};
        std::vector<T>& x = *target[rng.uniform_int(0, 3)];
        const T bad = c.kind == 4 ? std::numeric_limits<T>::quiet_NaN()
                                  : (rng.uniform_int(0, 1) == 0 ? T(1) : T(-1)) *
                                        std::numeric_limits<T>::infinity();
        x[detail::at(rng.uniform_int(0, static_cast<std::int64_t>(x.size()) - 1))] = bad;
        break;
    }
    case 6: { // denormal scores (Q, K tiny), denormal V and dO entries
        const double tiny_qk = float_like ? 1e-21 : 1e-160;
        const double tiny_v = float_like ? 1e-40 : 1e-310;
        for (T& e : c.q)
            e = static_cast<T>(static_cast<double>(e) * tiny_qk);
        for (T& e : c.k)
            e = static_cast<T>(static_cast<double>(e) * tiny_qk);
        for (auto* x : {&c.v, &c.d_o})
            for (T& e : *x)
                if (rng.uniform_int(0, 1) == 0)
                    e = static_cast<T>(static_cast<double>(e) * tiny_v);
        break;
    }
    default:
        break;
    }
    return c;
}

/// Naive forward (O, L) in A over the case's mask, and their noise scales.
template <typename A, typename T>
void naive_forward(const Case<T>& c, Outputs<A>& out) {
    const Problem& p = c.p;
    const std::int64_t group = p.heads / p.kv_heads;
    const auto scale = static_cast<A>(p.scale);
    out.o.assign(detail::at(p.batch * p.heads * p.n_q * p.d_v), A(0));
    out.lse.assign(detail::at(p.batch * p.heads * p.n_q), A(0));
    out.o_noise = out.o;
    out.lse_noise = out.lse;
    const auto eps = static_cast<A>(std::numeric_limits<T>::epsilon());
    std::vector<A> s(detail::at(p.n_k)), sa(detail::at(p.n_k)), u(detail::at(p.n_k));
    const auto qv = [&](std::int64_t row, std::int64_t x) {
        return static_cast<A>(c.q[detail::at(row * p.d + x)]);
    };
    const auto kv_at =
        [&](const std::vector<T>& t, std::int64_t key, std::int64_t w, std::int64_t x) {
            return static_cast<A>(t[detail::at(key * w + x)]);
        };
    for (std::int64_t sl = 0; sl < p.batch * p.heads; ++sl) {
        const std::int64_t kv = sl / p.heads * p.kv_heads + sl % p.heads / group;
        for (std::int64_t i = 0; i < p.n_q; ++i) {
            const std::int64_t row = sl * p.n_q + i;
            A m = -std::numeric_limits<A>::infinity();
            bool any = false;
            for (std::int64_t j = 0; j < p.n_k; ++j) {
                if (!c.sees(i, j))
                    continue;
                A dot(0), mag(0);
                for (std::int64_t x = 0; x < p.d; ++x) {
                    const A term = qv(row, x) * kv_at(c.k, kv * p.n_k + j, p.d, x);
                    dot += term;
                    mag += std::fabs(term);
                }
                s[detail::at(j)] = scale * dot; // S = scale Q K^T
                sa[detail::at(j)] = scale * mag;
                m = std::max(m, s[detail::at(j)]);
                any = true;
            }
            if (!any) { // no visible key: O = 0, L = -inf
                out.lse[detail::at(row)] = -std::numeric_limits<A>::infinity();
                continue;
            }
            A l(0), sa_max(0);
            for (std::int64_t j = 0; j < p.n_k; ++j) {
                if (!c.sees(i, j))
                    continue;
                if (s[detail::at(j)] == m)
                    sa_max = std::max(sa_max, sa[detail::at(j)]);
                u[detail::at(j)] = s[detail::at(j)] - m;                  // the exponent e
                l += (s[detail::at(j)] = std::exp(s[detail::at(j)] - m)); // exp(S - m)
            }
            // the width of each P's interval: the exponent S - m is known to within delta
            A lse_noise = eps * sa_max;
            for (std::int64_t j = 0; j < p.n_k; ++j) {
                if (!c.sees(i, j))
                    continue;
                const A e = u[detail::at(j)], delta = 4 * eps * (sa[detail::at(j)] + sa_max);
                u[detail::at(j)] = e == -std::numeric_limits<A>::infinity() // P = 0 exactly
                                       ? A(0)
                                       : std::exp(std::min(e + delta, A(0))) - std::exp(e - delta);
                lse_noise += u[detail::at(j)] / l;
            }
            for (std::int64_t x = 0; x < p.d_v; ++x) {
                A acc(0);
                for (std::int64_t j = 0; j < p.n_k; ++j)
                    if (c.sees(i, j))
                        acc += s[detail::at(j)] * kv_at(c.v, kv * p.n_k + j, p.d_v, x);
                const A o = acc / l;
                A noise(0);
                for (std::int64_t j = 0; j < p.n_k; ++j)
                    if (c.sees(i, j)) { // P moves within u; the sum P V rounds at eps P |V|
                        const A vj = kv_at(c.v, kv * p.n_k + j, p.d_v, x);
                        noise += (u[detail::at(j)] * std::fabs(vj - o) +
                                  eps * (s[detail::at(j)] + u[detail::at(j)]) * std::fabs(vj)) /
                                 l;
                    }
                out.o[detail::at(row * p.d_v + x)] = o;
                out.o_noise[detail::at(row * p.d_v + x)] = noise;
            }
            out.lse[detail::at(row)] = m + std::log(l); // L = m + log(l)
            out.lse_noise[detail::at(row)] = lse_noise;
        }
    }
}

/// Naive backward (dQ, dK, dV) in A over the case's mask, from the given O and L (in T, as the
/// kernels get them), and their noise scales.
template <typename A, typename T>
void naive_backward(const Case<T>& c,
                    const std::vector<T>& o,
                    const std::vector<T>& lse,
                    Outputs<A>& out) {
    const Problem& p = c.p;
    const std::int64_t group = p.heads / p.kv_heads;
    out.d_q.assign(c.q.size(), A(0));
    out.d_k.assign(c.k.size(), A(0));
    out.d_v.assign(c.v.size(), A(0));
    out.d_q_noise = out.d_q;
    out.d_k_noise = out.d_k;
    out.d_v_noise = out.d_v;
    const auto scale = static_cast<A>(p.scale);
    const auto eps = static_cast<A>(std::numeric_limits<T>::epsilon());
    const auto val = [](const std::vector<T>& t, std::int64_t row, std::int64_t w, std::int64_t x) {
        return static_cast<A>(t[detail::at(row * w + x)]);
    };
    for (std::int64_t sl = 0; sl < p.batch * p.heads; ++sl) {
        const std::int64_t kv = sl / p.heads * p.kv_heads + sl % p.heads / group;
        for (std::int64_t i = 0; i < p.n_q; ++i) {
            const std::int64_t row = sl * p.n_q + i;
            const auto l_i = static_cast<A>(lse[detail::at(row)]);
            if (l_i == -std::numeric_limits<A>::infinity())
                continue;             // no visible key: no gradient
            A delta(0), delta_abs(0); // D = rowsum(dO o O)
            for (std::int64_t x = 0; x < p.d_v; ++x) {
                delta += val(c.d_o, row, p.d_v, x) * val(o, row, p.d_v, x);
                delta_abs += std::fabs(val(c.d_o, row, p.d_v, x) * val(o, row, p.d_v, x));
            }
            for (std::int64_t j = 0; j < p.n_k; ++j) {
                if (!c.sees(i, j))
                    continue;
                const std::int64_t key = kv * p.n_k + j;
                A dot(0), mag(0);
                for (std::int64_t x = 0; x < p.d; ++x) {
                    dot += val(c.q, row, p.d, x) * val(c.k, key, p.d, x);
                    mag += std::fabs(val(c.q, row, p.d, x) * val(c.k, key, p.d, x));
                }
                // P = exp(scale S - L) <= 1 (L, rounded to T, may sit below the largest S)
                const A e = std::min(scale * dot - l_i, A(0));
                const A pr = std::exp(e);
                const A width = 4 * eps * (scale * mag + std::fabs(l_i));
                const bool zero = e == -std::numeric_limits<A>::infinity();       // S = -inf: P = 0
                const A p_hi = zero ? A(0) : std::exp(std::min(e + width, A(0))); // largest P
                const A u = zero ? A(0) : p_hi - std::exp(e - width);
                A dp(0), dp_abs(0); // dP = dO V^T
                for (std::int64_t x = 0; x < p.d_v; ++x) {
                    const A g = val(c.d_o, row, p.d_v, x);
                    dp += g * val(c.v, key, p.d_v, x);
                    dp_abs += std::fabs(g * val(c.v, key, p.d_v, x));
                    out.d_v[detail::at(key * p.d_v + x)] += pr * g; // dV = P^T dO
                    out.d_v_noise[detail::at(key * p.d_v + x)] += (u + eps * p_hi) * std::fabs(g);
                }
                const A ds = pr * (dp - delta); // dS = P o (dP - D)
                const A ds_noise = u * std::fabs(dp - delta) + eps * p_hi * (dp_abs + delta_abs);
                for (std::int64_t x = 0; x < p.d; ++x) {
                    out.d_q[detail::at(row * p.d + x)] += scale * ds * val(c.k, key, p.d, x);
                    out.d_k[detail::at(key * p.d + x)] += scale * ds * val(c.q, row, p.d, x);
                    out.d_q_noise[detail::at(row * p.d + x)] +=
                        scale * (ds_noise + eps * std::fabs(ds)) * std::fabs(val(c.k, key, p.d, x));
                    out.d_k_noise[detail::at(key * p.d + x)] +=
                        scale * (ds_noise + eps * std::fabs(ds)) * std::fabs(val(c.q, row, p.d, x));
                }
            }
        }
    }
}

} // namespace ioattn::test::adversarial
