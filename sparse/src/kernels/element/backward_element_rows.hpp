#pragma once
// The arithmetic of backward_element (backward_element.cpp) on a block's resident rows: one
// row over its run in a panel (query_row: dQ; key_row: dK, dV), and kLanes rows over short
// runs of one length at once (query_rows, key_rows; short_runs.hpp). Every pair's score, P and
// dS are the same lanes of the same dot products either way (transpose_sums keeps one tree per
// lane), and each row's sums add its pairs in key order, so a batched row's gradient is the
// one-row path's, bit for bit. Compiled once per instruction set, like the kernel.

#include "kernels/element/element_ops.hpp"
#include "kernels/element/panels.hpp"
#include "kernels/element/short_runs.hpp"

#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/tile.hpp>
#include <ioattn/sparse/backward.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

using kernels::Simd;
using kernels::Vec;

/// Resident rows of one block: two rows of width d (x, its gradient) and two of d_v (y, its
/// gradient), and per row L in base 2 and D (sweep Q). Sweep Q: x = scaled Q, gx = dQ, y =
/// dO; sweep K: x = scaled K, gx = dK, y = V, gy = dV.
template <typename Scalar>
struct Rows {
    std::int64_t pd = 0, pdv = 0;
    Scalar *x = nullptr, *y = nullptr, *gx = nullptr, *gy = nullptr, *l2 = nullptr, *dd = nullptr;

    static std::int64_t words(const Problem& p, std::int64_t rows) {
        const auto w = ElementWords::of(sizeof(Scalar));
        return rows * (2 * w.pad(p.d) + 2 * w.pad(p.d_v)) + 2 * w.pad(rows);
    }

    Rows() = default;

    Rows(Scalar* base, const Problem& p, std::int64_t rows) {
        const auto w = ElementWords::of(sizeof(Scalar));
        pd = w.pad(p.d);
        pdv = w.pad(p.d_v);
        x = base;
        gx = x + rows * pd;
        y = gx + rows * pd;
        gy = y + rows * pdv;
        l2 = gy + rows * pdv;
        dd = l2 + w.pad(rows);
    }
};

/// Sweep Q, row x over its n keys (K rows at kb, V rows at vb): per batch of 2 kLanes keys
/// s = q . K_j, dP = dO . V_j, P = 2^(s - L), dS = P o (dP - D), dQ += dS K_j.
template <typename Scalar>
void query_row(const BackwardArgs<Scalar>& a,
               const Scalar* kb,
               const Scalar* vb,
               const std::int64_t* keys,
               std::int64_t n,
               const Rows<Scalar>& w,
               std::int64_t x) {
    constexpr int kL = Simd<Scalar>::kLanes;
    constexpr auto kB = static_cast<std::size_t>(2 * kL);
    const Problem& p = a.problem;
    const Scalar* q = w.x + x * w.pd;
    const Scalar* d_o = w.y + x * w.pdv;
    Scalar* dq = w.gx + x * w.pd;
    const Vec<Scalar> l2 = kernels::splat<Scalar>(w.l2[x]);
    const Vec<Scalar> dd = kernels::splat<Scalar>(w.dd[x]);
    const Scalar* kr[kB];
    const Scalar* vr[kB];
    alignas(64) Scalar ds[kB];
    for (std::int64_t k0 = 0; k0 < n; k0 += 2 * kL) {
        const std::int64_t nk = std::min<std::int64_t>(2 * kL, n - k0);
        for (std::int64_t k = 0; k < nk; ++k) {
            kr[k] = kb + keys[k0 + k] * a.k.stride_row;
            vr[k] = vb + keys[k0 + k] * a.v.stride_row;
        }
        const auto sc = pair_dots(q, kr, nk, p.d, Scalar(0));
        const auto dp = pair_dots(d_o, vr, nk, p.d_v, Scalar(0));
        kernels::store(ds, kernels::exp2_diff<Scalar>(sc.lo, l2) * (dp.lo - dd));
        kernels::store(ds + kL, kernels::exp2_diff<Scalar>(sc.hi, l2) * (dp.hi - dd));
        pair_axpy(dq, static_cast<const Scalar*>(nullptr), ds, kr, nk, p.d);
    }
}

/// Sweep Q, up to kLanes rows with runs of rows.n keys, lane k = row k: the t-th pairs of all
/// rows in one batch of dot products for every t, then each row's dQ += sum_t dS_t K_(j_t) in
/// one pass over its dQ row.
template <typename Scalar>
void query_rows(const BackwardArgs<Scalar>& a,
                const Scalar* kb,
                const Scalar* vb,
                const ShortRows<Scalar>& rows,
                const Rows<Scalar>& w) {
    constexpr int kL = ShortRows<Scalar>::kL;
    constexpr std::size_t kN = ShortRows<Scalar>::kN;
    constexpr auto kT = static_cast<std::size_t>(kShortRun);
    const Problem& p = a.problem;
    const int nr = rows.count; // lanes past nr compute on zeros and are not stored
    alignas(64) Scalar l2[kN], dd[kN], ds[kT][kN];
    const Scalar* xs[kN];
    const Scalar* ys[kN];
    const Scalar* kr[kN];
    const Scalar* vr[kN];
    for (int k = 0; k < kL; ++k) {
        const bool in = k < nr;
        l2[k] = in ? w.l2[rows.x[k]] : std::numeric_limits<Scalar>::infinity();
        dd[k] = in ? w.dd[rows.x[k]] : Scalar(0);
        if (in) {
            xs[k] = w.x + rows.x[k] * w.pd;
            ys[k] = w.y + rows.x[k] * w.pdv;
        }
    }
    const Vec<Scalar> l2v = kernels::load(l2), ddv = kernels::load(dd);
    // --- per t: s = q . K_(j_t), dP = dO . V_(j_t), dS = 2^(s - L) o (dP - D) ---
    for (std::int64_t t = 0; t < rows.n; ++t) {
        for (int k = 0; k < nr; ++k) {
            kr[k] = kb + rows.keys[k][t] * a.k.stride_row;
            vr[k] = vb + rows.keys[k][t] * a.v.stride_row;
        }
        kernels::with_count<kL>(nr, [&](auto c) {
            constexpr int kC = decltype(c)::value;
            const Vec<Scalar> s = paired_dots<Scalar, kC>(xs, kr, p.d);
            const Vec<Scalar> dp = paired_dots<Scalar, kC>(ys, vr, p.d_v);
            kernels::store(ds[t], kernels::exp2_diff<Scalar>(s, l2v) * (dp - ddv));
        });
    }
    // --- dQ += sum_t dS_t K_(j_t), per row ---
    kernels::with_count<kShortRun>(rows.n, [&](auto c) {
        constexpr int kC = decltype(c)::value;
        const Scalar* kt[kT];
        Scalar wt[kT];
        for (int k = 0; k < nr; ++k) {
            for (int t = 0; t < kC; ++t) {
                kt[t] = kb + rows.keys[k][t] * a.k.stride_row;
                wt[t] = ds[t][k];
            }
            batch_axpy<Scalar, kC>(
                w.gx + rows.x[k] * w.pd, static_cast<const Scalar*>(nullptr), wt, kt, p.d);
        }
    });
}

/// Sweep K, key row y over its n queries (Q rows at qb, dO rows at ob, (L in base 2, D) pairs
/// per query at pairs): per batch of 2 kLanes queries s, dP, P, dS as in sweep Q (L, D
/// gathered), dV += P dO_i, dK += dS Q_i.
template <typename Scalar>
void key_row(const BackwardArgs<Scalar>& a,
             const Scalar* qb,
             const Scalar* ob,
             const Scalar* pairs,
             const std::int64_t* queries,
             std::int64_t n,
             const Rows<Scalar>& w,
             std::int64_t y) {
    constexpr int kL = Simd<Scalar>::kLanes;
    constexpr auto kB = static_cast<std::size_t>(2 * kL);
    const Problem& p = a.problem;
    const Scalar* k = w.x + y * w.pd;
    const Scalar* vv = w.y + y * w.pdv;
    Scalar* dk = w.gx + y * w.pd;
    Scalar* dv = w.gy + y * w.pdv;
    const Scalar* qr[kB];
    const Scalar* dor[kB];
    alignas(64) Scalar l2[kB];
    alignas(64) Scalar dd[kB];
    alignas(64) Scalar ds[kB];
    for (std::int64_t k0 = 0; k0 < n; k0 += 2 * kL) {
        const std::int64_t nq = std::min<std::int64_t>(2 * kL, n - k0);
        for (std::int64_t x = 0; x < nq; ++x) { // the batch's queries and their L, D
            const std::int64_t i = queries[k0 + x];
            qr[x] = qb + i * a.q.stride_row;
            dor[x] = ob + i * a.d_o.stride_row;
            l2[x] = pairs[2 * i];
            dd[x] = pairs[2 * i + 1];
        }
        key_batch<Scalar, false>(p, k, vv, qr, dor, nq, l2, dd, dk, dv, ds);
    }
}

/// Sweep K, up to kLanes key rows with runs of rows.n queries, lane k = key k: the t-th pairs
/// of all keys in one batch for every t, then each key's dV += sum_t P_t dO_(i_t) and dK +=
/// sum_t dS_t Q_(i_t) in one pass over its rows.
template <typename Scalar>
void key_rows(const BackwardArgs<Scalar>& a,
              const Scalar* qb,
              const Scalar* ob,
              const Scalar* pairs,
              const ShortRows<Scalar>& rows,
              const Rows<Scalar>& w) {
    constexpr int kL = ShortRows<Scalar>::kL;
    constexpr std::size_t kN = ShortRows<Scalar>::kN;
    constexpr auto kT = static_cast<std::size_t>(kShortRun);
    const Problem& p = a.problem;
    const int nr = rows.count; // lanes past nr compute on zeros and are not stored
    alignas(64) Scalar l2[kN], dd[kN], pw[kT][kN], ds[kT][kN];
    const Scalar* xs[kN];
    const Scalar* ys[kN];
    const Scalar* qr[kN];
    const Scalar* dor[kN];
    for (int k = 0; k < nr; ++k) {
        xs[k] = w.x + rows.x[k] * w.pd;
        ys[k] = w.y + rows.x[k] * w.pdv;
    }
    // --- per t: s = k . Q_(i_t), dP = v . dO_(i_t), P = 2^(s - L_i), dS = P o (dP - D_i) ---
    for (std::int64_t t = 0; t < rows.n; ++t) {
        for (int k = 0; k < kL; ++k) {
            const bool in = k < nr;
            const std::int64_t i = in ? rows.keys[k][t] : 0;
            qr[k] = qb + i * a.q.stride_row;
            dor[k] = ob + i * a.d_o.stride_row;
            l2[k] = in ? pairs[2 * i] : std::numeric_limits<Scalar>::infinity();
            dd[k] = in ? pairs[2 * i + 1] : Scalar(0);
        }
        kernels::with_count<kL>(nr, [&](auto c) {
            constexpr int kC = decltype(c)::value;
            const Vec<Scalar> s = paired_dots<Scalar, kC>(xs, qr, p.d);
            const Vec<Scalar> dp = paired_dots<Scalar, kC>(ys, dor, p.d_v);
            const Vec<Scalar> pv = kernels::exp2_diff<Scalar>(s, kernels::load(l2));
            kernels::store(pw[t], pv);
            kernels::store(ds[t], pv * (dp - kernels::load(dd)));
        });
    }
    // --- dV += sum_t P_t dO_(i_t), dK += sum_t dS_t Q_(i_t), per key ---
    kernels::with_count<kShortRun>(rows.n, [&](auto c) {
        constexpr int kC = decltype(c)::value;
        const Scalar* ot[kT];
        const Scalar* qt[kT];
        Scalar pt[kT], st[kT];
        for (int k = 0; k < nr; ++k) {
            for (int t = 0; t < kC; ++t) {
                const std::int64_t i = rows.keys[k][t];
                ot[t] = ob + i * a.d_o.stride_row;
                qt[t] = qb + i * a.q.stride_row;
                pt[t] = pw[t][k];
                st[t] = ds[t][k];
            }
            const std::int64_t y = rows.x[k];
            batch_axpy<Scalar, kC>(
                w.gy + y * w.pdv, static_cast<const Scalar*>(nullptr), pt, ot, p.d_v);
            batch_axpy<Scalar, kC>(
                w.gx + y * w.pd, static_cast<const Scalar*>(nullptr), st, qt, p.d);
        }
    });
}

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
