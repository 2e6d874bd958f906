#pragma once
// The arithmetic of forward_element (forward_element.cpp) on a block's resident state: one
// row over its run of keys in a panel (run_row), and kLanes rows over short runs of one length
// at once (run_rows). Compiled once per instruction set, like the kernel that includes it.
// `Store` is the views' storage type: Scalar itself, or bf16 whose V rows load_as widens
// (element_ops.hpp); the arithmetic and the state are in Scalar = Accumulator<Store>. The
// scores of bf16 views: in the avx512bf16 target region on bf16 pairs (kPairScores), elsewhere
// on K rows widened as the V rows.

#include "kernels/element/element_ops.hpp"
#include "kernels/element/panels.hpp"
#include "kernels/element/short_runs.hpp"

#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/tile.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

using kernels::Simd;
using kernels::Vec;

template <typename Scalar>
constexpr Scalar kNegInf = -std::numeric_limits<Scalar>::infinity();

/// Whether the scores of `Store` views run on bf16 pairs (vdpbf16ps, element_ops.hpp
/// dp_dots_of): bf16 views where the target region has AVX512_BF16. The resident q rows are
/// then the input's bf16 rows unscaled (exact), and scale * log2 e multiplies each fp32 sum.
#if defined(IOATTN_TARGET_AVX512BF16)
template <typename Store>
constexpr bool kPairScores = std::is_same_v<Store, bf16>;
#else
template <typename Store>
constexpr bool kPairScores = false;
#endif

/// The words of the resident q rows: bf16 for pair scores, else Scalar (scaled by
/// scale * log2 e).
template <typename Store>
using QWord = std::conditional_t<kPairScores<Store>, bf16, Accumulator<Store>>;

/// Per-worker state of one block: q rows (R x pd words of Scalar: scaled, or the bf16 rows of
/// pair scores in their first half, q_row), O accumulators (R x pdv), m, l.
template <typename Scalar>
struct ForwardState {
    std::int64_t pd = 0, pdv = 0;
    Scalar *q = nullptr, *o = nullptr, *m = nullptr, *l = nullptr;

    static std::int64_t words(const Problem& p, std::int64_t rows) {
        const auto w = ElementWords::of(sizeof(Scalar));
        return rows * (w.pad(p.d) + w.pad(p.d_v)) + 2 * w.pad(rows);
    }

    ForwardState() = default;

    ForwardState(Scalar* base, const Problem& p, std::int64_t rows) {
        const auto w = ElementWords::of(sizeof(Scalar));
        pd = w.pad(p.d);
        pdv = w.pad(p.d_v);
        q = base;
        o = q + rows * pd;
        m = o + rows * pdv;
        l = m + w.pad(rows);
    }
};

/// Row x of w's q rows as the scores read them (QWord<Store>, zero-padded to whole vectors:
/// pd words of Scalar hold 2 pd >= d rounded up to 32 bf16 words).
template <typename Store, typename Scalar>
const QWord<Store>* q_row(const ForwardState<Scalar>& w, std::int64_t x) {
    if constexpr (kPairScores<Store>)
        return reinterpret_cast<const bf16*>(w.q + x * w.pd);
    else
        return w.q + x * w.pd;
}

/// Fills row x of w's q rows from the input row qr (d words): qr scaled by qs = scale * log2 e,
/// or for pair scores qr's bits as they are (copied, not typed: the slot is Scalar storage).
template <typename Store, typename Scalar>
void load_q_row(
    const ForwardState<Scalar>& w, std::int64_t x, const Store* qr, std::int64_t d, Scalar qs) {
    Scalar* qx = w.q + x * w.pd;
    if constexpr (kPairScores<Store>) {
        const auto bytes = static_cast<std::size_t>(d) * sizeof(bf16);
        std::memcpy(qx, qr, bytes);
        std::memset(reinterpret_cast<char*>(qx) + bytes,
                    0,
                    static_cast<std::size_t>(w.pd) * sizeof(Scalar) - bytes);
    } else {
        for (std::int64_t z = 0; z < d; ++z)
            qx[z] = static_cast<Scalar>(qr[z]) * qs;
        std::fill(qx + d, qx + w.pd, Scalar(0));
    }
}

/// Writes one row's O = o / l (rounded to Store) and L = ln 2 (m + log2 l) from its online
/// softmax state (m in base 2); a row that saw no key (l = 0): O = 0 (not 0 * a NaN of o),
/// L = -inf.
template <typename Scalar, typename Store>
inline void
finish_row(const Scalar* o, Scalar m, Scalar l, std::int64_t d_v, Store* out, Scalar* lse) {
    if (l == Scalar(0)) { // one test per row, so the loop below vectorizes
        std::fill(out, out + d_v, Store(Scalar(0)));
        *lse = kNegInf<Scalar>;
        return;
    }
    const Scalar inv = Scalar(1) / l;
    for (std::int64_t z = 0; z < d_v; ++z)
        out[z] = Store(o[z] * inv);
    *lse = Scalar(0.6931471805599453) * (m + std::log2(l));
}

/// One batch of nk <= 2 kLanes keys (K rows kr, V rows vr) for one row: s = q . K_j, the
/// online softmax step (one max, one rescale, one exp per vector) and O = alpha O + P V.
template <typename Scalar, typename Store>
inline void row_batch(const Problem& p,
                      const Store* const* kr,
                      const Store* const* vr,
                      std::int64_t nk,
                      const QWord<Store>* q,
                      Scalar* o,
                      Scalar& m,
                      Scalar& l) {
    constexpr int kL = Simd<Scalar>::kLanes;
    alignas(64) Scalar w[static_cast<std::size_t>(2 * kL)];
    // --- s = q . K_j (scale * log2 e in q, or times the pairs' sums); past the batch -inf ---
    Pair<Scalar> s;
    if constexpr (kPairScores<Store>)
        s = pair_dp_dots(
            q, kr, nk, p.d, static_cast<Scalar>(p.scale * kernels::kLog2e), kNegInf<Scalar>);
    else
        s = pair_dots(q, kr, nk, p.d, kNegInf<Scalar>);
    // --- m' = max(m, s); alpha = 2^(m - m'); P = 2^(s - m') ---
    const Scalar mx =
        std::max(m,
                 lanes_max<Scalar>(kernels::max_ignoring_nan<Scalar>(
                     s.lo == s.lo ? s.lo : kernels::splat<Scalar>(kNegInf<Scalar>), s.hi)));
    const Vec<Scalar> m_safe = kernels::splat<Scalar>(mx == kNegInf<Scalar> ? Scalar(0) : mx);
    const Vec<Scalar> p_lo = kernels::exp2_diff<Scalar>(s.lo, m_safe);
    const Vec<Scalar> p_hi = kernels::exp2_diff<Scalar>(s.hi, m_safe);
    const bool rescale = mx != m;
    Scalar alpha = 1;
    if (rescale)
        alpha = kernels::exp2_diff<Scalar>(kernels::splat<Scalar>(m), m_safe)[0];
    l = alpha * l + lanes_sum<Scalar>(p_lo + p_hi); // l = 2^(m - m') l + rowsum(P)
    m = mx;
    // --- O = alpha O + P V ---
    kernels::store(w, p_lo);
    kernels::store(w + kL, p_hi);
    pair_axpy(o, rescale ? &alpha : nullptr, w, vr, nk, p.d_v);
}

/// Rows x < r (q rows at q + x pq, O rows at o + x po, m[x], l[x]) over the same n keys,
/// two vectors of keys per batch (2 kLanes dot products in flight), each batch's K and V rows
/// read by every row while they are in L1. One row is run_row; a few rows that see the same
/// keys (global rows, the fused forward's narrow blocks) share the batches.
template <typename Store>
void shared_rows(const ForwardArgs<Store>& a,
                 std::int64_t b,
                 std::int64_t g,
                 const std::int64_t* keys,
                 std::int64_t n,
                 std::int64_t r,
                 const QWord<Store>* q,
                 std::int64_t pq,
                 Accumulator<Store>* o,
                 std::int64_t po,
                 Accumulator<Store>* m,
                 Accumulator<Store>* l) {
    constexpr int kL = Simd<Accumulator<Store>>::kLanes;
    constexpr auto kB = static_cast<std::size_t>(2 * kL);
    const Problem& p = a.problem;
    const Store* kr[kB];
    const Store* vr[kB];
    const Store* kb = a.k.row(b, g, 0);
    const Store* vb = a.v.row(b, g, 0);
    const std::int64_t sk = a.k.stride_row, sv = a.v.stride_row;
    for (std::int64_t k0 = 0; k0 < n; k0 += 2 * kL) {
        const std::int64_t nk = std::min<std::int64_t>(2 * kL, n - k0);
        for (std::int64_t k = 0; k < nk; ++k) {
            kr[k] = kb + keys[k0 + k] * sk;
            vr[k] = vb + keys[k0 + k] * sv;
        }
        for (std::int64_t x = 0; x < r; ++x)
            row_batch(p, kr, vr, nk, q + x * pq, o + x * po, m[x], l[x]);
    }
}

/// One row's run of n keys: the online softmax over them (shared_rows of one row; m and l in
/// registers over the run).
template <typename Store, typename Scalar = Accumulator<Store>>
void run_row(const ForwardArgs<Store>& a,
             std::int64_t b,
             std::int64_t g,
             const std::int64_t* keys,
             std::int64_t n,
             const QWord<Store>* q,
             Scalar* o,
             Scalar& m_row,
             Scalar& l_row) {
    Scalar m = m_row, l = l_row;
    shared_rows(a, b, g, keys, n, 1, q, 0, o, 0, &m, &l);
    m_row = m;
    l_row = l;
}

/// The rows of `rows` over their runs, lane k = row k: the t-th keys of all rows in one batch
/// (one dot product each and one transposing reduction) for every t, the softmax of every row
/// over its n keys in one vector, then each row's O = alpha O + sum_t p_t V_(j_t) in one pass
/// over O. Alone, a row of a few keys runs its chain (dots, reduction, max, exp, sum, axpy)
/// with nothing beside it to overlap. One pass over O per row, not one per key: 1.14x on
/// bigbird's random pairs (ioattn run --N 16384 --d 64 --pattern bigbird:0:0:3 --schedule
/// fused --threads 2 --repeat 30). Aligned to 64 bytes, as batch_axpy, so that the placement of
/// its loops does not move with the size of unrelated code (which moved random:0.02 by 2-6%
/// with identical instructions).
template <typename Store, typename Scalar = Accumulator<Store>>
[[gnu::aligned(64)]] void run_rows(const ForwardArgs<Store>& a,
                                   std::int64_t b,
                                   std::int64_t g,
                                   const ShortRows<Scalar>& rows,
                                   const ForwardState<Scalar>& w) {
    constexpr int kL = ShortRows<Scalar>::kL;
    constexpr std::size_t kN = ShortRows<Scalar>::kN;
    constexpr auto kT = static_cast<std::size_t>(kShortRun);
    const Problem& p = a.problem;
    const int nr = rows.count; // lanes past nr compute on zeros and are not stored
    const std::int64_t n = rows.n;
    alignas(64) Scalar m[kN], l[kN], alpha[kN], pw[kT][kN];
    const QWord<Store>* xs[kN];
    const Store* kr[kN];
    for (int k = 0; k < kL; ++k) {
        m[k] = k < nr ? w.m[rows.x[k]] : kNegInf<Scalar>;
        l[k] = k < nr ? w.l[rows.x[k]] : Scalar(0);
        if (k < nr)
            xs[k] = q_row<Store>(w, rows.x[k]);
    }
    const Vec<Scalar> mv = kernels::load(m);
    const Store* kb = a.k.row(b, g, 0);
    const Store* vb = a.v.row(b, g, 0);
    // --- s_t = q . K_(j_t) for every t; m' = max(m, s_0, ..); alpha = 2^(m - m') ---
    Vec<Scalar> s[kT];
    Vec<Scalar> mx = mv;
    for (std::int64_t t = 0; t < n; ++t) {
        for (int k = 0; k < nr; ++k)
            kr[k] = kb + rows.keys[k][t] * a.k.stride_row;
        kernels::with_count<kL>(nr, [&](auto c) {
            constexpr int kC = decltype(c)::value;
            if constexpr (kPairScores<Store>) // lanes past nr: 0 (not stored)
                s[t] = dp_dots_of<kC>([&xs](int k) { return xs[k]; }, kr, p.d) *
                       static_cast<Scalar>(p.scale * kernels::kLog2e);
            else
                s[t] = paired_dots<Scalar, kC>(xs, kr, p.d);
        });
        mx = kernels::max_ignoring_nan<Scalar>(mx, s[t]);
    }
    const Vec<Scalar> m_safe = mx == kernels::splat<Scalar>(kNegInf<Scalar>) ? Vec<Scalar>{} : mx;
    const Vec<Scalar> av = kernels::exp2_diff<Scalar>(mv, m_safe);
    Vec<Scalar> lv = av * kernels::load(l);
    for (std::int64_t t = 0; t < n; ++t) { // p_t = 2^(s_t - m'); l = alpha l + sum_t p_t
        const Vec<Scalar> pv = kernels::exp2_diff<Scalar>(s[t], m_safe);
        lv += pv;
        kernels::store(pw[t], pv);
    }
    kernels::store(alpha, av);
    // --- O = alpha O + sum_t p_t V_(j_t), per row ---
    kernels::with_count<kShortRun>(n, [&](auto c) {
        constexpr int kC = decltype(c)::value;
        const Store* vr[kT];
        Scalar pk[kT];
        for (int k = 0; k < nr; ++k) {
            for (int t = 0; t < kC; ++t) {
                vr[t] = vb + rows.keys[k][t] * a.v.stride_row;
                pk[t] = pw[t][k];
            }
            batch_axpy<Scalar, kC>(w.o + rows.x[k] * w.pdv,
                                   alpha[k] == Scalar(1) ? nullptr : alpha + k,
                                   pk,
                                   vr,
                                   p.d_v);
        }
    });
    kernels::store(m, mx);
    kernels::store(l, lv);
    for (int k = 0; k < nr; ++k) {
        w.m[rows.x[k]] = m[k];
        w.l[rows.x[k]] = l[k];
    }
}

/// Rows x < r of w over their runs of keys (run_of(x): row x's keys and how many, a pair): a
/// run longer than kShortRun alone (run_row), shorter ones in batches of kLanes rows of one
/// run length (ShortBatches, run_rows). The element kernel's panel visits
/// (forward_element.cpp) and the split's pairs inside the tile blocks (block_element.hpp).
template <typename Store, typename RunOf, typename Scalar = Accumulator<Store>>
void element_runs(const ForwardArgs<Store>& a,
                  std::int64_t b,
                  std::int64_t g,
                  std::int64_t r,
                  const ForwardState<Scalar>& w,
                  RunOf run_of) {
    ShortBatches<Scalar> short_runs;
    const auto run_batch = [&](const ShortRows<Scalar>& batch) { run_rows(a, b, g, batch, w); };
    for (std::int64_t x = 0; x < r; ++x) {
        const auto [keys, n] = run_of(x);
        if (n == 0)
            continue;
        if (n > kShortRun)
            run_row(a, b, g, keys, n, q_row<Store>(w, x), w.o + x * w.pdv, w.m[x], w.l[x]);
        else
            short_runs.add(x, keys, n, run_batch);
    }
    short_runs.flush(run_batch);
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
