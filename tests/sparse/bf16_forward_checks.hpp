#pragma once
// The checks the native bf16 sparse forwards' tests share (forward_fused_bf16_test.cpp, the tile
// variant; forward_element_bf16_test.cpp, the element variant): the double reference over a
// support on a run's bf16 inputs, and O and L against it within the tolerance derived from
// bf16's output rounding (u = 2^-8) and fp32 accumulation (u32 = 2^-24):
//   max|O - O_ref| <= (u + 2 (n_k + d) u32) max|O_ref| + u max|V|,
//   |L - L_ref| <= 2 (n_k + d) u32 (1 + |L_ref|);
// the rows without keys, and the non-finite V values set in a run and the rows they may reach.

#include "bf16_native.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/support.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace ioattn::test {

inline constexpr double kU16 = 0x1p-8;
inline constexpr double kU32 = 0x1p-24;

/// The double reference over the support on the run's inputs.
struct SparseReference {
    std::vector<double> o, lse;

    SparseReference(const ForwardRun& r, const sparse::Support& s) {
        std::vector<double> q = widened(r.q), k = widened(r.k), v = widened(r.v);
        o.assign(r.o.size(), 0.0);
        lse.assign(r.lse.size(), 0.0);
        sparse::forward_reference(
            ForwardArgs<double>::packed(r.p, q.data(), k.data(), v.data(), o.data(), lse.data()),
            s);
    }
};

inline double max_finite_abs(const std::vector<double>& x) {
    double m = 0;
    for (const double e : x)
        if (std::isfinite(e))
            m = std::max(m, std::fabs(e));
    return m;
}

/// Checks O and L of `r` against the reference within the derived tolerance where the
/// reference is finite (and that O is not finite where it is not); returns max|O - O_ref| /
/// max|O_ref|.
inline double check_accuracy(const ForwardRun& r, const SparseReference& ref) {
    const double acc32 = 2.0 * static_cast<double>(r.p.n_k + r.p.d) * kU32;
    const double top = max_finite_abs(ref.o);
    const double tol = (kU16 + acc32) * top + kU16 * max_finite_abs(widened(r.v));
    double err = 0;
    bool inf_ok = true;
    for (std::size_t i = 0; i < r.o.size(); ++i) {
        const double got = static_cast<double>(static_cast<float>(r.o[i]));
        if (!std::isfinite(ref.o[i])) {
            inf_ok = inf_ok && !std::isfinite(got);
            continue;
        }
        const double e = std::fabs(got - ref.o[i]);
        err = std::isnan(e) || e > err ? e : err;
    }
    CHECK(inf_ok);
    CHECK(err <= tol);
    bool l_ok = true;
    for (std::size_t i = 0; i < r.lse.size(); ++i) {
        const double l = static_cast<double>(r.lse[i]), want = ref.lse[i];
        const bool same_inf = std::isinf(l) && l == want;
        l_ok = l_ok && (same_inf || !std::isfinite(want) ||
                        std::fabs(l - want) <= acc32 * (1.0 + std::fabs(want)));
    }
    CHECK(l_ok);
    return top > 0 ? err / top : err;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Whether the rows i % 5 == 2 of every slice (those the tests leave without keys) have O = 0
/// and L = -inf.
inline bool keyless_rows_empty(const ForwardRun& r) {
    bool ok = true;
    for (std::int64_t bh = 0; bh < r.p.batch * r.p.heads; ++bh)
        for (std::int64_t i = 2; i < r.p.n_q; i += 5) {
            const std::int64_t row = bh * r.p.n_q + i;
            const float l = r.lse[static_cast<std::size_t>(row)];
            ok = ok && std::isinf(l) && l < 0;
            for (std::int64_t z = 0; z < r.p.d_v; ++z)
                ok = ok &&
                     static_cast<float>(r.o[static_cast<std::size_t>(row * r.p.d_v + z)]) == 0.0F;
        }
    return ok;
}

/// Sets V[a][3] = +inf and V[b][1] = NaN in the first (batch, kv head) slice of `r` (d_v >= 4):
/// the non-finite values whose reach finite_rows_without(r, s, a, b) checks.
inline void poison_v_rows(ForwardRun& r, std::int64_t a, std::int64_t b) {
    REQUIRE(r.p.d_v >= 4);
    const std::int64_t d_v = r.p.d_v;
    r.v[static_cast<std::size_t>(a * d_v + 3)] = bf16(std::numeric_limits<float>::infinity());
    r.v[static_cast<std::size_t>(b * d_v + 1)] = bf16(std::numeric_limits<float>::quiet_NaN());
}

/// How many rows of every slice see none of the keys a and b, and whether all their O words
/// are finite (-1 if one is not): a non-finite V value must reach only the rows that see it.
inline std::int64_t
finite_rows_without(const ForwardRun& r, const sparse::Support& s, std::int64_t a, std::int64_t b) {
    std::int64_t rows = 0;
    for (std::int64_t bh = 0; bh < r.p.batch * r.p.heads; ++bh)
        for (std::int64_t i = 0; i < r.p.n_q; ++i) {
            if (s.contains(i, a) || s.contains(i, b))
                continue;
            ++rows;
            for (std::int64_t z = 0; z < r.p.d_v; ++z)
                if (!std::isfinite(static_cast<float>(
                        r.o[static_cast<std::size_t>((bh * r.p.n_q + i) * r.p.d_v + z)])))
                    return -1;
        }
    return rows;
}

} // namespace ioattn::test
