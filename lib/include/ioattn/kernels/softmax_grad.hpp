#pragma once
/// Building blocks of the fused backward kernels (dense and sparse): base-2 L, the
/// softmax probabilities from L, the softmax gradient dS = P o (dP - D), and D itself.

#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/pack.hpp>
#include <ioattn/kernels/simd.hpp>
#include <ioattn/view.hpp>

#include <cstdint>
#include <limits>

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

inline constexpr double kLog2e = 1.4426950408889634;

/// L in base 2 per row, +inf for a row that saw no key (so that P = 2^(S - L) = 0 there).
template <typename Scalar>
Scalar lse2(Scalar lse) {
    return lse == -std::numeric_limits<Scalar>::infinity()
               ? std::numeric_limits<Scalar>::infinity()
               : static_cast<Scalar>(static_cast<double>(lse) * kLog2e);
}

/// D = dO . O for one row, accumulated in double: 8 partial sums (one vector of doubles on
/// AVX-512), added in a fixed tree. One chain of 64 dependent scalar double FMAs (about 256
/// cycles a row at d_v = 64) would hold 14% of the element backward's samples on bigbird's
/// random pairs under perf, and D is formed once per query row in every sparse backward.
template <typename Scalar>
Scalar row_delta(const Scalar* o, const Scalar* d_o, std::int64_t d_v) {
    constexpr int kAcc = 8;
    double acc[kAcc] = {};
    std::int64_t y = 0;
    for (; y + kAcc <= d_v; y += kAcc)
        for (int k = 0; k < kAcc; ++k)
            acc[k] += static_cast<double>(o[y + k]) * static_cast<double>(d_o[y + k]);
    for (int k = 0; y < d_v; ++y, ++k)
        acc[k] += static_cast<double>(o[y]) * static_cast<double>(d_o[y]);
    for (int w = kAcc / 2; w > 0; w /= 2)
        for (int k = 0; k < w; ++k)
            acc[k] += acc[k + w];
    return static_cast<Scalar>(acc[0]);
}

/// dS = P o (dP - D) over an n_out x n_vec-vector tile; P arrives in `pr`, dP in `dp` (which
/// becomes dS). `d` holds D per lane (lanes = queries) or is null and `d_row` is used. With
/// kZeroWhereNoWeight, dS = 0 wherever P = 0 (masked entries), whatever dP holds.
template <typename Scalar, bool kZeroWhereNoWeight = false>
void softmax_grad(Scalar* pr,
                  Scalar* dp,
                  std::int64_t ld,
                  std::int64_t n_out,
                  std::int64_t n_vec,
                  const Scalar* d_lanes,
                  const Scalar* d_rows) {
    constexpr int kL = Simd<Scalar>::kLanes;
    for (std::int64_t x = 0; x < n_out; ++x)
        for (std::int64_t v = 0; v < n_vec; ++v) {
            const Vec<Scalar> dv = d_lanes ? load(d_lanes + v * kL) : splat<Scalar>(d_rows[x]);
            Scalar* q = dp + x * ld + v * kL;
            const Vec<Scalar> pv = load(pr + x * ld + v * kL);
            const Vec<Scalar> ds = pv * (load(q) - dv);
            if constexpr (kZeroWhereNoWeight)
                store(q, pv == Vec<Scalar>{} ? Vec<Scalar>{} : ds);
            else
                store(q, ds);
        }
}

/// P = 2^(min(S, L) - L) in place over an n_out x n_vec-vector tile; L per lane or per row.
/// Exactly, S <= L; with |S| beyond 1/eps the rounded L can fall below S, and 2^(S - L) would
/// overflow to inf (NaN in dS) where the gradient is finite. A masked entry (S = -inf) gets
/// P = 0 whatever L is: a row whose L is NaN must not reach the keys it does not see. Other
/// NaN in S or L stays NaN.
template <typename Scalar>
void probabilities(Scalar* s,
                   std::int64_t ld,
                   std::int64_t n_out,
                   std::int64_t n_vec,
                   const Scalar* l_lanes,
                   const Scalar* l_rows) {
    constexpr int kL = Simd<Scalar>::kLanes;
    for (std::int64_t x = 0; x < n_out; ++x)
        for (std::int64_t v = 0; v < n_vec; ++v) {
            const Vec<Scalar> lv = l_lanes ? load(l_lanes + v * kL) : splat<Scalar>(l_rows[x]);
            Scalar* q = s + x * ld + v * kL;
            const Vec<Scalar> sv = load(q); // P = exp(S - L) <= 1: L rounded may sit below S
            const Vec<Scalar> pv = exp2_diff<Scalar>(sv > lv ? lv : sv, lv); // (NaN passes)
            store(q,
                  sv == splat<Scalar>(-std::numeric_limits<Scalar>::infinity()) ? Vec<Scalar>{}
                                                                                : pv);
        }
}

} // namespace IOATTN_ISA
} // namespace ioattn::kernels
