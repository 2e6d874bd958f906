// ioattn::sparse::detail::geometric_gaps: a batch of random's geometric gaps (pattern_random.cpp),
// compiled once per ISA target, its floors computed on whole vectors:
//   u_k = the row stream's next kGapBatch draws (splitmix64: the states are the start plus k
//         times its increment, so the draws do not wait on one another);
//   q_k = log_unit(1 - u_k) / log(1 - p), fdlibm's log with fast_floors.hpp's constants, on
//         vectors; gap_k = floor(q_k) where q_k (1 -+ 2^-40) have one floor (sure_floor's test),
//         else floor(log1p(-u_k) / log(1 - p)), the formula itself (about one in 10^11).
// The vector quotient may round differently from the scalar one (a fused multiply-add), but it
// stays within 2^-49 of the formula's, which is all the 2^-40 test needs: the gaps are the
// formula's on every target. Floors are exact: t = (x + 2^52) - 2^52 rounds 0 <= x < 2^52 to an
// integer, less 1 where t > x. One gap at a time, each floor's branch waiting on its log, took
// 14 ns a gap, 1.9 on AVX-512's vectors of 8 (Zen 4); with its chunks in pooled slots
// (build_chunks_expected), random:0.02 at N = 16384 builds 2.7x faster (docs/performance.md
// section 4).
// Tests: tests/sparse/fast_floors_whitebox_test.cpp

#include "patterns/fast_floors.hpp"
#include "patterns/pattern_util.hpp"

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include <ioattn/kernels/simd.hpp>

#define IOATTN_TARGET_NS IOATTN_ISA
#include "patterns/geometric_gaps.hpp"
#undef IOATTN_TARGET_NS

namespace ioattn::sparse::detail::IOATTN_ISA {

namespace {

using V = kernels::Simd<double>::V;
using I = kernels::Simd<double>::I;
constexpr std::size_t kLanes = kernels::Simd<double>::kLanes;
static_assert(kGapBatch % kLanes == 0);

/// The integers of x's lanes, |x| < 2^51, as doubles, exactly (no vector conversion of 64-bit
/// integers below AVX-512): 2^52 + 2^51 + x has x in its low mantissa bits.
inline V exact_double(I x) {
    constexpr double kShift = 0x1.8p52;
    return kernels::as<V>(x + kernels::as<std::int64_t>(kShift)) - kShift;
}

/// floor(x) of lanes 0 <= x < 2^52.
inline V floor_lanes(V x) {
    constexpr double kTwo52 = 0x1p52;
    const V t = (x + kTwo52) - kTwo52; // x rounded to an integer
    return t - kernels::as<V>(kernels::as<I>(V{} + 1.0) & (t > x));
}

/// log_unit (fast_floors.hpp) of each lane, x in [2^-1022, 1]: its operations, on vectors.
inline V log_lanes(V x) {
    using L = LogUnit;
    const I bits = kernels::as<I>(x);
    const I hx = bits >> 32; // x > 0: the sign bit is clear
    const I man = hx & 0xFFFFF;
    const I i = (man + 0x95F64) & 0x100000; // m >= sqrt(2): halve it
    const V m = kernels::as<V>(((man | (i ^ 0x3FF00000)) << 32) | (bits & 0xFFFFFFFF));
    const V dk = exact_double((hx >> 20) - 1023 + (i >> 20));
    const V f = m - 1.0; // exact
    const V s = f / (2.0 + f), z = s * s, w = z * z;
    const V r = z * (L::kLg1 + w * (L::kLg3 + w * (L::kLg5 + w * L::kLg7))) +
                w * (L::kLg2 + w * (L::kLg4 + w * L::kLg6));
    const V hfsq = 0.5 * f * f;
    return dk * L::kLn2Hi - ((hfsq - (s * (hfsq + r) + dk * L::kLn2Lo)) - f);
}

} // namespace

void geometric_gaps(RowRng* rng, double* u, double log_keep, double inverse, double* gaps) {
    if (rng != nullptr)
        for (std::size_t k = 0; k < kGapBatch; ++k)
            u[k] = rng->uniform();
    if (!std::isfinite(inverse)) { // a density too small for 1 / log(1 - p): the formula
        for (std::size_t k = 0; k < kGapBatch; ++k)
            gaps[k] = std::floor(std::log1p(-u[k]) / log_keep);
        return;
    }
    I unsure{}; // lanes of any vector whose floor was not sure
    for (std::size_t k = 0; k < kGapBatch; k += kLanes) {
        const V q = log_lanes(1.0 - kernels::load(u + k)) * inverse; // >= 0
        const I small = (q >= 0.0) & (q < 0x1p52); // else (never seen) the formula
        const V bounded = kernels::as<V>(kernels::as<I>(q) & small); // 0 where not small
        const V lo = floor_lanes(bounded * (1.0 - 0x1p-40));
        const V hi = floor_lanes(bounded * (1.0 + 0x1p-40));
        const I sure = small & (lo == hi);
        kernels::store(
            gaps + k,
            kernels::as<V>((kernels::as<I>(lo) & sure) | (kernels::as<I>(V{} - 1.0) & ~sure)));
        unsure |= ~sure;
    }
    std::int64_t any = 0;
    for (std::size_t l = 0; l < kLanes; ++l)
        any |= unsure[l];
    if (any != 0)
        for (std::size_t k = 0; k < kGapBatch; ++k)
            if (gaps[k] < 0.0)
                gaps[k] = std::floor(std::log1p(-u[k]) / log_keep);
}

} // namespace ioattn::sparse::detail::IOATTN_ISA
