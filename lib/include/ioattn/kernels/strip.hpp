#pragma once
/// Vector kernels over contiguous runs of values, for the materializing sparse kernels, whose
/// stored scores of a row are a contiguous strip (CSR order) and whose products touch one
/// allowed entry at a time: dot products, axpy, and the row softmax pieces (max, sum of 2^(s -
/// m), probabilities). Tails run in a vector padded with the operation's neutral value, so
/// every entry takes the same exp2 as in a whole vector. Sums are in a fixed order (vector
/// partials, then a tree over the lanes): results do not depend on the thread count.

#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/simd.hpp>
#include <ioattn/kernels/tile.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

namespace ioattn::kernels {
inline namespace IOATTN_ISA {

/// v with its lanes rotated by H (lane l takes lane (l + H) mod N).
template <typename V, int N, int H, int... P>
inline V rotate_lanes(V v, std::integer_sequence<int, P...> /*lanes*/) {
    return __builtin_shufflevector(v, v, ((P + H) % N)...);
}

/// Lanes [0, N/2) the sums of x's adjacent lane pairs (2l, 2l + 1), lanes [N/2, N) those of y.
template <typename T, int... P>
inline Vec<T> fold_pairs(Vec<T> x, Vec<T> y, std::integer_sequence<int, P...> /*lanes*/) {
    return __builtin_shufflevector(x, y, (2 * P)...) +
           __builtin_shufflevector(x, y, (2 * P + 1)...);
}

/// a + b, or (Max) the lane-wise max ignoring NaN in b.
template <typename T, bool Max>
inline Vec<T> combine_lanes(Vec<T> a, Vec<T> b) {
    if constexpr (Max)
        return max_ignoring_nan<T>(a, b);
    else
        return a + b;
}

/// The lanes of v summed (Max: their max, NaN ignored) as a tree (halves, then quarters, ...):
/// a fixed order, log2 of the lanes in shuffles (a lane-by-lane loop would be 12% of the
/// materializing sparse forward's instructions on random:0.02 under callgrind).
template <typename T, bool Max = false>
inline T lane_tree(Vec<T> v) {
    constexpr int kN = Simd<T>::kLanes;
    constexpr auto kSeq = std::make_integer_sequence<int, kN>{};
    // (no lambda: a lambda in a target region keeps the baseline ABI, GCC 12)
    if constexpr (kN >= 16)
        v = combine_lanes<T, Max>(v, rotate_lanes<Vec<T>, kN, 8>(v, kSeq));
    if constexpr (kN >= 8)
        v = combine_lanes<T, Max>(v, rotate_lanes<Vec<T>, kN, 4>(v, kSeq));
    if constexpr (kN >= 4)
        v = combine_lanes<T, Max>(v, rotate_lanes<Vec<T>, kN, 2>(v, kSeq));
    v = combine_lanes<T, Max>(v, rotate_lanes<Vec<T>, kN, 1>(v, kSeq));
    return v[0];
}

/// The lanes of v summed (lane_tree).
template <typename T>
inline T lane_sum(Vec<T> v) {
    return lane_tree<T>(v);
}

/// The first n < kLanes values of p in a vector, the other lanes `fill`; nothing past p[n - 1]
/// is read (a masked load where the ISA target has one).
template <typename T>
inline Vec<T> load_tail(const T* p, std::int64_t n, T fill) {
#if IOATTN_ISA_LEVEL == 3
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-conversion"
    if constexpr (sizeof(T) == 4) {
        const auto mask = static_cast<__mmask16>((1U << n) - 1U);
        return as<Vec<T>>(_mm512_mask_loadu_ps(as<__m512>(splat<T>(fill)), mask, p));
    } else {
        const auto mask = static_cast<__mmask8>((1U << n) - 1U);
        return as<Vec<T>>(_mm512_mask_loadu_pd(as<__m512d>(splat<T>(fill)), mask, p));
    }
#pragma GCC diagnostic pop
#elif IOATTN_ISA_LEVEL == 2
    using I = typename Simd<T>::I;
    using E = std::remove_cvref_t<decltype(I{}[0])>;
    I lane{};
    for (int l = 0; l < Simd<T>::kLanes; ++l)
        lane[l] = l;
    const auto in = lane < static_cast<E>(n);
    Vec<T> v;
    if constexpr (sizeof(T) == 4)
        v = as<Vec<T>>(_mm256_maskload_ps(p, as<__m256i>(in)));
    else
        v = as<Vec<T>>(_mm256_maskload_pd(p, as<__m256i>(in)));
    return in ? v : splat<T>(fill);
#else
    Vec<T> v = splat<T>(fill);
    for (std::int64_t l = 0; l < n; ++l)
        v[l] = p[l];
    return v;
#endif
}

/// sum_z a[z] b[z], z < n.
template <typename T>
inline T dot(const T* a, const T* b, std::int64_t n) {
    constexpr int kL = Simd<T>::kLanes;
    Vec<T> acc0{}, acc1{};
    std::int64_t z = 0;
    for (; z + 2 * kL <= n; z += 2 * kL) {
        acc0 += load(a + z) * load(b + z);
        acc1 += load(a + z + kL) * load(b + z + kL);
    }
    for (; z + kL <= n; z += kL)
        acc0 += load(a + z) * load(b + z);
    if (z < n)
        acc1 += load_tail(a + z, n - z, T(0)) * load_tail(b + z, n - z, T(0));
    return lane_sum<T>(acc0 + acc1);
}

/// The lanes of a, b, c, d summed, into out[0..4): each a tree over its lanes in a fixed order,
/// shared across the four (pairwise even/odd folds, then the lanes left per sum), so four sums
/// take about 13 shuffles and adds instead of 4 lane_sum's 32 (16 lanes).
template <typename T>
inline void lane_sum4(Vec<T> a, Vec<T> b, Vec<T> c, Vec<T> d, T* out) {
    constexpr int kN = Simd<T>::kLanes;
    if constexpr (kN < 4) {
        out[0] = lane_sum<T>(a);
        out[1] = lane_sum<T>(b);
        out[2] = lane_sum<T>(c);
        out[3] = lane_sum<T>(d);
    } else {
        constexpr auto kSeq = std::make_integer_sequence<int, kN>{};
        // fold: lanes [0, kN/2) take pair sums of x, lanes [kN/2, kN) those of y
        const Vec<T> ab = fold_pairs<T>(a, b, kSeq);
        const Vec<T> cd = fold_pairs<T>(c, d, kSeq);
        Vec<T> v = fold_pairs<T>(ab, cd, kSeq); // quarters: a, b, c, d, kN/4 lanes each
        // sum the kN/4 lanes of each quarter: rotate within the vector by halves of a quarter
        if constexpr (kN >= 16)
            v = v + rotate_lanes<Vec<T>, kN, 2>(v, kSeq);
        if constexpr (kN >= 8)
            v = v + rotate_lanes<Vec<T>, kN, 1>(v, kSeq);
        constexpr int kQ = kN / 4;
        out[0] = v[0];
        out[1] = v[kQ];
        out[2] = v[2 * kQ];
        out[3] = v[3 * kQ];
    }
}

/// sum_z a[z] b_k[z], z < n, for the four rows b_0..b_3 (out[k]): a read once per vector.
template <typename T>
inline void dot4(const T* a, const T* const* b, std::int64_t n, T* out) {
    constexpr int kL = Simd<T>::kLanes;
    Vec<T> acc[4] = {};
    std::int64_t z = 0;
    for (; z + kL <= n; z += kL) {
        const Vec<T> x = load(a + z);
        for (int k = 0; k < 4; ++k)
            acc[k] = fmadd(x, load(b[k] + z), acc[k]);
    }
    if (z < n) {
        const Vec<T> x = load_tail(a + z, n - z, T(0));
        for (int k = 0; k < 4; ++k)
            acc[k] = fmadd(x, load_tail(b[k] + z, n - z, T(0)), acc[k]);
    }
    lane_sum4<T>(acc[0], acc[1], acc[2], acc[3], out);
}

/// y[z] += alpha x[z], z < n.
template <typename T>
inline void axpy(T alpha, const T* x, T* y, std::int64_t n) {
    constexpr int kL = Simd<T>::kLanes;
    std::int64_t z = 0;
    for (; z + kL <= n; z += kL)
        store(y + z, load(y + z) + alpha * load(x + z));
    for (; z < n; ++z)
        y[z] += alpha * x[z];
}

/// max(init, s[0..n)), NaN ignored (it reaches the row through the probabilities instead).
template <typename T>
inline T strip_max(const T* s, std::int64_t n, T init) {
    constexpr int kL = Simd<T>::kLanes;
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    Vec<T> m = splat<T>(init);
    std::int64_t z = 0;
    for (; z + kL <= n; z += kL)
        m = max_ignoring_nan<T>(m, load(s + z));
    if (z < n)
        m = max_ignoring_nan<T>(m, load_tail(s + z, n - z, kNegInf));
    return lane_tree<T, true>(m);
}

/// sum_z 2^(s[z] - m_safe) (1 where s[z] = m_safe), z < n.
template <typename T>
inline T strip_exp2_sum(const T* s, std::int64_t n, T m_safe) {
    constexpr int kL = Simd<T>::kLanes;
    const Vec<T> m = splat<T>(m_safe);
    Vec<T> acc{};
    std::int64_t z = 0;
    for (; z + kL <= n; z += kL)
        acc += exp2_diff<T>(load(s + z), m);
    if (z < n)
        acc += exp2_diff<T>(load_tail(s + z, n - z, -std::numeric_limits<T>::infinity()), m);
    return lane_sum<T>(acc);
}

/// p[z] = 2^(s[z] - m_safe) * scale (1 * scale where s[z] = m_safe), z < n.
template <typename T>
inline void strip_probabilities(const T* s, std::int64_t n, T m_safe, T scale, T* p) {
    constexpr int kL = Simd<T>::kLanes;
    const Vec<T> m = splat<T>(m_safe);
    std::int64_t z = 0;
    for (; z + kL <= n; z += kL)
        store(p + z, exp2_diff<T>(load(s + z), m) * scale);
    if (z < n) {
        const Vec<T> v =
            exp2_diff<T>(load_tail(s + z, n - z, -std::numeric_limits<T>::infinity()), m) * scale;
        for (std::int64_t l = 0; l < n - z; ++l)
            p[z + l] = v[l];
    }
}

/// y[0..n) += sum_{e < m} p[e] row(e)[0..n): one row of a sparse-times-dense product, y held in
/// registers over all m terms, kTileVecs vectors at a time (an axpy per term would store y
/// after every term: store-forwarding-bound, 21% of the materializing sparse forward). Each element
/// takes the terms in order, one fmadd each, so the result is that of the scalar chain.
template <typename T, typename RowOf>
inline void spmm_row(const T* p, std::int64_t m, RowOf row, T* y, std::int64_t n) {
    constexpr int kL = Simd<T>::kLanes;
    const std::int64_t full = n / kL; // whole vectors; the rest lane by lane
    for (std::int64_t v0 = 0; v0 < full; v0 += kTileVecs) {
        with_count<kTileVecs>(std::min<std::int64_t>(kTileVecs, full - v0), [&](auto nv) {
            constexpr int kV = decltype(nv)::value;
            T* out = y + v0 * kL;
            Vec<T> acc[static_cast<std::size_t>(kV)];
            for (int v = 0; v < kV; ++v)
                acc[v] = load(out + v * kL);
            for (std::int64_t e = 0; e < m; ++e) {
                const T* x = row(e) + v0 * kL;
                const Vec<T> pe = splat(p[e]);
                for (int v = 0; v < kV; ++v)
                    acc[v] = fmadd(pe, load(x + v * kL), acc[v]);
            }
            for (int v = 0; v < kV; ++v)
                store(out + v * kL, acc[v]);
        });
    }
    for (std::int64_t z = full * kL; z < n; ++z) {
        T acc = y[z];
        for (std::int64_t e = 0; e < m; ++e)
            acc = fmadd(p[e], row(e)[z], acc);
        y[z] = acc;
    }
}

} // namespace IOATTN_ISA
} // namespace ioattn::kernels
