#pragma once
/// IEEE-754 binary16 storage (sign, 5 exponent bits, 10 mantissa bits): ioattn::fp16 holds the
/// bits only; arithmetic happens in float after an exact widening (every half is a float).
/// Narrowing rounds to nearest, ties to even, subnormal halves included; values from 65520 on
/// (halfway past the largest half, 65504) round to +-inf as in float; NaN stays a quiet NaN of
/// the same sign. Layout-compatible with numpy.float16, torch.float16 and the halves F16C's
/// vcvtph2ps reads (a trivially copyable 2-byte struct), so caches of those libraries are read
/// in place.

#include <bit>
#include <cstdint>

namespace ioattn {

/// An IEEE half-precision value: 16 bits of storage, converted to and from float.
struct fp16 {
    std::uint16_t bits = 0;

    fp16() = default;

    /// Rounds x to the nearest half (ties to even).
    explicit fp16(float x)
        : bits(round_bits(x)) {}

    /// The half with these bits.
    static constexpr fp16 from_bits(std::uint16_t b) {
        fp16 h;
        h.bits = b;
        return h;
    }

    /// The exact float value.
    explicit operator float() const { return widen(bits); }

    /// The float of the half `h` (exact; a NaN comes back quiet, as vcvtph2ps returns it).
    static float widen(std::uint16_t h) {
        const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000U) << 16;
        const std::uint32_t exp = (h >> 10) & 0x1FU, man = h & 0x3FFU;
        if (exp == 0x1F) // inf, or NaN with its payload and the quiet bit
            return std::bit_cast<float>(sign | 0x7F800000U | (man << 13) |
                                        (man != 0 ? 0x00400000U : 0U));
        if (exp != 0) // normal: rebias the exponent by 127 - 15
            return std::bit_cast<float>(sign | ((exp + 112U) << 23) | (man << 13));
        const float sub = static_cast<float>(man) * 0x1p-24F; // zero or subnormal: man 2^-24
        return sign != 0 ? -sub : sub;
    }

    /// x rounded to the nearest half, ties to even (NaN: a quiet NaN of x's sign).
    static std::uint16_t round_bits(float x) {
        const auto u = std::bit_cast<std::uint32_t>(x);
        const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000U);
        const std::uint32_t a = u & 0x7FFFFFFFU;
        if (a > 0x7F800000U) // NaN
            return static_cast<std::uint16_t>(sign | 0x7E00U | ((a >> 13) & 0x3FFU));
        if (a >= 0x477FF000U) // >= 65520: inf
            return static_cast<std::uint16_t>(sign | 0x7C00U);
        if (a < 0x38800000U) {   // below 2^-14: a subnormal half, m 2^(e - 150) in units of 2^-24
            if (a < 0x33000000U) // at most 2^-25 (a tie with 0 at 2^-25): 0
                return sign;
            const std::uint32_t e = a >> 23, m = (a & 0x7FFFFFU) | 0x800000U;
            const std::uint32_t shift = 126U - e; // 14 to 24
            std::uint32_t r = m >> shift;
            const std::uint32_t rest = m & ((1U << shift) - 1U), half = 1U << (shift - 1U);
            if (rest > half || (rest == half && (r & 1U) != 0))
                ++r; // may carry into the smallest normal: the right encoding
            return static_cast<std::uint16_t>(sign | r);
        }
        const std::uint32_t r = a - 0x38000000U; // exponent rebiased by 15 - 127
        const std::uint32_t lsb = (r >> 13) & 1U;
        return static_cast<std::uint16_t>(sign | ((r + 0xFFFU + lsb) >> 13));
    }

    friend bool operator==(fp16 a, fp16 b) { return a.bits == b.bits; }
};

static_assert(sizeof(fp16) == 2 && alignof(fp16) == 2);

/// out[i] = float(in[i]) for i < n (exact).
inline void widen(const fp16* in, float* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i)
        out[i] = fp16::widen(in[i].bits);
}

/// out[i] = fp16(in[i]) for i < n (round to nearest even).
inline void narrow(const float* in, fp16* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i)
        out[i] = fp16(in[i]);
}

} // namespace ioattn
