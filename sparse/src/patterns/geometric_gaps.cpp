// ioattn::sparse::detail::geometric_gaps: a batch of random's geometric gaps (pattern_random.cpp),
// compiled once per ISA target, its floors computed on whole vectors:
//   u_k = the row stream's next kGapBatch draws (splitmix64: the states are the start plus k
//         times its increment, so the draws do not wait on one another; on AVX-512 made on
//         64-bit lanes, uniform_lanes);
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
// geometric_keys: the row's keys from a batch of gaps, key_k = key_(k-1) + gap_k + 1 while below
// n_k; on AVX-512 the gaps (capped at n_k) summed along each vector's lanes by three shifted
// adds, the keys below n_k counted by a compare. A gap at a time, a branch each (mispredicted
// at the row's end) and a push into the row's vector, was most of the rows' own time:
// random:0.02's build at N = 16384 1.45x faster (docs/performance.md section 4).
// Tests: tests/sparse/fast_floors_whitebox_test.cpp

#include "patterns/fast_floors.hpp"
#include "patterns/pattern_util.hpp"

#include <bit>
#include <cstring>

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

#if IOATTN_ISA_LEVEL == 3
/// The batch's draws u[k] = RowRng::uniform's k-th from `rng`, on vectors: splitmix64's states
/// are the start plus (k + 1) gamma, its finaliser and the conversion (z >> 11 < 2^53: exact)
/// run on 64-bit lanes. One draw at a time, stored word by word, the log's vector loads of u
/// waited on the stores' forwarding: a fifth of the gaps' time (random:0.02's build).
inline void uniform_lanes(RowRng& rng, double* u) {
    using U = std::uint64_t __attribute__((vector_size(sizeof(V))));
    U state = U{} + rng.skip(kGapBatch);
    for (std::size_t l = 0; l < kLanes; ++l)
        state[l] += (l + 1) * kSplitMixGamma;
    for (std::size_t k = 0; k < kGapBatch; k += kLanes) { // the finaliser of each lane
        U z = state;
        z = (z ^ (z >> 30U)) * kSplitMixMul1;
        z = (z ^ (z >> 27U)) * kSplitMixMul2;
        z ^= z >> 31U;
        kernels::store(u + k, __builtin_convertvector(kernels::as<I>(z >> 11U), V) * 0x1.0p-53);
        state += kLanes * kSplitMixGamma;
    }
}
#endif

void geometric_gaps(RowRng* rng, double* u, double log_keep, double inverse, double* gaps) {
#if IOATTN_ISA_LEVEL == 3
    if (rng != nullptr)
        uniform_lanes(*rng, u);
#else
    if (rng != nullptr)
        for (std::size_t k = 0; k < kGapBatch; ++k)
            u[k] = rng->uniform();
#endif
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

std::int64_t geometric_keys(RowRng* rng,
                            double* u,
                            double log_keep,
                            double inverse,
                            std::int64_t j,
                            std::int64_t n_k,
                            std::int64_t* keys) {
    alignas(64) double gaps[kGapBatch];
    geometric_gaps(rng, u, log_keep, inverse, gaps);
#if IOATTN_ISA_LEVEL == 3
    // gaps capped at n_k (a larger one ends the row as surely), plus 1, summed along the lanes
    // (three shifted adds); a vector's keys ascend, so those below n_k are its first lanes
    static_assert(kLanes == 8); // the shuffles' lane numbers
    const V cap = V{} + static_cast<double>(n_k);
    const __m512i end = _mm512_set1_epi64(n_k);
    for (std::size_t k = 0; k < kGapBatch; k += kLanes) {
        const V g = kernels::load(gaps + k);
        I key = __builtin_convertvector(g < cap ? g : cap, I) + 1;
        const I zero{};
        key += __builtin_shuffle(key, zero, I{8, 0, 1, 2, 3, 4, 5, 6});
        key += __builtin_shuffle(key, zero, I{8, 8, 0, 1, 2, 3, 4, 5});
        key += __builtin_shuffle(key, zero, I{8, 8, 8, 8, 0, 1, 2, 3});
        key += j;
        std::memcpy(keys + k, &key, sizeof(key));
        const int below = std::popcount(
            static_cast<unsigned>(_mm512_cmplt_epi64_mask(kernels::as<__m512i>(key), end)));
        if (below < static_cast<int>(kLanes))
            return static_cast<std::int64_t>(k) + below;
        j = key[kLanes - 1];
    }
#else
    for (std::size_t k = 0; k < kGapBatch; ++k) { // the loop of a gap at a time
        if (gaps[k] >= static_cast<double>(n_k - 1 - j))
            return static_cast<std::int64_t>(k);
        j += static_cast<std::int64_t>(gaps[k]) + 1;
        keys[k] = j;
    }
#endif
    return static_cast<std::int64_t>(kGapBatch);
}

} // namespace ioattn::sparse::detail::IOATTN_ISA
