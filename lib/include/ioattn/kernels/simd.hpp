#pragma once
// Portable SIMD for the tile micro-kernels: GCC vector extensions sized by the ISA target's
// instruction set (kernels/target.hpp; AVX-512: 64-byte vectors, AVX2: 32, otherwise SSE2's
// 16), the same source for float and double, and a vectorised exp2 accurate to about 1 ulp.
//
// exp2(x) = 2^n * p(f), n = round(x), f = x - n in [-1/2, 1/2], p the Taylor polynomial of
// 2^f = e^(f ln 2) of degree 7 (float, truncation error < 6e-9) or 13 (double, < 5e-18).
// Inputs below the smallest normal exponent give exactly 0, so exp2(-inf) = 0; NaN stays NaN.

#include <ioattn/kernels/target.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

#if IOATTN_ISA_LEVEL >= 2
#include <immintrin.h>
#endif

#define IOATTN_EXP2_UNROLL _Pragma("GCC unroll 16")

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

#if IOATTN_ISA_LEVEL == 3
inline constexpr int kVectorBytes = 64;
#elif IOATTN_ISA_LEVEL == 2
inline constexpr int kVectorBytes = 32;
#else
inline constexpr int kVectorBytes = 16;
#endif

template <typename T>
struct Simd;

template <>
struct Simd<float> {
    static constexpr int kLanes = kVectorBytes / 4;
    using V = float __attribute__((vector_size(kVectorBytes)));
    using I = std::int32_t __attribute__((vector_size(kVectorBytes)));
    static constexpr float kMinExp = -126.0F;
    static constexpr float kMaxExp = 127.0F;
    static constexpr float kRound = 12582912.0F; // 1.5 * 2^23
    static constexpr int kBias = 127;
    static constexpr int kMantissa = 23;
};

template <>
struct Simd<double> {
    static constexpr int kLanes = kVectorBytes / 8;
    using V = double __attribute__((vector_size(kVectorBytes)));
    using I = std::int64_t __attribute__((vector_size(kVectorBytes)));
    static constexpr double kMinExp = -1022.0;
    static constexpr double kMaxExp = 1023.0;
    static constexpr double kRound = 6755399441055744.0; // 1.5 * 2^52
    static constexpr int kBias = 1023;
    static constexpr int kMantissa = 52;
};

template <typename T>
using Vec = typename Simd<T>::V;

/// The bits of `x` as a `To` (std::bit_cast, but defined here: a standard-library function
/// keeps the baseline target, and passing a 64-byte vector to or from baseline code changes
/// the calling convention, which at -O0 is a real call).
template <typename To, typename From>
inline To as(const From& x) {
    return __builtin_bit_cast(To, x);
}

template <typename T>
inline Vec<T> load(const T* p) {
    Vec<T> v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

template <typename T>
inline void store(T* p, Vec<T> v) {
    std::memcpy(p, &v, sizeof(v));
}

template <typename T>
inline Vec<T> splat(T x) {
    return Vec<T>{} + x;
}

/// a * b + c for scalars or vectors, rounded once where the ISA target has FMA and twice on the
/// baseline, which has none: the same bits at every optimisation level (GCC contracts
/// `a * b + c` into an FMA only when optimising), so two code paths that do the same
/// multiply-adds agree bit for bit.
template <typename X>
inline X fmadd(X a, X b, X c) {
#if IOATTN_ISA_LEVEL >= 2
    if constexpr (std::is_same_v<X, float>) {
        return __builtin_fmaf(a, b, c);
    } else if constexpr (std::is_same_v<X, double>) {
        return __builtin_fma(a, b, c);
    } else {
        constexpr bool kFloat = std::is_same_v<std::remove_cvref_t<decltype(a[0])>, float>;
#if IOATTN_ISA_LEVEL == 3
        if constexpr (kFloat)
            return as<X>(_mm512_fmadd_ps(as<__m512>(a), as<__m512>(b), as<__m512>(c)));
        else
            return as<X>(_mm512_fmadd_pd(as<__m512d>(a), as<__m512d>(b), as<__m512d>(c)));
#else
        if constexpr (kFloat)
            return as<X>(_mm256_fmadd_ps(as<__m256>(a), as<__m256>(b), as<__m256>(c)));
        else
            return as<X>(_mm256_fmadd_pd(as<__m256d>(a), as<__m256d>(b), as<__m256d>(c)));
#endif
    }
#else
    return a * b + c;
#endif
}

/// max(a, b) that ignores NaN in b (NaN is carried by the softmax terms instead).
template <typename T>
inline Vec<T> max_ignoring_nan(Vec<T> a, Vec<T> b) {
    return b > a ? b : a;
}

/// Taylor coefficients ln2^k / k! of 2^f, and the degree used per type.
template <typename T>
inline constexpr T kExp2Taylor[] = {T(1.0),
                                    T(0.6931471805599453),
                                    T(0.2402265069591007),
                                    T(0.05550410866482158),
                                    T(0.009618129107628477),
                                    T(0.0013333558146428443),
                                    T(0.00015403530393381608),
                                    T(1.525273380405984e-05),
                                    T(1.3215486790144307e-06),
                                    T(1.0178086009239699e-07),
                                    T(7.054911620801123e-09),
                                    T(4.445538271870811e-10),
                                    T(2.567843599348821e-11),
                                    T(1.3691488853904124e-12)};
template <typename T>
inline constexpr int kExp2Degree = sizeof(T) == 4 ? 7 : 13;

/// p(f) ~ 2^f on [-1/2, 1/2] by Horner's rule (unrolled: otherwise GCC leaves a branch per
/// term, 27% of the softmax).
template <typename T>
inline Vec<T> exp2_poly(Vec<T> f) {
    Vec<T> p = splat<T>(kExp2Taylor<T>[kExp2Degree<T>]);
    IOATTN_EXP2_UNROLL
    for (int k = kExp2Degree<T> - 1; k >= 0; --k)
        p = p * f + kExp2Taylor<T>[k];
    return p;
}

/// 2^x lane-wise (see the header comment).
template <typename T>
inline Vec<T> exp2(Vec<T> x) {
    using S = Simd<T>;
#if IOATTN_ISA_LEVEL == 3
    // vrndscale for n and vscalef for 2^n p(f): no upper clamp and no integer exponent
    // arithmetic (12 instructions per vector instead of 17; the softmax is ~9% of the fused
    // forward). x below the smallest normal exponent becomes -2048, where scalef gives exactly
    // 0, as on the portable path; NaN stays NaN. (Full-mask forms: the unmasked intrinsics
    // trip GCC 12's -Wmaybe-uninitialized on their undefined pass-through operand.)
    x = x < S::kMinExp ? splat<T>(T(-2048)) : x;
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    // At -O0 these intrinsics are macros that narrow the mask to a signed type.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-conversion"
    if constexpr (sizeof(T) == 4) {
        const auto xv = as<__m512>(x);
        const __m512 n = _mm512_mask_roundscale_ps(xv, 0xFFFF, xv, kNearest);
        const auto p = as<__m512>(exp2_poly<T>(x - as<Vec<T>>(n)));
        return as<Vec<T>>(_mm512_mask_scalef_ps(p, 0xFFFF, p, n));
    } else {
        const auto xv = as<__m512d>(x);
        const __m512d n = _mm512_mask_roundscale_pd(xv, 0xFF, xv, kNearest);
        const auto p = as<__m512d>(exp2_poly<T>(x - as<Vec<T>>(n)));
        return as<Vec<T>>(_mm512_mask_scalef_pd(p, 0xFF, p, n));
    }
#pragma GCC diagnostic pop
#else
    using I = typename S::I;
    const auto underflow = x < S::kMinExp;
    x = x < S::kMinExp ? splat<T>(S::kMinExp) : x;
    x = x > S::kMaxExp ? splat<T>(S::kMaxExp) : x;
    const Vec<T> n = (x + S::kRound) - S::kRound; // round to nearest
    const Vec<T> p = exp2_poly<T>(x - n);
    const I bits = (__builtin_convertvector(n, I) + S::kBias) << S::kMantissa;
    Vec<T> scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    const Vec<T> r = p * scale;
    return underflow ? Vec<T>{} : r;
#endif
}

} // namespace IOATTN_ISA
} // namespace ioattn::kernels
