// ioattn::sparse::forward_element: element-level sparse forward for scattered rows, 2-D blocked
// Per (batch, head): O = softmax(scale*Q K^T on Omega) V, L = row logsumexp, one query row at a
// time over its own keys only (no tile, no mask). Reference: forward_reference.cpp.
// R = tiling.rows (rows per block, at most; blocks cut by nonzeros too), P = tiling.cols (keys
// per panel); kernels/element/panels.hpp. line(n): n words padded to 64 bytes; iw: words per index.
//   parallel for each row block (r rows): read Q rows (into a padded buffer: scaled,   r*d
//     or the bf16 rows as they are for pair scores)
//     [resume: read O, L rows as the starting softmax state                     r*(d_v + 1)]
//     for each visit p of the block to its panels (a range of adjacent panels, n_p distinct
//     keys of the block there; kernels/element/panels.hpp):
//       read K, V rows of those keys (gathered in place)                        n_p*(d + d_v)
//       read the indices the rows' walks see there: their runs, and per row going on the
//       key that ends its run (PanelVisit::reads)                               reads_p*iw
//       for each row, its run of keys in the panel, 2 kLanes keys per batch:
//         s = q . K_j (one accumulator per key, one transposing reduction)
//         m' = max(m, s); O = 2^(m - m') O + sum 2^(s - m') V_j; l likewise (base 2)
//       (runs of at most kShortRun keys go in batches of kLanes rows with runs of one length,
//        the last ones partial at the panel's end: lane k is row k, dots t their t-th keys,
//        one softmax step over all of them and one pass over each O row)
//     write O / l, L                                                              r*(d_v + 1)
// Resident: r*(line(d) + line(d_v)) + 2 line(r) + line(r*iw)          (q, O, m, l, cursors)
//   + max over visits of n_p*(line(d) + line(d_v)) + line(run_p*iw)  (K, V rows, index walk)
// I/O = io_cost_forward_element = n_q*d + sum over blocks of |keys(block)|*(d + d_v)
//   + sum over panel visits of reads_p*iw + n_q*(d_v + 1) (resume: + n_q*(d_v + 1)), per head.
// Flops: 2*Z_QK*(d + d_v): only allowed pairs are touched, so a key no row may see (NaN in its
// K or V row) never reaches an output. Each row's keys run in ascending order in batches cut at
// visit ends: the result depends on the plan (P and its merged visits), never on the thread
// count. One task per (batch, head, row block), blocks balanced by nonzeros.
// bf16 views (compiled for the avx512bf16 region only, sparse/CMakeLists.txt): the same
// schedule, loops, state (Accumulator<Scalar>) and counts (words of fp32); K and V rows are
// gathered in place as bf16. The scores are the bf16 arithmetic (kPairScores,
// forward_element_rows.hpp): q rows are the input's bf16 unscaled (exact; the first half of
// each q slot), K rows load 32 words a vector without widening, and vdpbf16ps adds the exact
// products of each bf16 pair into fp32 lanes (round to nearest even); scale * log2 e
// multiplies the fp32 sum. The softmax is fp32; P V runs on pairs of keys (dp_axpy.hpp: P
// rounded to bf16, at most u max|V| in O as in the tile variant; two V rows interleaved by a
// shuffle per vector, then vdpbf16ps: random:0.02's bf16 forward 1.07x faster than on widened
// V rows, docs/performance.md section 3), O / l rounded to bf16 once.
// The sums' order differs from the float kernel's on the widened operands: O and L agree
// with the double reference within the derived tolerance, bitwise for any thread count.
// vdpbf16ps ignores MXCSR: a denormal bf16 in Q or K counts as 0 in the score (an error below
// 2^-126 |K| or |q| per product) and a denormal partial sum flushes to 0.
// Tests: tests/sparse/element_test.cpp, tests/sparse/forward_element_bf16_test.cpp

#include "kernels/element/panels.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/error.hpp>
#include <ioattn/io_counter.hpp>
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
#include "kernels/element/forward_element_rows.hpp"

#include <ioattn/kernels/online_softmax.hpp>
#include <ioattn/kernels/softmax_grad.hpp>
#include <ioattn/kernels/tile.hpp>

namespace ioattn::sparse::IOATTN_ISA {

namespace {

using detail::ForwardState;
using detail::kNegInf;

template <typename Store, typename Counter, typename Scalar = Accumulator<Store>>
void row_block(const ForwardArgs<Store>& a,
               const Support& s,
               const detail::ElementPanels& plan,
               std::int64_t slice,
               std::int64_t blk,
               bool resume,
               Scalar* base,
               std::int64_t* cursor,
               Counter& io) {
    const Problem& p = a.problem;
    const auto words = detail::ElementWords::of(sizeof(Scalar));
    const std::int64_t b = slice / p.heads, h = slice % p.heads, g = h / p.group();
    const std::int64_t kv = b * p.kv_heads + g;
    const std::int64_t i0 = plan.row0(blk), r = plan.rows(blk);
    const std::int64_t state = ForwardState<Scalar>::words(p, r) + words.indices(r);
    io.acquire(state);
    io.read({Operand::q, slice, i0, r, 0, p.d});
    if (resume) {
        io.read({Operand::o, slice, i0, r, 0, p.d_v});
        io.read({Operand::lse, slice, i0, r, 0, 1});
    }
    ForwardState<Scalar> w;
    if constexpr (Counter::kComputes) {
        w = ForwardState<Scalar>(base, p, r);
        const auto qs = static_cast<Scalar>(p.scale * kernels::kLog2e);
        for (std::int64_t x = 0; x < r; ++x) {
            detail::load_q_row(w, x, a.q.row(b, h, i0 + x), p.d, qs);
            Scalar* ox = w.o + x * w.pdv;
            const Scalar lse = resume ? *a.lse.row(b, h, i0 + x) : kNegInf<Scalar>;
            // a finished row is the state (m = L in base 2, l = 1, O): same softmax
            w.m[x] = lse == kNegInf<Scalar> ? lse : kernels::lse2(lse);
            w.l[x] = lse == kNegInf<Scalar> ? Scalar(0) : Scalar(1);
            if (lse != kNegInf<Scalar>)
                std::transform(a.o.row(b, h, i0 + x),
                               a.o.row(b, h, i0 + x) + p.d_v,
                               ox,
                               [](Store e) { return static_cast<Scalar>(e); });
            else
                std::fill(ox, ox + p.d_v, Scalar(0));
            std::fill(ox + p.d_v, ox + w.pdv, Scalar(0));
            cursor[x] = 0;
        }
    }
    for (const detail::PanelVisit& v : plan.visits_of(blk)) {
        const std::int64_t panel =
            v.keys * (words.pad(p.d) + words.pad(p.d_v)) + words.indices(v.run);
        const std::int64_t p0 = plan.first_key(v), p1 = plan.end_key(v);
        io.acquire(panel);
        io.read({Operand::k, kv, p0, v.keys, 0, p.d});
        io.read({Operand::v, kv, p0, v.keys, 0, p.d_v});
        io.read({Operand::index, slice, blk, 1, 0, v.reads * words.index}); // the rows' walks
        if constexpr (Counter::kComputes) {
            // --- every row of the block over its keys in [p0, p1) ---
            detail::element_runs(a, b, g, r, w, [&](std::int64_t x) {
                const auto row = s.row(i0 + x);
                const std::int64_t* keys = row.data() + cursor[x];
                std::int64_t n = 0;
                const auto left = static_cast<std::int64_t>(row.size()) - cursor[x];
                while (n < left && keys[n] < p1)
                    ++n;
                cursor[x] += n;
                return std::pair{keys, n};
            });
        }
        io.release(panel);
    }
    if constexpr (Counter::kComputes) {
        for (std::int64_t x = 0; x < r; ++x) // O = O / l, L = ln 2 (m + log2 l)
            detail::finish_row(w.o + x * w.pdv,
                               w.m[x],
                               w.l[x],
                               p.d_v,
                               a.o.row(b, h, i0 + x),
                               a.lse.row(b, h, i0 + x));
    }
    io.write({Operand::o, slice, i0, r, 0, p.d_v});
    io.write({Operand::lse, slice, i0, r, 0, 1});
    io.release(state);
}

} // namespace

template <typename Scalar, typename Counter>
void forward_element(const ForwardArgs<Scalar>& args,
                     const Support& support,
                     const Tiling& tiling,
                     const MemoryModel& memory,
                     Counter& counter,
                     bool resume) {
    constexpr const char* kWhere = "ioattn::sparse::forward_element";
    ForwardArgs<Scalar> a = args;
    detail::validate_inputs(a, support, SparseInputs<Scalar>{}, kWhere, !Counter::kComputes);
    detail::validate(a, support, nullptr, Schedule::fused, memory, kWhere, true);
    const Problem& p = a.problem;
    using Acc = Accumulator<Scalar>; // bf16 views: the float kernel's state, words and counts
    const detail::ElementPanels& plan = detail::element_panels(support, tiling, kWhere);
    detail::check_element_peak(
        detail::forward_element_peak(p, plan, detail::ElementWords::of(sizeof(Acc))),
        memory,
        kWhere);
    const int workers = Counter::kComputes ? max_concurrency() : 0;
    const kernels::Workspace<Acc> ws(workers, ForwardState<Acc>::words(p, tiling.rows));
    const kernels::Workspace<std::int64_t> cursors(workers, tiling.rows);
    const std::int64_t blocks = plan.blocks();
    parallel_for_counted(
        p.batch_heads() * blocks, counter, [&](std::int64_t task, int worker, Counter& io) {
            row_block(a,
                      support,
                      plan,
                      task / blocks,
                      task % blocks,
                      resume,
                      ws.slab(worker),
                      cursors.slab(worker),
                      io);
        });
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward_element<Scalar, Counter>(const ForwardArgs<Scalar>&,                     \
                                                   const Support&,                                 \
                                                   const Tiling&,                                  \
                                                   const MemoryModel&,                             \
                                                   Counter&,                                       \
                                                   bool);
#if defined(IOATTN_TARGET_AVX512BF16)
// the avx512bf16 region (sparse/CMakeLists.txt): bf16 views, timed and dry runs
IOATTN_INSTANTIATE(bf16, NullCounter)
IOATTN_INSTANTIATE(bf16, DryRunCounter)
#else
IOATTN_FOR_EACH_KERNEL_TYPE(IOATTN_INSTANTIATE)
#endif
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse::IOATTN_ISA
