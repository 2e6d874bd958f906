// ioattn::sparse::backward_element: element-level sparse backward, two sweeps, 2-D blocked
// Per (batch, head): dQ, dK, dV from O, L and dO, one row at a time over its own pairs (no tile,
// no mask). Reference: backward_reference.cpp. R = tiling.rows, P = tiling.cols (panels.hpp).
//   sweep Q, parallel for each row block of Omega (r rows):
//     read Q, dO, O rows, L; write (L in base 2, D = rowsum(dO o O)) per row  r*(d + 2 d_v + 1), 2r
//     for each visit to key panels: read K, V rows of the block's distinct keys there and the
//       indices the rows' walks read there (PanelVisit::reads)       n_p*(d + d_v) + reads_p*iw
//       per row, per batch of its keys: s = q . K_j, dP = dO . V_j, P = 2^(s - L),
//       dS = P o (dP - D), dQ += dS K_j (rows of at most kShortRun keys there in batches of
//       kLanes rows with runs of one length, lane k = row k: backward_element_rows.hpp)
//     [accumulate: read dQ]; write scale dQ (+ dQ)                        r*d
//   sweep K, parallel for each (kv head, key block of Omega^T, c keys): read K, V rows c*(d + d_v)
//     for each query head of the group, for each visit to query panels: read Q, dO rows,
//       (L, D) of the block's distinct queries there, and Omega^T's indices the walks read
//                                                                 n_p*(d + d_v + 2) + reads_p*iw
//       per key, per batch of its queries: s, dP, P, dS as above (L, D gathered),
//       dV += P dO_i, dK += dS Q_i (short runs batched as in sweep Q)
//     [accumulate: read dK, dV]; write scale dK, dV (+ them)             c*(d + d_v)
// Resident (line(n): n words padded to 64 bytes; iw words per index):
//   sweep Q: r*(2 line(d) + line(d_v)) + 2 line(r) + line(r iw) + max(line(d_v) (one O row
//            while D is formed), max over visits of n_p*(line(d) + line(d_v)) + line(run iw))
//   sweep K: c*(2 line(d) + 2 line(d_v)) + line(c iw)
//            + max over visits of n_p*(line(d) + line(d_v) + line(2)) + line(run iw)
// I/O = io_cost_backward_element (per query head: n_q(d + 2 d_v + 1) + sum over row blocks of
//   |keys| (d + d_v) + sum over key blocks and panels n_p (d + d_v + 2), + the walks' index
//   words, writes n_q(d + 2); per kv head: n_k(d + d_v) read and written; accumulate: + n_q d
//   + n_k(d + d_v) reads). dK, dV come from Omega^T, dQ from Omega: each output row is written by
//   one task in a fixed order, no atomics: bitwise thread-count invariant. Only allowed pairs are
//   touched: NaN in a row no query may see never reaches a gradient.
// Tests: tests/sparse/element_test.cpp

#include "kernels/element/panels.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/element.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include "kernels/common/validate.hpp"
#include "kernels/element/backward_element_rows.hpp"

#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/tile.hpp>

namespace ioattn::sparse::IOATTN_ISA {

namespace {

using detail::key_row;
using detail::key_rows;
using detail::kShortRun;
using detail::load_rows;
using detail::query_row;
using detail::query_rows;
using detail::Rows;
using detail::ShortBatches;
using detail::ShortRows;
using detail::store_rows;

/// The run of keys (or queries) of row x of a block in the panel ending at p1: advances the
/// row's cursor; returns the run and its length.
inline std::pair<const std::int64_t*, std::int64_t>
next_run(const Support& s, std::int64_t row, std::int64_t p1, std::int64_t& cursor) {
    const auto keys = s.row(row);
    const std::int64_t* first = keys.data() + cursor;
    const auto left = static_cast<std::int64_t>(keys.size()) - cursor;
    std::int64_t n = 0;
    while (n < left && first[n] < p1)
        ++n;
    cursor += n;
    return {first, n};
}

// --- sweep Q: dQ over Omega, a row block resident, key panels streamed ---
template <typename Scalar, typename Counter>
void query_block(const BackwardArgs<Scalar>& a,
                 const Support& s,
                 const detail::ElementPanels& plan,
                 std::int64_t slice,
                 std::int64_t blk,
                 bool accumulate,
                 Scalar* ld_pairs,
                 Scalar* base,
                 std::int64_t* cursor,
                 Counter& io) {
    const Problem& p = a.problem;
    const auto words = detail::ElementWords::of(sizeof(Scalar));
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const std::int64_t kv = b * p.kv_heads + g;
    const std::int64_t i0 = plan.row0(blk), r = plan.rows(blk);
    const std::int64_t state =
        r * (2 * words.pad(p.d) + words.pad(p.d_v)) + 2 * words.pad(r) + words.indices(r);
    io.acquire(state + words.pad(p.d_v));
    io.read({Operand::q, slice, i0, r, 0, p.d});
    io.read({Operand::d_o, slice, i0, r, 0, p.d_v});
    io.read({Operand::o, slice, i0, r, 0, p.d_v});
    io.read({Operand::lse, slice, i0, r, 0, 1});
    Rows<Scalar> w;
    if constexpr (Counter::kComputes) {
        w = Rows<Scalar>(base, p, r);
        load_rows(a.q, b, h, i0, r, static_cast<Scalar>(p.scale * kernels::kLog2e), w.x, w.pd);
        load_rows(a.d_o, b, h, i0, r, Scalar(1), w.y, w.pdv);
        std::fill(w.gx, w.gx + r * w.pd, Scalar(0));
        for (std::int64_t x = 0; x < r; ++x) {
            w.l2[x] = kernels::lse2(*a.lse.row(b, h, i0 + x));
            w.dd[x] = kernels::row_delta(a.o.row(b, h, i0 + x), a.d_o.row(b, h, i0 + x), p.d_v);
            ld_pairs[2 * (slice * p.n_q + i0 + x)] = w.l2[x];
            ld_pairs[2 * (slice * p.n_q + i0 + x) + 1] = w.dd[x];
            cursor[x] = 0;
        }
    }
    io.write({Operand::delta, slice, i0, r, 0, 2});
    io.release(words.pad(p.d_v));
    for (const detail::PanelVisit& v : plan.visits_of(blk)) {
        const std::int64_t panel =
            v.keys * (words.pad(p.d) + words.pad(p.d_v)) + words.indices(v.run);
        const std::int64_t p0 = plan.first_key(v), p1 = plan.end_key(v);
        io.acquire(panel);
        io.read({Operand::k, kv, p0, v.keys, 0, p.d});
        io.read({Operand::v, kv, p0, v.keys, 0, p.d_v});
        io.read({Operand::index, slice, blk, 1, 0, v.reads * words.index}); // the rows' walks
        if constexpr (Counter::kComputes) {
            const Scalar* kb = a.k.row(b, g, 0);
            const Scalar* vb = a.v.row(b, g, 0);
            ShortBatches<Scalar> short_runs;
            const auto run_batch = [&](const ShortRows<Scalar>& batch) {
                query_rows(a, kb, vb, batch, w);
            };
            for (std::int64_t x = 0; x < r; ++x) {
                const auto [keys, n] = next_run(s, i0 + x, p1, cursor[x]);
                if (n > kShortRun)
                    query_row(a, kb, vb, keys, n, w, x);
                else if (n > 0)
                    short_runs.add(x, keys, n, run_batch);
            }
            short_runs.flush(run_batch);
        }
        io.release(panel);
    }
    if (accumulate)
        io.read({Operand::d_q, slice, i0, r, 0, p.d});
    if constexpr (Counter::kComputes)
        store_rows(a.d_q, b, h, i0, r, w.gx, w.pd, static_cast<Scalar>(p.scale), accumulate);
    io.write({Operand::d_q, slice, i0, r, 0, p.d});
    io.release(state);
}

// --- sweep K: dK, dV over Omega^T, a key block resident, query panels streamed ---
template <typename Scalar, typename Counter>
void key_block(const BackwardArgs<Scalar>& a,
               const Support& st,
               const detail::ElementPanels& plan,
               std::int64_t kv,
               std::int64_t blk,
               bool accumulate,
               const Scalar* ld_pairs,
               Scalar* base,
               std::int64_t* cursor,
               Counter& io) {
    const Problem& p = a.problem;
    const auto words = detail::ElementWords::of(sizeof(Scalar));
    const std::int64_t b = kv / p.kv_heads, g = kv % p.kv_heads;
    const std::int64_t j0 = plan.row0(blk), c = plan.rows(blk);
    const std::int64_t state = c * (2 * words.pad(p.d) + 2 * words.pad(p.d_v)) + words.indices(c);
    io.acquire(state);
    io.read({Operand::k, kv, j0, c, 0, p.d});
    io.read({Operand::v, kv, j0, c, 0, p.d_v});
    Rows<Scalar> w;
    if constexpr (Counter::kComputes) {
        w = Rows<Scalar>(base, p, c);
        load_rows(a.k, b, g, j0, c, static_cast<Scalar>(p.scale * kernels::kLog2e), w.x, w.pd);
        load_rows(a.v, b, g, j0, c, Scalar(1), w.y, w.pdv);
        std::fill(w.gx, w.gx + c * w.pd, Scalar(0));
        std::fill(w.gy, w.gy + c * w.pdv, Scalar(0));
    }
    for (std::int64_t hh = 0; hh < p.group(); ++hh) {
        const std::int64_t h = g * p.group() + hh, slice = b * p.heads + h;
        const Scalar* pairs = ld_pairs + 2 * slice * p.n_q;
        if constexpr (Counter::kComputes)
            std::fill(cursor, cursor + c, std::int64_t{0});
        for (const detail::PanelVisit& v : plan.visits_of(blk)) {
            const std::int64_t panel =
                v.keys * (words.pad(p.d) + words.pad(p.d_v) + words.pad(2)) + words.indices(v.run);
            const std::int64_t p0 = plan.first_key(v), p1 = plan.end_key(v);
            io.acquire(panel);
            io.read({Operand::q, slice, p0, v.keys, 0, p.d});
            io.read({Operand::d_o, slice, p0, v.keys, 0, p.d_v});
            io.read({Operand::delta, slice, p0, v.keys, 0, 2});
            io.read({Operand::index, slice, blk, 1, 0, v.reads * words.index}); // keys' walks
            if constexpr (Counter::kComputes) {
                const Scalar* qb = a.q.row(b, h, 0);
                const Scalar* ob = a.d_o.row(b, h, 0);
                ShortBatches<Scalar> short_runs;
                const auto run_batch = [&](const ShortRows<Scalar>& batch) {
                    key_rows(a, qb, ob, pairs, batch, w);
                };
                for (std::int64_t y = 0; y < c; ++y) {
                    const auto [queries, n] = next_run(st, j0 + y, p1, cursor[y]);
                    if (n > kShortRun)
                        key_row(a, qb, ob, pairs, queries, n, w, y);
                    else if (n > 0)
                        short_runs.add(y, queries, n, run_batch);
                }
                short_runs.flush(run_batch);
            }
            io.release(panel);
        }
    }
    if (accumulate) {
        io.read({Operand::d_k, kv, j0, c, 0, p.d});
        io.read({Operand::d_v, kv, j0, c, 0, p.d_v});
    }
    if constexpr (Counter::kComputes) {
        store_rows(a.d_k, b, g, j0, c, w.gx, w.pd, static_cast<Scalar>(p.scale), accumulate);
        store_rows(a.d_v, b, g, j0, c, w.gy, w.pdv, Scalar(1), accumulate);
    }
    io.write({Operand::d_k, kv, j0, c, 0, p.d});
    io.write({Operand::d_v, kv, j0, c, 0, p.d_v});
    io.release(state);
}

} // namespace

template <typename Scalar, typename Counter>
void backward_element(const BackwardArgs<Scalar>& args,
                      const Support& support,
                      const Tiling& tiling,
                      const MemoryModel& memory,
                      Counter& counter,
                      bool accumulate) {
    constexpr const char* kWhere = "ioattn::sparse::backward_element";
    BackwardArgs<Scalar> a = args;
    detail::validate_inputs(a, support, SparseInputs<Scalar>{}, kWhere, !Counter::kComputes);
    detail::validate(a, support, nullptr, Schedule::fused, memory, kWhere, true, Pass::backward);
    const Problem& p = a.problem;
    const Support& transposed = support.transposed();
    const detail::ElementPanels& qplan = detail::element_panels(support, tiling, kWhere);
    const detail::ElementPanels& kplan = detail::element_panels(transposed, tiling, kWhere);
    detail::check_element_peak(
        detail::backward_element_peak(p, qplan, kplan, detail::ElementWords::of(sizeof(Scalar))),
        memory,
        kWhere);
    const int workers = Counter::kComputes ? max_concurrency() : 0;
    const kernels::Workspace<Scalar> ws(workers, Rows<Scalar>::words(p, tiling.rows));
    const kernels::Workspace<std::int64_t> cursors(workers, tiling.rows);
    const kernels::Workspace<Scalar> pairs(Counter::kComputes ? 1 : 0, 2 * p.batch_heads() * p.n_q);
    const std::int64_t qb = qplan.blocks(), kb = kplan.blocks();
    parallel_for_counted(p.batch_heads() * qb, counter, [&](std::int64_t t, int w, Counter& io) {
        query_block(a,
                    support,
                    qplan,
                    t / qb,
                    t % qb,
                    accumulate,
                    pairs.slab(0),
                    ws.slab(w),
                    cursors.slab(w),
                    io);
    });
    parallel_for_counted(
        p.batch * p.kv_heads * kb, counter, [&](std::int64_t t, int w, Counter& io) {
            key_block(a,
                      transposed,
                      kplan,
                      t / kb,
                      t % kb,
                      accumulate,
                      pairs.slab(0),
                      ws.slab(w),
                      cursors.slab(w),
                      io);
        });
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void backward_element<Scalar, Counter>(const BackwardArgs<Scalar>&,                   \
                                                    const Support&,                                \
                                                    const Tiling&,                                 \
                                                    const MemoryModel&,                            \
                                                    Counter&,                                      \
                                                    bool);
IOATTN_FOR_EACH_KERNEL_TYPE(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse::IOATTN_ISA
