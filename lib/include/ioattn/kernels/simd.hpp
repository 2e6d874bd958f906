#pragma once
// Portable SIMD for the tile micro-kernels: GCC vector extensions sized by the compile-time ISA
// (AVX-512: 64-byte vectors, AVX2: 32, otherwise SSE2's 16), the same source for float and
// double, and a vectorised exp2 accurate to about 1 ulp.
//
// exp2(x) = 2^n * p(f), n = round(x), f = x - n in [-1/2, 1/2], p the Taylor polynomial of
// 2^f = e^(f ln 2) of degree 7 (float, truncation error < 6e-9) or 13 (double, < 5e-18).
// Inputs below the smallest normal exponent give exactly 0, so exp2(-inf) = 0; NaN stays NaN.

#include <cstdint>
#include <cstring>

namespace ioattn::kernels {

#if defined(__AVX512F__)
inline constexpr int kVectorBytes = 64;
#elif defined(__AVX2__)
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

/// max(a, b) that ignores NaN in b (NaN is carried by the softmax terms instead).
template <typename T>
inline Vec<T> max_ignoring_nan(Vec<T> a, Vec<T> b) {
    return b > a ? b : a;
}

/// 2^x lane-wise (see the header comment).
template <typename T>
inline Vec<T> exp2(Vec<T> x) {
    using S = Simd<T>;
    using I = typename S::I;
    const auto underflow = x < S::kMinExp;
    x = x < S::kMinExp ? splat<T>(S::kMinExp) : x;
    x = x > S::kMaxExp ? splat<T>(S::kMaxExp) : x;
    const Vec<T> n = (x + S::kRound) - S::kRound; // round to nearest
    const Vec<T> f = x - n;
    // Taylor coefficients ln2^k / k!
    constexpr T kC[] = {T(1.0),
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
    constexpr int kDegree = sizeof(T) == 4 ? 7 : 13;
    Vec<T> p = splat<T>(kC[kDegree]);
    _Pragma("GCC unroll 16") // GCC left this a loop with a branch per term: 27% of the softmax
        for (int k = kDegree - 1; k >= 0; --k) p = p * f + kC[k];
    const I bits = (__builtin_convertvector(n, I) + S::kBias) << S::kMantissa;
    Vec<T> scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    const Vec<T> r = p * scale;
    return underflow ? Vec<T>{} : r;
}

} // namespace ioattn::kernels
