#pragma once
// Naive attention for the tests, independent of the library's kernels and helpers: it fills the
// problem's defaults itself, materializes every score row, applies softmax with max subtraction
// and multiplies by V, all in the accumulation type Acc (double for the oracle, the working type
// for the "naive<float>" term of the error rule, long double to judge double kernels).
//
// Conventions (docs/design.md section 1, ioattn/problem.hpp): causal masking is bottom-right
// aligned, query i sees key j iff j <= i + (n_k - n_q); query head h reads key/value head h /
// (heads / kv_heads); a row with no visible key gets O = 0 and L = -inf.

#include <ioattn/problem.hpp>
#include <ioattn/view.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ioattn::test {

/// The problem with its defaults filled in by the test's own rules (no library call).
inline Problem resolve(Problem p) {
    if (p.kv_heads == 0)
        p.kv_heads = p.heads;
    if (p.d_v == 0)
        p.d_v = p.d;
    if (p.scale == 0.0)
        p.scale = 1.0 / std::sqrt(static_cast<double>(p.d));
    return p;
}

/// Whether query i sees key j.
inline bool visible(const Problem& p, std::int64_t i, std::int64_t j) {
    return !p.causal || j <= i + (p.n_k - p.n_q);
}

/// Element (b, h, i, c) of a strided view, by the test's own index arithmetic.
template <typename T>
T at(const TensorView<T>& t, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t c) {
    return t.data[b * t.stride_batch + h * t.stride_head + i * t.stride_row + c];
}

/// Packed outputs of the naive computation: o[((b*heads + h)*n_q + i)*d_v + c], lse[(b*heads +
/// h)*n_q + i].
template <typename Acc>
struct NaiveResult {
    std::vector<Acc> o;
    std::vector<Acc> lse;
};

/// Naive attention in Acc arithmetic on inputs of type T.
template <typename Acc, typename T>
NaiveResult<Acc> naive_forward(const Problem& problem,
                               const TensorView<const T>& q,
                               const TensorView<const T>& k,
                               const TensorView<const T>& v) {
    const Problem p = resolve(problem);
    const std::int64_t group = p.heads / p.kv_heads;
    const Acc scale = static_cast<Acc>(p.scale);
    NaiveResult<Acc> r;
    r.o.assign(static_cast<std::size_t>(p.batch * p.heads * p.n_q * p.d_v), Acc(0));
    r.lse.assign(static_cast<std::size_t>(p.batch * p.heads * p.n_q), Acc(0));
    std::vector<Acc> s(static_cast<std::size_t>(p.n_k));
    for (std::int64_t b = 0; b < p.batch; ++b) {
        for (std::int64_t h = 0; h < p.heads; ++h) {
            const std::int64_t kvh = h / group;
            for (std::int64_t i = 0; i < p.n_q; ++i) {
                const std::int64_t row = (b * p.heads + h) * p.n_q + i;
                Acc* o = r.o.data() + row * p.d_v;
                // S = scale * Q K^T on the visible keys; m = row max
                Acc m = -std::numeric_limits<Acc>::infinity();
                std::int64_t n_visible = 0;
                for (std::int64_t j = 0; j < p.n_k; ++j) {
                    if (!visible(p, i, j))
                        continue;
                    Acc dot(0);
                    for (std::int64_t c = 0; c < p.d; ++c)
                        dot += static_cast<Acc>(at(q, b, h, i, c)) *
                               static_cast<Acc>(at(k, b, kvh, j, c));
                    s[static_cast<std::size_t>(j)] = scale * dot;
                    m = std::fmax(m, s[static_cast<std::size_t>(j)]); // NaN scores reach O via exp
                    ++n_visible;
                }
                if (n_visible == 0) {
                    r.lse[static_cast<std::size_t>(row)] = -std::numeric_limits<Acc>::infinity();
                    continue;
                }
                // P = exp(S - m), l = rowsum(P), O = P V / l, L = m + log(l)
                Acc l(0);
                for (std::int64_t j = 0; j < p.n_k; ++j) {
                    if (!visible(p, i, j))
                        continue;
                    const Acc e = std::exp(s[static_cast<std::size_t>(j)] - m);
                    l += e;
                    for (std::int64_t c = 0; c < p.d_v; ++c)
                        o[c] += e * static_cast<Acc>(at(v, b, kvh, j, c));
                }
                for (std::int64_t c = 0; c < p.d_v; ++c)
                    o[c] /= l;
                r.lse[static_cast<std::size_t>(row)] = m + std::log(l);
            }
        }
    }
    return r;
}

} // namespace ioattn::test
