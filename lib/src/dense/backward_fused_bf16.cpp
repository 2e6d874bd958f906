// ioattn::dense::backward_fused_bf16: the fused backward (backward_fused.cpp) on bf16 views, with
// AVX512_BF16 dot products (vdpbf16ps, kernels/tile_bf16.hpp). Schedule, tiling, counted events
// and closed form are backward_fused's (R resident keys, C streamed queries, G dQ partials):
//   pass 0, per row block i: read O_i, dO_i; D_i = rowsum(dO_i o O_i) (double, kept fp32)
//   pass A, per (kv head, group g), key blocks j = g, g + G, ...: read K_j, V_j
//     per query head of the group, per query block i from first_row(j): read Q_i, dO_i, L_i, D_i
//       S = scale Q_i K_j^T, P = exp(S - L_i); dP = dO_i V_j^T; dS = P o (dP - D_i)
//       dV_j += P^T dO_i; dK_j += dS^T Q_i; dQ^g_i (+)= dS K_j (read unless j = g, write)
//     write dK_j = scale dK_j, dV_j
//   pass R, per row block i: read the dQ^g_i that reached it; write dQ_i = scale sum_g dQ^g_i
// I/O = io_cost_backward_fused, in elements; in bytes (IoReport::bytes(2, 4)) Q, K, V, O, dO
// and the gradients move 2 bytes an element, L, D and the fp32 dQ partials 4.
// Resident: backward_fused's element count (the same acquire). Its words hold, per worker:
// K_j's and V_j's pairs over d (ceil(d/2) + ceil(d_v/2)) rp, S/P and dP/dS (2 cp rp; P's and dS's
// bf16 pairs over queries in place, dS's pairs over keys in the upper half of S), the fp32 dK^T,
// dV^T (d + d_v) rp, K_j's pairs over keys (rp/2) dw, Q_i's and dO_i's pairs over queries
// (cp/2)(d + d_v), L, D and ones; odd d or d_v add a zero-padded copy of Q_i or dO_i.
// Flops: 2*allowed_pairs*(3d + 2d_v) per query head, as products of bf16 pairs into fp32.
// Precision (docs/design.md section 16): S and dP multiply the exact bf16 inputs into fp32;
// L, D, dS and every accumulator are fp32. P and dS are rounded to bf16 (nearest even) once,
// after dS = P o (dP - D) is formed in fp32, and that rounded P feeds dV and that rounded dS
// feeds dK and dQ: one relative error of at most u = 2^-8 per weight; measured, relative
// Frobenius errors of 2.2e-3 to 2.4e-3 in dQ, dK, dV (N = 4096, d = 64 and 128, randn) against
// 1.6e-3 to 1.7e-3 for the fp32 kernel on widened copies. dQ, dK, dV are rounded to bf16 once,
// at the end. Why: vdpbf16ps runs 32 products an instruction, twice the fp32 FMA rate, and no
// fp32 copies of the five operands are made (1.5x-1.7x the fp32 kernel, docs/performance.md).
// Tests: tests/lib/dense/backward_fused_bf16_test.cpp

#include "dense/kernel_entry.hpp"
#include "dense/kernels_bf16.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/dense/backward.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <limits>

// The rest of this file is compiled for the avx512bf16 region (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include "dense/backward_edge_bf16.hpp"

#include <ioattn/kernels/dq_partials.hpp>
#include <ioattn/kernels/pack_bf16.hpp>
#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/tile_bf16.hpp>

namespace ioattn::dense::IOATTN_ISA {

using kernels::all_finite;
using kernels::dp_rows;
using kernels::pack_p;
using kernels::pack_pairs;
using kernels::pair_word;
using kernels::PairCols;
using kernels::PairRows;
using kernels::pairs;
using kernels::put_word;

namespace {

constexpr std::int64_t kLanes = 16;

using Partials = kernels::DqPartials<float>;

// --- pass 0: D_i = rowsum(dO_i o O_i) ---
template <typename Counter>
void delta_block(const BackwardArgs<bf16>& a,
                 std::int64_t rs,
                 std::int64_t slice,
                 std::int64_t i0,
                 float* delta,
                 Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads;
    const std::int64_t r = std::min(rs, p.n_q - i0);
    io.acquire(r * (2 * p.d_v + 1));
    io.read({Operand::o, slice, i0, r, 0, p.d_v});
    io.read({Operand::d_o, slice, i0, r, 0, p.d_v});
    if constexpr (Counter::kComputes) {
        for (std::int64_t x = 0; x < r; ++x) {
            const bf16* o = a.o.row(b, h, i0 + x);
            const bf16* d_o = a.d_o.row(b, h, i0 + x);
            double acc = 0;
            for (std::int64_t y = 0; y < p.d_v; ++y)
                acc += static_cast<double>(static_cast<float>(o[y])) *
                       static_cast<double>(static_cast<float>(d_o[y]));
            delta[slice * p.n_q + i0 + x] = static_cast<float>(acc);
        }
    }
    io.write({Operand::delta, slice, i0, r, 0, 1});
    io.release(r * (2 * p.d_v + 1));
}

/// Per-worker scratch of pass A, in fp32 words (the layout of the file header).
struct Scratch {
    std::int64_t rp = 0, cp = 0, dw = 0;
    float* kp = nullptr; ///< K_j pairs over d: ceil(d/2) x rp
    float* vp = nullptr; ///< V_j pairs over d_v: ceil(d_v/2) x rp
    float* s = nullptr;  ///< S, P (queries x keys); P's pairs, then dS's rows in bf16
    float* dp = nullptr; ///< dP, dS; dS's pairs over queries
    float *dkt = nullptr, *dvt = nullptr; ///< dK^T, dV^T: d x rp, d_v x rp
    float* kk = nullptr;                  ///< K_j pairs over keys: rp/2 x dw
    float* qc = nullptr;                  ///< Q_i pairs over queries: cp/2 x d
    float* oc = nullptr;                  ///< dO_i pairs over queries: cp/2 x d_v
    bf16* qz = nullptr;                   ///< Q_i zero-padded to d + 1 columns (odd d)
    bf16* oz = nullptr;                   ///< dO_i zero-padded to d_v + 1 columns (odd d_v)
    float *l2 = nullptr, *dd = nullptr, *ones = nullptr;

    static std::int64_t lanes(std::int64_t rp, std::int64_t cp, std::int64_t dw) {
        return std::max({rp, cp, dw});
    }

    static std::int64_t words(const Problem& p, const Tiling& t) {
        const std::int64_t rp = lane_padded(std::min(t.rows, p.n_k));
        const std::int64_t cp = lane_padded(std::min(t.cols, p.n_q)), dw = lane_padded(p.d);
        return (pairs(p.d) + pairs(p.d_v) + 2 * cp + p.d + p.d_v) * rp + rp / 2 * dw +
               cp / 2 * (p.d + p.d_v) + cp * (p.d % 2) * (p.d + 1) / 2 +
               cp * (p.d_v % 2) * (p.d_v + 1) / 2 + 3 * lanes(rp, cp, dw);
    }

    Scratch() = default;

    Scratch(float* base, const Problem& p, const Tiling& t)
        : rp(lane_padded(std::min(t.rows, p.n_k)))
        , cp(lane_padded(std::min(t.cols, p.n_q)))
        , dw(lane_padded(p.d)) {
        kp = base;
        vp = kp + pairs(p.d) * rp;
        s = vp + pairs(p.d_v) * rp;
        dp = s + cp * rp;
        dkt = dp + cp * rp;
        dvt = dkt + p.d * rp;
        kk = dvt + p.d_v * rp;
        qc = kk + rp / 2 * dw;
        oc = qc + cp / 2 * p.d;
        qz = reinterpret_cast<bf16*>(oc + cp / 2 * p.d_v);
        oz = qz + cp * (p.d % 2) * (p.d + 1);
        l2 = reinterpret_cast<float*>(oz + cp * (p.d_v % 2) * (p.d_v + 1));
        dd = l2 + lanes(rp, cp, dw);
        ones = dd + lanes(rp, cp, dw);
        std::fill(ones, ones + lanes(rp, cp, dw), 1.0F);
    }

    /// dS's rows in bf16 (queries x rp), over the upper half of S (P's pairs take the lower).
    [[nodiscard]] bf16* ds_rows() const { return reinterpret_cast<bf16*>(s + cp / 2 * rp); }
};

/// Rows [0, n) of a bf16 view block (stride ld, w wide), as pair rows of even width: in place
/// for even w, else copied zero-padded into `pad` (n x (w + 1)).
PairRows pair_rows(const bf16* x, std::int64_t ld, std::int64_t n, std::int64_t w, bf16* pad) {
    if (w % 2 == 0)
        return {x, ld};
    for (std::int64_t r = 0; r < n; ++r) {
        std::copy_n(x + r * ld, w, pad + r * (w + 1));
        pad[r * (w + 1) + w] = bf16(0.0F);
    }
    return {pad, w + 1};
}

/// Kp[p][y] = (X[y][2p], X[y][2p + 1]) of the block's r rows (stride ld, w wide); lanes past
/// r zero.
void pack_lanes(
    const bf16* x, std::int64_t ld, std::int64_t r, std::int64_t w, const Scratch& s, float* out) {
    for (std::int64_t y = 0; y < s.rp; ++y)
        for (std::int64_t p = 0; p < pairs(w); ++p)
            put_word(out + p * s.rp + y, y < r ? pair_word(x + y * ld, p, w) : 0U);
}

/// The block's dS rows rounded to bf16 (pairs over keys for dQ = dS K_j).
void ds_to_rows(const Scratch& w, std::int64_t c) {
    bf16* out = w.ds_rows();
    for (std::int64_t x = 0; x < c; ++x)
        for (std::int64_t v = 0; v < w.rp; v += kLanes)
            _mm256_storeu_si256(
                reinterpret_cast<__m256i*>(out + x * w.rp + v),
                kernels::as<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(w.dp + x * w.rp + v))));
}

/// One (key block, query block) step of pass A: the five products on the block's pairs.
void block_step(const BackwardArgs<bf16>& a, const Scratch& w, const Step& st) {
    const Problem& p = a.problem;
    const std::int64_t c = st.c, r = st.r, n_vec = w.rp / kLanes;
    const bf16* q = a.q.row(st.b, st.h, st.i0);
    const bf16* d_o = a.d_o.row(st.b, st.h, st.i0);
    const std::int64_t ldq = a.q.stride_row, ldo = a.d_o.stride_row;
    for (std::int64_t x = 0; x < c; ++x) {
        w.l2[x] = kernels::lse2(*a.lse.row(st.b, st.h, st.i0 + x));
        w.dd[x] = st.delta[x];
    }
    // --- S = scale Q_i K_j^T (queries x keys; scale log2 e in fp32 after the products) ---
    const auto qs = static_cast<float>(p.scale * kernels::kLog2e);
    dp_rows(
        pair_rows(q, ldq, c, p.d, w.qz), c, w.kp, w.rp, pairs(p.d), n_vec, nullptr, qs, w.s, w.rp);
    if (st.diagonal)
        fill_hidden(w.s, w.rp, st, -std::numeric_limits<float>::infinity());
    kernels::probabilities(w.s, w.rp, c, n_vec, static_cast<const float*>(nullptr), w.l2);
    // --- dP = dO_i V_j^T, dS = P o (dP - D_i), both fp32 ---
    dp_rows(pair_rows(d_o, ldo, c, p.d_v, w.oz),
            c,
            w.vp,
            w.rp,
            pairs(p.d_v),
            n_vec,
            nullptr,
            1.0F,
            w.dp,
            w.rp);
    kernels::softmax_grad(w.s, w.dp, w.rp, c, n_vec, static_cast<const float*>(nullptr), w.dd);
    if (st.diagonal)
        fill_hidden(w.dp, w.rp, st, 0.0F);
    if (r % 2 != 0) // the pad key of the last pair of dQ = dS K_j
        for (std::int64_t x = 0; x < c; ++x)
            w.dp[x * w.rp + r] = 0.0F;
    // --- P and dS rounded to bf16: pairs over queries (dV, dK), dS's rows (dQ) ---
    pack_p(w.s, w.rp, c, n_vec);
    ds_to_rows(w, c);
    pack_p(w.dp, w.rp, c, n_vec);
    // --- dV_j^T += dO_i^T P, dK_j^T += Q_i^T dS: hidden pairs have P = dS = 0, exact while the
    // streamed rows are finite, otherwise each key on the mask edge starts at its first row ---
    if (!st.diagonal || (all_finite(d_o, ldo, c, p.d_v) && all_finite(q, ldq, c, p.d))) {
        pack_pairs(d_o, ldo, c, p.d_v, w.oc, p.d_v);
        pack_pairs(q, ldq, c, p.d, w.qc, p.d);
        dp_rows(
            PairCols{w.oc, p.d_v}, p.d_v, w.s, w.rp, pairs(c), n_vec, w.ones, 1.0F, w.dvt, w.rp);
        dp_rows(PairCols{w.qc, p.d}, p.d, w.dp, w.rp, pairs(c), n_vec, w.ones, 1.0F, w.dkt, w.rp);
    } else {
        dkv_edge(w.s, w.dp, w.rp, d_o, ldo, q, ldq, p, st, w.dvt, w.dkt);
    }
    // --- dQ^g_i (+)= dS K_j (unscaled; a non-finite K row on the mask edge is never multiplied
    // into a query row that cannot see it) ---
    if (!st.diagonal || st.k_finite)
        dp_rows(PairRows{w.ds_rows(), w.rp},
                c,
                w.kk,
                w.dw,
                pairs(r),
                w.dw / kLanes,
                st.first ? nullptr : w.ones,
                1.0F,
                st.dq,
                w.dw);
    else
        dq_edge(w.ds_rows(), w.rp, st.k, st.ldk, p, st, st.dq, w.dw);
}

// --- pass A: backward_fused's key_block, counted the same ---
template <typename Counter>
void key_block(const BackwardArgs<bf16>& a,
               const Tiling& t,
               std::int64_t kv_slice,
               std::int64_t j0,
               std::int64_t group,
               bool first,
               const Partials& dq,
               const float* delta,
               float* base,
               Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = kv_slice / p.kv_heads, g = kv_slice % p.kv_heads;
    const std::int64_t r = std::min(t.rows, p.n_k - j0);
    const std::int64_t cs = std::min(t.cols, p.n_q);
    const std::int64_t rp = lane_padded(std::min(t.rows, p.n_k)), dw = lane_padded(p.d);
    const std::int64_t resident = 2 * (p.d + p.d_v) * rp + 2 * lane_padded(cs) * rp + rp * dw +
                                  3 * std::max({rp, lane_padded(cs), dw}) +
                                  std::max(r * (p.d + p.d_v), cs * (p.d + p.d_v + 2 + dw));
    io.acquire(resident);
    io.read({Operand::k, kv_slice, j0, r, 0, p.d});
    io.read({Operand::v, kv_slice, j0, r, 0, p.d_v});
    Scratch w;
    Step st{};
    if constexpr (Counter::kComputes) {
        w = Scratch(base, p, t);
        st.k = a.k.row(b, g, j0);
        st.ldk = a.k.stride_row;
        pack_lanes(st.k, st.ldk, r, p.d, w, w.kp);
        pack_lanes(a.v.row(b, g, j0), a.v.stride_row, r, p.d_v, w, w.vp);
        pack_pairs(st.k, st.ldk, r, p.d, w.kk, w.dw);
        for (std::int64_t y = 0; y < pairs(r); ++y)
            std::fill(w.kk + y * w.dw + p.d, w.kk + (y + 1) * w.dw, 0.0F);
        st.k_finite = all_finite(st.k, st.ldk, r, p.d);
        std::fill(w.dkt, w.dkt + (p.d + p.d_v) * w.rp, 0.0F);
    }
    for (std::int64_t hh = 0; hh < p.group(); ++hh) {
        const std::int64_t h = g * p.group() + hh, slice = b * p.heads + h;
        for (std::int64_t i0 = first_row(p, j0); i0 < p.n_q; i0 += t.cols) {
            const std::int64_t c = std::min(t.cols, p.n_q - i0);
            io.read({Operand::q, slice, i0, c, 0, p.d});
            io.read({Operand::d_o, slice, i0, c, 0, p.d_v});
            io.read({Operand::lse, slice, i0, c, 0, 1});
            io.read({Operand::delta, slice, i0, c, 0, 1});
            const Block part{Operand::d_q_partial, group * p.batch_heads() + slice, i0, c, 0, p.d};
            if (!first)
                io.read(part);
            io.complete({Operand::scores, slice, i0, c, j0, r});
            io.write(part);
            if constexpr (Counter::kComputes) {
                st.set(p, b, h, i0, c, j0, r, first);
                st.delta = delta + slice * p.n_q + i0;
                st.dq = dq.row(group, slice, i0);
                block_step(a, w, st);
            }
        }
    }
    if constexpr (Counter::kComputes) {
        write_rows(w.dkt, w.rp, static_cast<float>(p.scale), a.d_k, b, g, j0, r);
        write_rows(w.dvt, w.rp, 1.0F, a.d_v, b, g, j0, r);
    }
    io.write({Operand::d_k, kv_slice, j0, r, 0, p.d});
    io.write({Operand::d_v, kv_slice, j0, r, 0, p.d_v});
    io.release(resident);
}

// --- pass R: dQ_i = scale times the partial sums of the groups that reached row block i ---
template <typename Counter>
void reduce_block(const BackwardArgs<bf16>& a,
                  std::int64_t rs,
                  std::int64_t slice,
                  std::int64_t i0,
                  const Partials& dq,
                  Counter& io) {
    const Problem& p = a.problem;
    const std::int64_t b = slice / p.heads, h = slice % p.heads;
    const std::int64_t r = std::min(rs, p.n_q - i0);
    const std::int64_t resident = r * (p.d + lane_padded(p.d)); // dQ_i and one dw-wide partial
    io.acquire(resident);
    std::int64_t reached = 0; // groups g < reached reach rows from first_row(g R) on
    while (reached < dq.groups && first_row(p, reached * rs) < i0 + r)
        ++reached;
    for (std::int64_t g = 0; g < reached; ++g) {
        const std::int64_t from = std::max(i0, first_row(p, g * rs));
        io.read({Operand::d_q_partial, g * p.batch_heads() + slice, from, i0 + r - from, 0, p.d});
    }
    if constexpr (Counter::kComputes) {
        const auto scale = static_cast<float>(p.scale);
        for (std::int64_t x = i0; x < i0 + r; ++x) {
            bf16* out = a.d_q.row(b, h, x);
            for (std::int64_t z = 0; z < p.d; ++z) {
                float acc = 0;
                for (std::int64_t g = 0; g < reached && first_row(p, g * rs) <= x; ++g)
                    acc += dq.row(g, slice, x)[z];
                out[z] = bf16(scale * acc);
            }
        }
    }
    io.write({Operand::d_q, slice, i0, r, 0, p.d});
    io.release(resident);
}

} // namespace

template <typename Counter>
void backward_fused_bf16(const BackwardArgs<bf16>& args,
                         const Tiling& tiling,
                         const MemoryModel& memory,
                         Counter& counter) {
    constexpr const char* kWhere = "ioattn::dense::backward_fused";
    const BackwardArgs<bf16> a = detail::checked_entry<Counter>(
        args, tiling, memory, Schedule::fused, Pass::backward, kWhere);
    detail::backward_fused_passes<float, Partials>(
        a.problem,
        tiling,
        Scratch::words(a.problem, tiling),
        kWhere,
        counter,
        [&](auto&&... x) { delta_block(a, tiling.rows, x...); },
        [&](auto&&... x) { key_block(a, tiling, x...); },
        [&](auto&&... x) { reduce_block(a, tiling.rows, x...); });
}

template void backward_fused_bf16<NullCounter>(const BackwardArgs<bf16>&,
                                               const Tiling&,
                                               const MemoryModel&,
                                               NullCounter&);
template void backward_fused_bf16<DryRunCounter>(const BackwardArgs<bf16>&,
                                                 const Tiling&,
                                                 const MemoryModel&,
                                                 DryRunCounter&);

} // namespace ioattn::dense::IOATTN_ISA
