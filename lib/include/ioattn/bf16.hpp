#pragma once
/// bfloat16 storage: the upper 16 bits of an IEEE-754 binary32 (sign, 8 exponent bits, 7
/// mantissa bits). ioattn::bf16 holds the bits only; arithmetic happens in float after an exact
/// widening (a 16-bit shift). Narrowing rounds to nearest, ties to even; NaN stays a quiet NaN
/// of the same sign; values beyond the largest bf16 round to +-inf as in float. Layout-compatible
/// with torch.bfloat16, numpy's ml_dtypes.bfloat16 and the 16-bit `__bf16` of AVX512_BF16
/// (a trivially copyable 2-byte struct), so caches of those libraries are read in place.

#include <bit>
#include <cstdint>

namespace ioattn {

/// A bfloat16 value: 16 bits of storage, converted to and from float.
struct bf16 {
    std::uint16_t bits = 0;

    bf16() = default;

    /// Rounds x to the nearest bf16 (ties to even).
    explicit bf16(float x)
        : bits(round_bits(x)) {}

    /// The bf16 with these bits.
    static constexpr bf16 from_bits(std::uint16_t b) {
        bf16 h;
        h.bits = b;
        return h;
    }

    /// The exact float value.
    explicit operator float() const { return widen(bits); }

    /// The float whose upper half is `b` (exact).
    static float widen(std::uint16_t b) {
        return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
    }

    /// The upper half of x rounded to nearest, ties to even (NaN: a quiet NaN of x's sign).
    static std::uint16_t round_bits(float x) {
        const auto u = std::bit_cast<std::uint32_t>(x);
        if ((u & 0x7FFFFFFFU) > 0x7F800000U)
            return static_cast<std::uint16_t>((u >> 16) | 0x0040U);
        const std::uint32_t lsb = (u >> 16) & 1U;
        return static_cast<std::uint16_t>((u + 0x7FFFU + lsb) >> 16);
    }

    friend bool operator==(bf16 a, bf16 b) { return a.bits == b.bits; }
};

static_assert(sizeof(bf16) == 2 && alignof(bf16) == 2);

/// out[i] = float(in[i]) for i < n (exact; a loop the compiler vectorizes).
inline void widen(const bf16* in, float* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i)
        out[i] = bf16::widen(in[i].bits);
}

/// out[i] = bf16(in[i]) for i < n (round to nearest even).
inline void narrow(const float* in, bf16* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i)
        out[i] = bf16(in[i]);
}

/// x rounded to bf16 and widened back: the float a bf16 cache holds for x.
inline float round_to_bf16(float x) {
    return static_cast<float>(bf16(x));
}

} // namespace ioattn
