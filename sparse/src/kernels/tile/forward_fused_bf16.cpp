// ioattn::sparse::forward_fused_bf16: the fused sparse forward's tile variant (forward_fused.cpp)
// on bf16 views, with AVX512_BF16 dot products (kernels/tile_bf16.hpp: vdpbf16ps, 32 bf16
// products per instruction into fp32 lanes). Schedule, blocks, chunks, counted events and
// resident footprint are forward_fused's over dense operands without orders or element part:
//   parallel for each row block i (cut by rows and by nonzeros: support/block_keys.hpp):
//     read Q_i; the block's indices (BlockKeys::index_words)     r*d + index words(i)
//     for each chunk of <= Bc of the keys the block may see (kernels/tile/chunks.hpp):
//       read (gather) K rows, V rows                                        c*(d + d_v)
//       per slab of 64 lanes, over the chunk entries [lo, hi) some row of it sees:
//         S^T = (scale log2 e) K_c Q_i^T over bf16 pairs of d; entries outside Omega -> -inf;
//         online softmax writing P^T as bf16 pairs of keys; O_i^T = alpha O_i^T + V_c^T P^T
//     write O_i / l_i (bf16), L_i (fp32)                                    r*d_v + r
// Resident: Tiling::resident_words(p, forward, Kernels::sparse) <= M, as forward_fused: the
//   pairs of Q_i, P and V_c take at most the words of their fp32 forms (P overwrites S^T in
//   place; V_c's pairs and the bf16 copies of gathered K, V rows fit in the c*(d + d_v) of
//   the fp32 K_c, V_c).
// I/O = io_cost_forward_fused of the float problem = n_q*d + sum_i (|keys(i)|*(d + d_v) +
//   index words(i)) + n_q*(d_v + 1) per head, index words counted in fp32 words as there.
// Flops: 2*Z_QK*(d + d_v) useful, plus the masked entries of the slabs' spans.
// Precision (docs/design.md section 16): the dense native forward's. Q, K, V are used exactly,
// S, m, l, O accumulate in fp32, P is rounded to bf16 before P V (at most 2^-8 max|V| in O),
// O is rounded to bf16 once. Chunks that are intervals of K and V rows (a band's keys) are
// read in place; others are gathered as bf16 rows (half the bytes of the fp32 copies), as are
// K rows for odd d (zero-padded to pairs). A chunk whose V holds Inf or NaN and whose slab
// masks some entry sums each row over its allowed keys only (pv_allowed), so NaN never reaches
// a row that cannot see it. Every slab takes its rows' union of entries (no staggered slabs or
// narrow blocks: they change which masked entries are computed, never a result). The next
// block's rows are prefetched (next_block.hpp). One task per (batch, head, row block);
// thread-count invariant: each task owns its rows of O and L and runs a fixed sequence.
// Why: the float kernels on widened copies run at the fp32 FMA rate and stream fp32 copies;
// vdpbf16ps doubles the multiply-add rate and the bf16 rows are half the bytes.
// Tests: tests/sparse/forward_fused_bf16_test.cpp

#include "kernels/kernels_bf16.hpp"
#include "kernels/tile/chunks.hpp"
#include "support/block_keys.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

// The rest of this file is compiled for the avx512bf16 region (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include "kernels/common/row_source.hpp"
#include "kernels/common/validate.hpp"
#include "kernels/tile/forward_setup.hpp"
#include "kernels/tile/next_block.hpp"

#include <ioattn/kernels/pack_bf16.hpp>
#include <ioattn/kernels/softmax_bf16.hpp>
#include <ioattn/kernels/tile.hpp>
#include <ioattn/kernels/tile_bf16.hpp>

namespace ioattn::sparse::IOATTN_ISA {

namespace {

using kernels::pairs;

constexpr std::int64_t kLanes = 16;
/// Lane vectors of a slab: the micro-kernel's 4 vectors (64 rows).
constexpr std::int64_t kSlabVecs = kernels::kTileVecs;

/// Per-worker scratch of one row block, in fp32 words: the Q pairs (ceil(d/2) x rp), S^T
/// (c x rp; P's pairs overwrite its first ceil(c/2) rows), O^T (d_v x rp), m, l, alpha (rp
/// each); V_c's pairs (ceil(c/2) x d_v); a chunk's gathered K rows (c x dk bf16, dk = d
/// rounded up to even) and V rows (c x d_v bf16).
struct Scratch {
    std::int64_t rp = 0, dk = 0;
    float* qp = nullptr;
    float* st = nullptr;
    float* ot = nullptr;
    float* m = nullptr;
    float* l = nullptr;
    float* alpha = nullptr;
    float* vp = nullptr;
    bf16* kg = nullptr;
    bf16* vg = nullptr;

    static std::int64_t words(const Problem& p, const Tiling& t) {
        const std::int64_t rp = lane_padded(std::min(t.rows, p.n_q)), c = std::min(t.cols, p.n_k);
        return (pairs(p.d) + c + p.d_v + 3) * rp + pairs(c) * p.d_v +
               (c * (2 * pairs(p.d) + p.d_v) + 1) / 2;
    }

    Scratch() = default;

    Scratch(float* base, const Problem& p, const Tiling& t)
        : rp(lane_padded(std::min(t.rows, p.n_q)))
        , dk(2 * pairs(p.d)) {
        const std::int64_t c = std::min(t.cols, p.n_k);
        qp = base;
        st = qp + pairs(p.d) * rp;
        ot = st + c * rp;
        m = ot + p.d_v * rp;
        l = m + rp;
        alpha = l + rp;
        vp = alpha + rp;
        kg = reinterpret_cast<bf16*>(vp + pairs(c) * p.d_v);
        vg = kg + c * dk;
    }
};

/// What every row block of one call reads.
struct Call {
    const ForwardArgs<bf16>& a;
    const detail::Operands<bf16>& src; // dense: what next_block prefetches and the reads count
    const Support& s;
    const detail::BlockKeys& plan;
    const Tiling& t;
    const char* v_finite_slices; // per (batch, kv head): every V value finite
    std::int64_t resident;       // Tiling::resident_words
};

/// A chunk's K rows as pairs and its V rows (row y at v + y * ldv).
struct ChunkRows {
    kernels::PairRows k;
    const bf16* v = nullptr;
    std::int64_t ldv = 0;
    bool v_finite = true;
};

/// The rows' state of one block: its scratch, key cursors, rows and lane vectors.
struct Block {
    Scratch w;
    detail::RowCursors cur;
    std::int64_t i0 = 0, r = 0, n_vec = 0;
};

// --- Qp[p][x] = (Q[x][2p], Q[x][2p + 1]), lanes past r zero; O^T, m, l cleared ---
Block start_block(const Call& call,
                  std::int64_t b,
                  std::int64_t h,
                  std::int64_t blk,
                  float* base,
                  std::int64_t* cursor) {
    const Problem& p = call.a.problem;
    Block rs{Scratch(base, p, call.t), {}, call.plan.row0(blk), call.plan.rows(blk), 0};
    rs.n_vec = lane_padded(rs.r) / kLanes;
    const Scratch& w = rs.w;
    for (std::int64_t x = 0; x < w.rp; ++x) {
        const bf16* q = x < rs.r ? call.a.q.row(b, h, rs.i0 + x) : nullptr;
        for (std::int64_t e = 0; e < pairs(p.d); ++e)
            kernels::put_word(w.qp + e * w.rp + x,
                              q != nullptr ? kernels::pair_word(q, e, p.d) : 0U);
    }
    std::fill(w.ot, w.ot + p.d_v * w.rp, 0.0F);
    std::fill(w.m, w.m + w.rp, -std::numeric_limits<float>::infinity());
    std::fill(w.l, w.l + w.rp, 0.0F);
    rs.cur = detail::row_cursors(call.plan, rs.i0, rs.r, cursor);
    return rs;
}

/// The chunk kc[0, c)'s rows: in place when it is an interval (K too when d is even), else
/// gathered as bf16 rows into the scratch (K zero-padded to dk columns).
ChunkRows chunk_rows(const Call& call,
                     std::int64_t b,
                     std::int64_t g,
                     const std::int64_t* kc,
                     std::int64_t c,
                     const Scratch& w) {
    const ForwardArgs<bf16>& a = call.a;
    const Problem& p = a.problem;
    const bool finite = call.v_finite_slices[b * p.kv_heads + g] != 0;
    const bool interval = kc[c - 1] - kc[0] + 1 == c;
    ChunkRows rows{{w.kg, w.dk}, w.vg, p.d_v, finite};
    if (interval) {
        rows.v = a.v.row(b, g, kc[0]);
        rows.ldv = a.v.stride_row;
        if (p.d == w.dk) {
            rows.k = {a.k.row(b, g, kc[0]), a.k.stride_row};
            return rows;
        }
    }
    for (std::int64_t y = 0; y < c; ++y) { // --- gather K (and V) rows, K zero-padded ---
        std::copy_n(a.k.row(b, g, kc[y]), p.d, w.kg + y * w.dk);
        std::fill(w.kg + y * w.dk + p.d, w.kg + (y + 1) * w.dk, bf16(0.0F));
        if (!interval)
            std::copy_n(a.v.row(b, g, kc[y]), p.d_v, w.vg + y * p.d_v);
    }
    if (!interval && !finite)
        rows.v_finite = kernels::all_finite(w.vg, p.d_v, c, p.d_v);
    return rows;
}

/// O^T = alpha O^T on lanes [0, lanes), then each lane's row i + x adds P V over the n entries
/// keys[0, n) it is allowed (P as stored in its pairs at pt): a chunk whose V holds Inf or NaN
/// (the float kernel's rescale_accumulate_allowed).
void pv_allowed(const Support& s,
                std::int64_t i,
                const std::int64_t* keys,
                std::int64_t n,
                const float* pt,
                std::int64_t rp,
                std::int64_t lanes,
                const bf16* v,
                std::int64_t ldv,
                std::int64_t d_v,
                const float* alpha,
                float* ot) {
    for (std::int64_t x = 0; x < lanes; ++x) {
        for (std::int64_t z = 0; z < d_v; ++z)
            ot[z * rp + x] *= alpha[x];
        for (std::int64_t y = 0; y < n; ++y) {
            if (!s.contains(i + x, keys[y]))
                continue;
            const float pw = kernels::p_at(pt, rp, y, x);
            for (std::int64_t z = 0; z < d_v; ++z)
                ot[z * rp + x] += pw * static_cast<float>(v[y * ldv + z]);
        }
    }
}

/// One chunk kc[0, c) (keys y0.. of the block's list): per slab of 64 lanes, over the chunk
/// entries [lo, hi) some row of the slab may see, S^T = K Q^T, mask to Omega, online softmax,
/// P to bf16 pairs, O^T = alpha O^T + V^T P^T.
void chunk_products(const Call& call,
                    const Block& rs,
                    const std::int64_t* kc,
                    std::int64_t y0,
                    std::int64_t c,
                    const ChunkRows& rows) {
    const Problem& p = call.a.problem;
    const Scratch& w = rs.w;
    const auto qs = static_cast<float>(p.scale * 1.4426950408889634);
    for (std::int64_t u = 0; u < rs.n_vec; u += kSlabVecs) {
        const std::int64_t nv = std::min(kSlabVecs, rs.n_vec - u), x0 = u * kLanes;
        const std::int64_t x1 = std::min(rs.r, x0 + nv * kLanes);
        const auto [lo, hi] = detail::chunk_spans(call.s, rs.i0, rs.cur, x0, x1, kc, y0, c).hull();
        float* alpha = w.alpha + x0;
        if (lo == hi) { // nothing new for these rows
            std::fill(alpha, alpha + nv * kLanes, 1.0F);
            continue;
        }
        float* st = w.st + lo * w.rp + x0;
        const std::int64_t n = hi - lo;
        // --- S^T = (scale log2 e) K Q^T, pairs over d ---
        kernels::dp_rows(
            rows.k.from(lo), n, w.qp + x0, w.rp, pairs(p.d), nv, nullptr, qs, st, w.rp);
        // --- Omega: entries outside it -> -inf ---
        const bool partial = detail::mask_chunk(
            call.s, rs.i0 + x0, x1 - x0, kc + lo, y0 + lo, n, rs.cur.from(x0), st, w.rp);
        // --- online softmax: m, l, alpha; S^T becomes P^T's bf16 pairs ---
        kernels::softmax_pairs(st, w.rp, n, nv, w.m + x0, w.l + x0, alpha);
        // --- O^T = alpha O^T + V^T P^T, pairs over keys (P = 0 outside Omega: exact while V
        // is finite; otherwise each row over its allowed keys only) ---
        const bf16* v = rows.v + lo * rows.ldv;
        if (rows.v_finite || !partial) {
            kernels::pack_pairs(v, rows.ldv, n, p.d_v, w.vp, p.d_v);
            kernels::dp_rows(kernels::PairCols{w.vp, p.d_v},
                             p.d_v,
                             st,
                             w.rp,
                             pairs(n),
                             nv,
                             alpha,
                             1.0F,
                             w.ot + x0,
                             w.rp);
        } else {
            pv_allowed(call.s,
                       rs.i0 + x0,
                       kc + lo,
                       n,
                       st,
                       w.rp,
                       x1 - x0,
                       v,
                       rows.ldv,
                       p.d_v,
                       alpha,
                       w.ot + x0);
        }
    }
}

// --- O_i = O_i^T / l rounded to bf16 (0 for a row without keys), L_i = ln 2 (m + log2 l) ---
void finish(const Call& call, const Block& rs, std::int64_t b, std::int64_t h) {
    const ForwardArgs<bf16>& a = call.a;
    const Scratch& w = rs.w;
    for (std::int64_t x = 0; x < rs.r; ++x) {
        const float l = w.l[x];
        *a.lse.row(b, h, rs.i0 + x) = l == 0.0F ? -std::numeric_limits<float>::infinity()
                                                : 0.6931471805599453F * (w.m[x] + std::log2(l));
        const float inv = l == 0.0F ? 0.0F : 1.0F / l;
        bf16* o = a.o.row(b, h, rs.i0 + x);
        for (std::int64_t z = 0; z < a.problem.d_v; ++z) // 0, not 0 * (NaN of a hidden key)
            o[z] = l == 0.0F ? bf16(0.0F) : bf16(w.ot[z * w.rp + x] * inv);
    }
}

/// The serial body: one (slice, row block) task, counted as forward_fused counts it.
template <typename Counter>
void row_block(const Call& call,
               std::int64_t slice,
               std::int64_t blk,
               float* base,
               std::int64_t* cursor,
               Counter& io) {
    const Problem& p = call.a.problem;
    const detail::BlockKeys& plan = call.plan;
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const std::int64_t kv_slice = b * p.kv_heads + g;
    const std::int64_t i0 = plan.row0(blk), r = plan.rows(blk);
    const auto keys = plan.keys_of(blk);
    const auto nk = static_cast<std::int64_t>(keys.size());
    io.acquire(call.resident);
    detail::read_rows(io, Operand::q, slice, call.src.q, b, h, i0, r);
    // the float problem's index words (the counts are the float kernel's)
    const std::int64_t iw = plan.index_words<float>(blk);
    if (iw > 0)
        io.read({Operand::index, slice, blk, 1, 0, iw});
    Block rs;
    detail::NextBlock next; // prefetched a share per chunk while this block computes
    if constexpr (Counter::kComputes) {
        rs = start_block(call, b, h, blk, base, cursor);
        next = detail::next_block(call.a, call.src, plan, b, h, g, blk, detail::Maps{});
    }
    const std::int64_t cols = call.t.cols;
    const std::int64_t chunks = std::max<std::int64_t>(1, (nk + cols - 1) / cols); // about
    for (std::int64_t y0 = 0, c = 0, chunk = 1; y0 < nk; y0 += c, ++chunk) {
        c = detail::chunk_length(keys.data(), nk, y0, cols); // runs in place (chunks.hpp)
        next.upto(chunk, chunks);
        const std::int64_t* kc = keys.data() + y0;
        detail::read_gathered(io, Operand::k, kv_slice, call.src.k, b, g, kc, c);
        detail::read_gathered(io, Operand::v, kv_slice, call.src.v, b, g, kc, c);
        io.complete({Operand::scores, slice, i0, r, kc[0], kc[c - 1] - kc[0] + 1}); // its Omega
        if constexpr (Counter::kComputes)
            chunk_products(call, rs, kc, y0, c, chunk_rows(call, b, g, kc, c, rs.w));
    }
    next.upto(1, 1); // all of it, when the block had fewer chunks
    if constexpr (Counter::kComputes)
        finish(call, rs, b, h);
    io.write({Operand::o, slice, i0, r, 0, p.d_v});
    io.write({Operand::lse, slice, i0, r, 0, 1});
    io.release(call.resident);
}

} // namespace

template <typename Counter>
void forward_fused_bf16(const ForwardArgs<bf16>& args,
                        const Support& support,
                        const Tiling& tiling,
                        const MemoryModel& memory,
                        Counter& counter) {
    constexpr const char* kWhere = "ioattn::sparse::forward_fused";
    ForwardArgs<bf16> a = args;
    detail::validate(a, support, &tiling, Schedule::fused, memory, kWhere, !Counter::kComputes);
    const Problem& p = a.problem;
    const detail::Operands<bf16> src{{a.q, nullptr}, {a.k, nullptr}, {a.v, nullptr}};
    CallMemory alloc(kWhere); // sizes the workspaces below, then allocates them
    const detail::TileWorkspaces<float> ws(
        p, support, tiling, Counter::kComputes, Scratch::words(p, tiling));
    alloc.allocate();
    const std::vector<char> v_finite = detail::v_finite_slices(a, Counter::kComputes);
    const Call call{a, src, support, ws.plan, tiling, v_finite.data(), ws.resident};
    // timed runs take each head's heavy blocks first, counting runs index order
    detail::parallel_for_row_blocks(
        p.batch_heads(),
        ws.plan,
        counter,
        [&](std::int64_t slice, std::int64_t blk, int worker, Counter& io) {
            row_block(call, slice, blk, ws.scratch.slab(worker), ws.cursors.slab(worker), io);
        });
}

template void forward_fused_bf16<NullCounter>(
    const ForwardArgs<bf16>&, const Support&, const Tiling&, const MemoryModel&, NullCounter&);
template void forward_fused_bf16<DryRunCounter>(
    const ForwardArgs<bf16>&, const Support&, const Tiling&, const MemoryModel&, DryRunCounter&);

} // namespace ioattn::sparse::IOATTN_ISA
