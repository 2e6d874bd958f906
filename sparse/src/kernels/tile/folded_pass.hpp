#pragma once
// The arithmetic of the folded key blocks of the fused sparse backward (folded_keys.hpp: the
// schedule and the words each step moves, which these functions count):
//   fold_segment (pass 0): a segment's pairs key by key, queries in batches of 2 kLanes
//     (key_batch, as a narrow chunk runs them): s = q . (scale log2(e) K_x), dP =
//     dO . V_x, P = 2^(min(s, L2) - L2) (<= 1, as the tile path's), dS = P o (dP - D);
//     dV_x += P dO, dK_x += dS Q into the segment's partial rows; dS into its slots, 0
//     outside Omega
//   fold_reduce (pass R): dQ_i += sum_x dS_ix (scale K_x) over the allowed pairs of the
//     block's segments, after the partials' sum
//   fold_merge: dK_x = scale sum, dV_x = sum of the partials over the group's heads, then the
//     segments in query-block order
// Every sum in a fixed order: thread-count invariant. Only allowed pairs are touched: a
// non-finite row reaches only the pairs that see it. A kernel header: compiled once per
// instruction set inside backward_fused.cpp.

#include "kernels/common/row_source.hpp"
#include "kernels/element/element_ops.hpp"
#include "kernels/tile/backward_fused_parts.hpp"
#include "kernels/tile/folded_keys.hpp"
#include "kernels/tile/narrow_chunk.hpp"

#include <ioattn/io_counter.hpp>
#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/sparse/backward.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// The folds' storage: per slice, the dS slots and each segment's partial dK, dV rows
/// (kFoldKeys rows of dw, then of dvw: lane-padded, zero past d).
template <typename Scalar>
struct FoldStore {
    Scalar* slots = nullptr;
    Scalar* parts = nullptr;
    std::int64_t dw = 0, dvw = 0, slot_count = 0, segments = 0;

    static std::int64_t part_words(const Problem& p) {
        return kFoldKeys * (lane_padded(p.d) + lane_padded(p.d_v));
    }

    [[nodiscard]] Scalar* slot(std::int64_t slice, std::int64_t at) const {
        return slots + slice * slot_count + at;
    }

    [[nodiscard]] Scalar* part(std::int64_t slice, std::int64_t seg) const {
        return parts + (slice * segments + seg) * kFoldKeys * (dw + dvw);
    }
};

/// Membership of ascending queries in a key's sorted row: by its ends when it is one interval
/// (no index walked), else by a cursor from the first query asked about.
class RowWalk {
public:
    RowWalk() = default;

    RowWalk(std::span<const std::int64_t> row, std::int64_t from)
        : row_(row)
        , interval_(interval(row))
        , at_(interval_ ? 0 : std::lower_bound(row.begin(), row.end(), from) - row.begin()) {}

    /// Whether the row holds i; i ascends from call to call.
    bool sees(std::int64_t i) {
        if (interval_)
            return !row_.empty() && i >= row_.front() && i <= row_.back();
        if (at_ == std::ssize(row_) || row_[static_cast<std::size_t>(at_)] != i)
            return false;
        ++at_;
        return true;
    }

private:
    std::span<const std::int64_t> row_;
    bool interval_ = true;
    std::int64_t at_ = 0;
};

/// Pass 0: segment s (index seg) of query head `slice`; D of its queries in `delta`; `tmp`
/// holds kFoldKeys (dw + dvw) words.
template <typename Scalar, typename Counter>
void fold_segment(const BackwardArgs<Scalar>& a,
                  const Support& st,
                  const BlockKeys& kplan,
                  const FoldSegment& s,
                  std::int64_t seg,
                  std::int64_t slice,
                  const Scalar* delta,
                  const FoldStore<Scalar>& fs,
                  Scalar* tmp,
                  Counter& io) {
    using kernels::Vec;
    constexpr int kL = kernels::Simd<Scalar>::kLanes;
    constexpr auto kB = static_cast<std::size_t>(2 * kL);
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const std::int64_t kv = b * p.kv_heads + g;
    const std::int64_t j0 = kplan.row0(s.block), rk = kplan.rows(s.block);
    const auto queries = s.queries(kplan);
    const auto n = static_cast<std::int64_t>(queries.size());
    io.acquire(fold_words(p, rk, n));
    io.read({Operand::k, kv, j0, rk, 0, p.d});
    io.read({Operand::v, kv, j0, rk, 0, p.d_v});
    read_gathered(io, Operand::q, slice, RowSource<Scalar>{a.q, nullptr}, b, h, queries.data(), n);
    io.read({Operand::lse, slice, queries[0], n, 0, 1});
    if (s.walk > 0)
        io.read({Operand::index, slice, s.block, 1, 0, s.walk * kIndexReadWords<Scalar>});
    io.complete({Operand::scores,
                 slice,
                 queries[0],
                 queries[static_cast<std::size_t>(n - 1)] - queries[0] + 1,
                 j0,
                 rk}); // on Omega
    if constexpr (Counter::kComputes) {
        const std::int64_t dw = fs.dw, dvw = fs.dvw;
        Scalar* kx = tmp;                  // the block's K rows, scaled by scale log2(e)
        Scalar* vx = tmp + kFoldKeys * dw; // and V rows
        Scalar* dk = fs.part(slice, seg);
        Scalar* dv = dk + kFoldKeys * dw;
        std::fill(dk, dv + kFoldKeys * dvw, Scalar(0));
        const auto ks = static_cast<Scalar>(p.scale * kernels::kLog2e);
        const Scalar* q_rows[kB];
        const Scalar* do_rows[kB];
        Scalar* at[kB];
        alignas(64) Scalar l2[kB];
        alignas(64) Scalar dd[kB];
        alignas(64) Scalar ds[kB];
        load_rows(a.k, b, g, j0, rk, ks, kx, dw);
        load_rows(a.v, b, g, j0, rk, Scalar(1), vx, dvw);
        for (std::int64_t x = 0; x < rk; ++x) {
            std::int64_t nb = 0;
            const auto batch = [&] { // --- the nb pairs gathered so far ---
                key_batch(p,
                          kx + x * dw,
                          vx + x * dvw,
                          q_rows,
                          do_rows,
                          nb,
                          l2,
                          dd,
                          dk + x * dw,
                          dv + x * dvw,
                          ds);
                for (std::int64_t u = 0; u < nb; ++u)
                    *at[u] = ds[u];
                nb = 0;
            };
            RowWalk walk(st.row(j0 + x), queries[0]); // the key's queries
            for (std::int64_t y = 0; y < n; ++y) {
                const std::int64_t i = queries[static_cast<std::size_t>(y)];
                Scalar* slot = fs.slot(slice, s.slot + y * rk + x);
                if (!walk.sees(i)) { // outside Omega: dS = 0
                    *slot = Scalar(0);
                    continue;
                }
                q_rows[nb] = a.q.row(b, h, i);
                do_rows[nb] = a.d_o.row(b, h, i);
                l2[nb] = kernels::lse2(*a.lse.row(b, h, i));
                dd[nb] = delta[slice * p.n_q + i];
                at[nb++] = slot;
                if (nb == static_cast<std::int64_t>(kB))
                    batch();
            }
            if (nb > 0)
                batch();
        }
    }
    io.write({Operand::d_scores, slice, queries[0], n, j0, rk});
    io.write({Operand::d_k, kv, j0, rk, 0, p.d}); // the segment's partial sums
    io.write({Operand::d_v, kv, j0, rk, 0, p.d_v});
    io.release(fold_words(p, rk, n));
}

/// Pass R: the terms of query block `qblk`'s segments added into its dQ rows (written by the
/// caller after this); `tmp` holds kFoldKeys dw words.
template <typename Scalar, typename Counter>
void fold_reduce(const BackwardArgs<Scalar>& a,
                 const Support& st,
                 const BlockKeys& kplan,
                 const Folds& f,
                 std::int64_t qblk,
                 std::int64_t slice,
                 const FoldStore<Scalar>& fs,
                 Scalar* tmp,
                 Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const std::int64_t kv = b * p.kv_heads + g;
    for (const FoldSegment& s : f.segments_of(qblk)) {
        const std::int64_t j0 = kplan.row0(s.block), rk = kplan.rows(s.block);
        const auto queries = s.queries(kplan);
        const auto n = static_cast<std::int64_t>(queries.size());
        io.acquire(fold_reduce_words(p, rk, n));
        io.read({Operand::k, kv, j0, rk, 0, p.d});
        io.read({Operand::d_scores, slice, queries[0], n, j0, rk});
        if (s.walk > 0)
            io.read({Operand::index, slice, s.block, 1, 0, s.walk * kIndexReadWords<Scalar>});
        if constexpr (Counter::kComputes) {
            const std::int64_t dw = fs.dw;
            load_rows(a.k, b, g, j0, rk, static_cast<Scalar>(p.scale), tmp, dw);
            RowWalk walks[kFoldKeys]; // each key's queries
            for (std::int64_t x = 0; x < rk; ++x)
                walks[x] = RowWalk(st.row(j0 + x), queries[0]);
            for (std::int64_t y = 0; y < n; ++y) {
                const std::int64_t i = queries[static_cast<std::size_t>(y)];
                Scalar* out = a.d_q.row(b, h, i);
                for (std::int64_t x = 0; x < rk; ++x) {
                    if (!walks[x].sees(i))
                        continue; // outside Omega: no term (0 * a non-finite K would be NaN)
                    const Scalar w = *fs.slot(slice, s.slot + y * rk + x);
                    const Scalar* kr = tmp + x * dw;
                    for (std::int64_t z = 0; z < p.d; ++z)
                        out[z] += w * kr[z];
                }
            }
        }
        io.release(fold_reduce_words(p, rk, n));
    }
}

/// After pass A: dK, dV of folded block f.blocks[u] for kv slice `kv`; `tmp` holds kFoldKeys
/// (dw + dvw) words.
template <typename Scalar, typename Counter>
void fold_merge(const BackwardArgs<Scalar>& a,
                const BlockKeys& kplan,
                const Folds& f,
                std::int64_t u,
                std::int64_t kv,
                const FoldStore<Scalar>& fs,
                Scalar* tmp,
                Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = kv / p.kv_heads, g = kv % p.kv_heads;
    const std::int64_t j = f.blocks[static_cast<std::size_t>(u)];
    const std::int64_t j0 = kplan.row0(j), rk = kplan.rows(j);
    const std::int64_t words = rk * (p.d + p.d_v);
    io.acquire(2 * words);
    const std::int64_t dw = fs.dw, dvw = fs.dvw;
    Scalar* dk = tmp;
    Scalar* dv = tmp + kFoldKeys * dw;
    if constexpr (Counter::kComputes)
        std::fill(dk, dv + kFoldKeys * dvw, Scalar(0));
    for (std::int64_t hh = 0; hh < p.group(); ++hh) {
        const std::int64_t slice = b * p.heads + g * p.group() + hh;
        for (std::int64_t t = 0; t < std::ssize(f.segments); ++t) {
            if (f.segments[static_cast<std::size_t>(t)].block != j)
                continue;
            io.read({Operand::d_k, kv, j0, rk, 0, p.d}); // the segment's partial sums
            io.read({Operand::d_v, kv, j0, rk, 0, p.d_v});
            if constexpr (Counter::kComputes) {
                const Scalar* pk = fs.part(slice, t);
                const Scalar* pv = pk + kFoldKeys * dw;
                for (std::int64_t x = 0; x < rk * dw; ++x)
                    dk[x] += pk[x];
                for (std::int64_t x = 0; x < rk * dvw; ++x)
                    dv[x] += pv[x];
            }
        }
    }
    if constexpr (Counter::kComputes) {
        store_rows(a.d_k, b, g, j0, rk, dk, dw, static_cast<Scalar>(p.scale), false);
        store_rows(a.d_v, b, g, j0, rk, dv, dvw, Scalar(1), false);
    }
    io.write({Operand::d_k, kv, j0, rk, 0, p.d});
    io.write({Operand::d_v, kv, j0, rk, 0, p.d_v});
    io.release(2 * words);
}

/// The folds of one backward call: their plan, their storage (workspaces sized in the caller's
/// open CallMemory) and the three steps, each called by the caller's parallel loops.
template <typename Scalar>
class FoldRun {
public:
    FoldRun(const Problem& p, const Folds& f, bool computes, int workers)
        : p_(p)
        , f_(f)
        , on_(computes && f.any())
        , store_(on_ ? 1 : 0,
                 p.batch_heads() *
                     (f.slots + std::ssize(f.segments) * FoldStore<Scalar>::part_words(p)),
                 false)
        , tmp_(on_ ? workers : 0, FoldStore<Scalar>::part_words(p)) {}

    /// Pass 0 of query block qblk of `slice`, once its rows' D are in `delta`.
    template <typename Counter>
    void pass0(const BackwardArgs<Scalar>& a,
               const Support& st,
               const BlockKeys& kplan,
               std::int64_t slice,
               std::int64_t qblk,
               const Scalar* delta,
               int worker,
               Counter& io) const {
        for (const FoldSegment& s : f_.segments_of(qblk))
            fold_segment(
                a, st, kplan, s, &s - f_.segments.data(), slice, delta, store(), tmp(worker), io);
    }

    /// Merge tasks: one per (kv head, folded block).
    [[nodiscard]] std::int64_t merges() const {
        return p_.batch * p_.kv_heads * std::ssize(f_.blocks);
    }

    template <typename Counter>
    void merge(const BackwardArgs<Scalar>& a,
               const BlockKeys& kplan,
               std::int64_t task,
               int worker,
               Counter& io) const {
        const auto nf = std::ssize(f_.blocks);
        fold_merge(a, kplan, f_, task % nf, task / nf, store(), tmp(worker), io);
    }

    /// Pass R's terms of query block qblk of `slice`.
    template <typename Counter>
    void reduce(const BackwardArgs<Scalar>& a,
                const Support& st,
                const BlockKeys& kplan,
                std::int64_t slice,
                std::int64_t qblk,
                int worker,
                Counter& io) const {
        fold_reduce(a, st, kplan, f_, qblk, slice, store(), tmp(worker), io);
    }

private:
    [[nodiscard]] FoldStore<Scalar> store() const {
        if (!on_)
            return {};
        Scalar* base = store_.slab(0);
        return {base,
                base + p_.batch_heads() * f_.slots,
                lane_padded(p_.d),
                lane_padded(p_.d_v),
                f_.slots,
                std::ssize(f_.segments)};
    }

    [[nodiscard]] Scalar* tmp(int worker) const { return on_ ? tmp_.slab(worker) : nullptr; }

    const Problem& p_;
    const Folds& f_;
    bool on_;
    kernels::Workspace<Scalar> store_, tmp_;
};

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
