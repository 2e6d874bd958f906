#pragma once
// The online softmax of the native bf16 forwards (lib/src/dense/forward_fused_bf16.cpp,
// sparse/src/kernels/tile/forward_fused_bf16.cpp), for the avx512bf16 target region
// (kernels/target_begin.hpp with IOATTN_TARGET_AVX512BF16); empty elsewhere.
//
//   exp2_p6:        2^x for x <= 0: a degree-6 polynomial on [-1/2, 1/2] and vscalefps
//   softmax_pairs:  kernels/online_softmax.hpp's update of m, l, alpha over a block of S^T,
//                   with P written at once as kernels/pack_bf16.hpp's pack_p writes it: bf16
//                   pairs over keys (round to nearest even), in place over the first
//                   ceil(n/2) rows of S^T
//
// Precision: exp2_p6's relative error is below 2^-23 for -126 <= x <= 0 (8.1e-8 on a sweep in
// tests/lib/softmax_bf16_checks.cpp, the float kernels' exp2 7.0e-8; the polynomial alone
// 1e-9), inside the fp32 slack of the tolerance (docs/design.md section 16); P is then rounded
// to bf16 (u = 2^-8). Below 2^-126 it gives 0 or a denormal, which the conversion to bf16
// flushes to 0; -inf gives 0; NaN stays NaN. l sums the fp32 weights in key order, as before;
// alpha is online_softmax.hpp's (the float kernels' exp2).
// Why: the float kernels' softmax (a degree-7 polynomial and two selects per weight) and then
// pack_p took 21% of a phase-timed copy of the dense bf16 forward's loop (one 192-row block,
// d = 64), this one pass 13% (0.95 -> 0.89 TSC ticks per vdpbf16ps); the forward 1.037x
// (docs/performance.md section 3).

#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/pack_bf16.hpp>
#include <ioattn/kernels/simd.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>

#if defined(IOATTN_TARGET_AVX512BF16)

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

/// Near-minimax coefficients of 2^f on [-1/2, 1/2] (Chebyshev interpolation at 7 nodes),
/// constant term first; 2^0 = 1 exactly.
inline constexpr float kExp2P6[] = {1.0F,
                                    0.6931472067028328F,
                                    0.24022650922288238F,
                                    0.0555032722667013F,
                                    0.009618056678576127F,
                                    0.001340042817753385F,
                                    0.00015461444676166612F};

/// 2^x lane-wise for x <= 0 or NaN (see the header comment): -2048 > x ? -2048 : x (one
/// vmaxps) keeps NaN and sends -inf where vscalefps gives 0.
inline Vec<float> exp2_p6(Vec<float> x) {
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const auto xv = as<__m512>(max_ignoring_nan<float>(x, splat<float>(-2048.0F)));
    // Full-mask forms, as in simd.hpp's exp2 (GCC 12's -Wmaybe-uninitialized otherwise).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-conversion"
    const __m512 n = _mm512_mask_roundscale_ps(xv, 0xFFFF, xv, kNearest);
    const Vec<float> f = as<Vec<float>>(xv) - as<Vec<float>>(n);
    Vec<float> p = splat<float>(kExp2P6[6]);
    IOATTN_EXP2_UNROLL
    for (int k = 5; k >= 0; --k)
        p = p * f + kExp2P6[k];
    const auto pv = as<__m512>(p);
    return as<Vec<float>>(_mm512_mask_scalef_ps(pv, 0xFFFF, pv, n));
#pragma GCC diagnostic pop
}

/// The exp pass of softmax_pairs over NV lane vectors: rows 2c and 2c + 1 of S^T become
/// row c of P's pairs, and sum[u] adds P in key order. kInf: some lane's m_safe is +inf, where
/// S = +inf gives P = 1 (exp2_diff's rule) instead of inf - inf = NaN.
template <bool kInf, int NV>
inline void
exp_pairs(float* st, std::int64_t ld, std::int64_t n, const Vec<float>* ms, Vec<float>* sum) {
    constexpr int kL = 16;
    const auto weight = [&](std::int64_t c, int u) {
        const Vec<float> x = load(st + c * ld + u * kL);
        Vec<float> diff = x - ms[u];
        if constexpr (kInf)
            diff = x == ms[u] ? Vec<float>{} : diff;
        return exp2_p6(diff);
    };
    const auto put = [&](std::int64_t c, int u, Vec<float> p0, Vec<float> p1) {
        _mm512_storeu_si512(st + c * ld + u * kL, pair_lanes(as<__m512>(p0), as<__m512>(p1)));
    };
    std::int64_t c = 0;
    for (; 2 * c + 1 < n; ++c)
        for (int u = 0; u < NV; ++u) {
            const Vec<float> p0 = weight(2 * c, u), p1 = weight(2 * c + 1, u);
            sum[u] += p0;
            sum[u] += p1;
            put(c, u, p0, p1);
        }
    if (2 * c < n) // an odd last key pairs with 0
        for (int u = 0; u < NV; ++u) {
            const Vec<float> p0 = weight(2 * c, u);
            sum[u] += p0;
            put(c, u, p0, Vec<float>{});
        }
}

/// softmax_pairs on NV adjacent lane vectors (NV independent max and sum chains, as
/// online_softmax_vecs).
template <int NV>
inline void
softmax_pairs_vecs(float* st, std::int64_t ld, std::int64_t n, float* m, float* l, float* alpha) {
    constexpr int kL = 16;
    constexpr auto kN = static_cast<std::size_t>(NV);
    const Vec<float> neg_inf = splat<float>(-std::numeric_limits<float>::infinity());
    const __m512 pos_inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
    Vec<float> mx[kN], ms[kN], sum[kN];
    for (int u = 0; u < NV; ++u)
        mx[u] = load(m + u * kL);
    for (std::int64_t c = 0; c < n; ++c) // NaN scores ignored here: NaN reaches O through P
        for (int u = 0; u < NV; ++u)
            mx[u] = max_ignoring_nan<float>(mx[u], load(st + c * ld + u * kL));
    bool inf = false;
    for (int u = 0; u < NV; ++u) {
        ms[u] = mx[u] == neg_inf ? Vec<float>{} : mx[u];
        inf = inf || _mm512_cmp_ps_mask(as<__m512>(ms[u]), pos_inf, _CMP_EQ_OQ) != 0;
        sum[u] = Vec<float>{};
    }
    if (inf)
        exp_pairs<true, NV>(st, ld, n, ms, sum);
    else
        exp_pairs<false, NV>(st, ld, n, ms, sum);
    for (int u = 0; u < NV; ++u) {
        const Vec<float> a = exp2_diff<float>(load(m + u * kL), ms[u]); // exp(m_old - m_new)
        store(l + u * kL, a * load(l + u * kL) + sum[u]); // l = exp(m_old - m_new) l + rowsum(P)
        store(m + u * kL, mx[u]);
        store(alpha + u * kL, a);
    }
}

/// The online softmax update of m, l, alpha (n_vec lane vectors of 16) over the n rows of S^T
/// (stride ld), P left as bf16 pairs over keys in the first ceil(n/2) rows: what
/// online_softmax_block and then pack_p leave, up to exp2_p6's error (see the header comment).
inline void softmax_pairs(float* st,
                          std::int64_t ld,
                          std::int64_t n,
                          std::int64_t n_vec,
                          float* m,
                          float* l,
                          float* alpha) {
    constexpr int kL = 16;
    constexpr int kStep = 4;
    std::int64_t v = 0;
    for (; v + kStep <= n_vec; v += kStep)
        softmax_pairs_vecs<kStep>(st + v * kL, ld, n, m + v * kL, l + v * kL, alpha + v * kL);
    for (; v < n_vec; ++v)
        softmax_pairs_vecs<1>(st + v * kL, ld, n, m + v * kL, l + v * kL, alpha + v * kL);
}

} // namespace IOATTN_ISA
} // namespace ioattn::kernels

#endif // IOATTN_TARGET_AVX512BF16
