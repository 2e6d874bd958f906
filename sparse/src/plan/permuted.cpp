// ioattn::sparse permuted variant: rows and keys reordered so that the structure is banded,
// the split variant on the reordered support, outputs put back. Reference: forward_reference.cpp.
// Orders (structure.hpp, find_orders): rows (and keys) by residue modulo g when every allowed
// i' - j is a multiple of g >= 2 (dilated:W:S: S bands of half-width W), keys by the last and
// first query block whose tile-worthy column they are (strided:L: the summary keys of all
// blocks become whole key blocks). Attention is invariant under a reordering of the rows (with
// O, L, dO, dQ) and of the keys (with V, dK, dV), so the result is the same up to rounding.
//   forward, every pair through tiles: no copy; the tile kernel over the reordered support
//             reads Q, O, L rows through `rows` and K, V rows through `keys` in place
//             (forward_fused_ordered), where copies would take 1.9 of dilated:256:4's 10.8 ms
//             (N = 16384, d = 64, 2 threads)
//   forward, else: [rows: Q' = Q[rows]]  [keys: K' = K[keys], V' = V[keys]]  per slice, one
//             row at a time; split variant on (Q', K', V') over the reordered parts, into O',
//             L' (or O, L when rows keep their order); [rows: O[rows] = O', L[rows] = L']
//   backward, every pair through tiles: no copy; the tile kernel reads and writes Q, O, L,
//             dO, dQ rows through `rows` and K, V, dK, dV rows through `keys`
//             (backward_fused_ordered), where copies would take 4.5 of dilated:256:4's 30 ms
//   backward, else: [rows: Q, O, dO, L reordered]  [keys: K, V reordered]; split backward
//             into dQ', dK', dV'; [rows: dQ back]  [keys: dK, dV back]
// Resident: the split variant's peak, or line(max(d, d_v)) while copying (one row).
// I/O = io_cost of the split variant on the reordered parts + io_cost_permutation: in place,
//   the order indices the tile blocks read (BlockKeys::map_words: one per row, one per
//   streamed key, per head; the backward's passes 0 and R one per query row too); with
//   copies, each copy reads and writes its rows once: forward n_q (d + d_v + 1) per head
//   (rows), n_k (d + d_v) per kv head (keys); backward n_q (2d + 2 d_v + 1) per head,
//   2 n_k (d + d_v) per kv head; and each copy reads its order (rows indices of 8 bytes) once
//   per slice.
// Copies run in parallel over slices and rows; thread-count invariant (a copy is exact).
// Tests: tests/sparse/variants_test.cpp

#include "kernels/element/panels.hpp"
#include "plan/variant_parts.hpp"
#include "support/block_keys.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <memory>
#include <vector>

namespace ioattn::sparse::detail {

namespace {

/// One operand copy: row a of dst (per slice) is row order[a] of src (gather), or the other
/// way round (scatter).
template <typename Scalar>
struct Copy {
    TensorView<const Scalar> src;
    TensorView<Scalar> dst;
    const std::vector<std::int64_t>* order;
    bool scatter;
    Operand operand;
};

/// Rows per parallel task of a copy.
constexpr std::int64_t kCopyRows = 512;

/// Runs and counts the copies, in parallel over each copy's slices and rows.
template <typename Scalar, typename Counter>
void run_copies(const std::vector<Copy<Scalar>>& copies, std::int64_t line, Counter& counter) {
    for (const Copy<Scalar>& c : copies) {
        const std::int64_t heads = c.src.heads;
        parallel_for_counted(c.src.batch * heads, counter, [&](std::int64_t s, int, Counter& io) {
            const std::int64_t b = s / heads, h = s % heads, n = c.src.rows;
            io.acquire(line);
            io.read({c.operand, s, 0, n, 0, c.src.cols});
            io.read({Operand::index, s, 0, 1, 0, n * ElementWords::of(sizeof(Scalar)).index});
            if constexpr (Counter::kComputes) // rows in parallel too: one slice is common
                parallel_for_tiles((n + kCopyRows - 1) / kCopyRows, [&](std::int64_t t, int) {
                    for (std::int64_t a = t * kCopyRows; a < std::min(n, (t + 1) * kCopyRows);
                         ++a) {
                        const std::int64_t o = (*c.order)[static_cast<std::size_t>(a)];
                        const Scalar* from = c.src.row(b, h, c.scatter ? a : o);
                        std::copy_n(from, c.src.cols, c.dst.row(b, h, c.scatter ? o : a));
                    }
                });
            io.write({c.operand, s, 0, n, 0, c.src.cols});
            io.release(line);
        });
    }
}

/// A copy's footprint: the row in flight and a line of the order it walks.
template <typename Scalar>
std::int64_t copy_line(const Problem& p) {
    const auto w = ElementWords::of(sizeof(Scalar));
    return w.pad(std::max(p.d, p.d_v)) + w.indices(1);
}

/// Owned packed buffers (null in a dry run). Those a copy fills whole are left uninitialized
/// (zeroing 8 MB of K' and V' would cost 5% of strided:64's permuted forward, callgrind); the
/// gradients the backward accumulates into start at zero.
template <typename Scalar>
struct Buffer {
    std::unique_ptr<Scalar[]> data;

    Buffer(bool computes, std::int64_t n, bool zeroed = false) {
        if (!computes)
            return;
        data = zeroed ? std::make_unique<Scalar[]>(static_cast<std::size_t>(n))
                      : std::make_unique_for_overwrite<Scalar[]>(static_cast<std::size_t>(n));
    }

    Scalar* ptr() { return data.get(); }
};

template <typename Args>
void check(Args& a, const Support& s, const char* where, bool shape_only) {
    a.validate(where, shape_only);
    if (s.n_q() != a.problem.n_q || s.n_k() != a.problem.n_k || a.problem.causal)
        throw InvalidArgument(std::string(where) + ": support " + std::to_string(s.n_q()) + " x " +
                              std::to_string(s.n_k()) +
                              " does not match the problem (or the problem is causal)");
}

} // namespace

/// The orders as the tile kernels read them (an empty order: the identity).
Maps maps_of(const Orders& o) {
    return {o.rows.empty() ? nullptr : o.rows.data(), o.keys.empty() ? nullptr : o.keys.data()};
}

bool in_place(const PartsView& parts) {
    return parts.element.z_qk() == 0;
}

template <typename Scalar, typename Counter>
void forward_permuted(const ForwardArgs<Scalar>& args,
                      const PartsView& parts,
                      const VariantPlan& plan,
                      const MemoryModel& memory,
                      Counter& counter) {
    ForwardArgs<Scalar> a = args;
    check(a, parts.tile, "ioattn::sparse::forward (permuted)", !Counter::kComputes);
    const Problem& p = a.problem;
    const Orders& o = parts.orders;
    const bool rows = !o.rows.empty(), keys = !o.keys.empty();
    if (in_place(parts)) { // no copies: the tiles read rows and keys through the orders
        forward_fused_ordered(a, parts.tile, maps_of(o), plan.tile, memory, counter);
        return;
    }
    constexpr bool kC = Counter::kComputes;
    Buffer<Scalar> q(kC && rows, p.batch_heads() * p.n_q * p.d);
    Buffer<Scalar> out(kC && rows, p.batch_heads() * p.n_q * p.d_v);
    Buffer<Scalar> lse(kC && rows, p.batch_heads() * p.n_q);
    Buffer<Scalar> k(kC && keys, p.batch * p.kv_heads * p.n_k * p.d);
    Buffer<Scalar> v(kC && keys, p.batch * p.kv_heads * p.n_k * p.d_v);
    ForwardArgs<Scalar> r =
        ForwardArgs<Scalar>::packed(p, q.ptr(), k.ptr(), v.ptr(), out.ptr(), lse.ptr());
    std::vector<Copy<Scalar>> in;
    if (rows)
        in.push_back({a.q,
                      TensorView<Scalar>::packed(q.ptr(), p.batch, p.heads, p.n_q, p.d),
                      &o.rows,
                      false,
                      Operand::q});
    else
        r.q = a.q, r.o = a.o, r.lse = a.lse;
    if (keys) {
        in.push_back({a.k,
                      TensorView<Scalar>::packed(k.ptr(), p.batch, p.kv_heads, p.n_k, p.d),
                      &o.keys,
                      false,
                      Operand::k});
        in.push_back({a.v,
                      TensorView<Scalar>::packed(v.ptr(), p.batch, p.kv_heads, p.n_k, p.d_v),
                      &o.keys,
                      false,
                      Operand::v});
    } else {
        r.k = a.k, r.v = a.v;
    }
    run_copies(in, copy_line<Scalar>(p), counter);
    forward_split(r, parts, plan, memory, counter);
    if (rows)
        run_copies(std::vector<Copy<Scalar>>{{r.o, a.o, &o.rows, true, Operand::o},
                                             {r.lse, a.lse, &o.rows, true, Operand::lse}},
                   copy_line<Scalar>(p),
                   counter);
}

template <typename Scalar, typename Counter>
void backward_permuted(const BackwardArgs<Scalar>& args,
                       const PartsView& parts,
                       const VariantPlan& plan,
                       const MemoryModel& memory,
                       Counter& counter) {
    BackwardArgs<Scalar> a = args;
    check(a, parts.tile, "ioattn::sparse::backward (permuted)", !Counter::kComputes);
    const Problem& p = a.problem;
    const Orders& o = parts.orders;
    const bool rows = !o.rows.empty(), keys = !o.keys.empty();
    if (in_place(parts)) { // no copies: the tiles read and write through the orders
        backward_fused_ordered(a, parts.tile, maps_of(o), plan.tile, memory, counter);
        return;
    }
    constexpr bool kC = Counter::kComputes;
    const std::int64_t nq = p.batch_heads() * p.n_q, nk = p.batch * p.kv_heads * p.n_k;
    Buffer<Scalar> q(kC && rows, nq * p.d), out(kC && rows, nq * p.d_v), lse(kC && rows, nq),
        d_o(kC && rows, nq * p.d_v), d_q(kC && rows, nq * p.d, true);
    Buffer<Scalar> k(kC && keys, nk * p.d), v(kC && keys, nk * p.d_v),
        d_k(kC && keys, nk * p.d, true), d_v(kC && keys, nk * p.d_v, true);
    BackwardArgs<Scalar> r = BackwardArgs<Scalar>::packed(p,
                                                          q.ptr(),
                                                          k.ptr(),
                                                          v.ptr(),
                                                          out.ptr(),
                                                          lse.ptr(),
                                                          d_o.ptr(),
                                                          d_q.ptr(),
                                                          d_k.ptr(),
                                                          d_v.ptr());
    using View = TensorView<Scalar>;
    std::vector<Copy<Scalar>> in, back;
    if (rows) {
        in.push_back(
            {a.q, View::packed(q.ptr(), p.batch, p.heads, p.n_q, p.d), &o.rows, false, Operand::q});
        in.push_back({a.o,
                      View::packed(out.ptr(), p.batch, p.heads, p.n_q, p.d_v),
                      &o.rows,
                      false,
                      Operand::o});
        in.push_back({a.d_o,
                      View::packed(d_o.ptr(), p.batch, p.heads, p.n_q, p.d_v),
                      &o.rows,
                      false,
                      Operand::d_o});
        in.push_back({a.lse,
                      View::packed(lse.ptr(), p.batch, p.heads, p.n_q, 1),
                      &o.rows,
                      false,
                      Operand::lse});
        back.push_back({r.d_q, a.d_q, &o.rows, true, Operand::d_q});
    } else {
        r.q = a.q, r.o = a.o, r.d_o = a.d_o, r.lse = a.lse, r.d_q = a.d_q;
    }
    if (keys) {
        in.push_back({a.k,
                      View::packed(k.ptr(), p.batch, p.kv_heads, p.n_k, p.d),
                      &o.keys,
                      false,
                      Operand::k});
        in.push_back({a.v,
                      View::packed(v.ptr(), p.batch, p.kv_heads, p.n_k, p.d_v),
                      &o.keys,
                      false,
                      Operand::v});
        back.push_back({r.d_k, a.d_k, &o.keys, true, Operand::d_k});
        back.push_back({r.d_v, a.d_v, &o.keys, true, Operand::d_v});
    } else {
        r.k = a.k, r.v = a.v, r.d_k = a.d_k, r.d_v = a.d_v;
    }
    run_copies(in, copy_line<Scalar>(p), counter);
    backward_split(r, parts, plan, memory, counter);
    run_copies(back, copy_line<Scalar>(p), counter);
}

template <typename Scalar>
IoReport
io_cost_permutation(const Problem& problem, const PartsView& parts, const VariantPlan& plan) {
    const Problem p = problem.resolved("ioattn::sparse::io_cost (permuted)");
    const bool fwd = plan.pass == Pass::forward;
    if (in_place(parts)) { // the order indices the tile blocks read, per head
        const bool rows = plan.rows_reordered, keys = plan.keys_reordered;
        std::int64_t words = 0;
        if (fwd) {
            const BlockKeys& tiles = parts.tile.cached_block_keys(plan.tile.rows);
            for (std::int64_t b = 0; b < tiles.blocks(); ++b)
                words += tiles.map_words<Scalar>(b, rows, keys);
        } else { // pass 0 and pass R read each query block's rows; pass A each key block's
            const BlockKeys& tiles = parts.tile.transposed().cached_block_keys(plan.tile.rows);
            for (std::int64_t b = 0; b < tiles.blocks(); ++b)
                words += tiles.map_words<Scalar>(b, keys, rows);
            words += rows ? 2 * p.n_q * kIndexReadWords<Scalar> : 0;
        }
        return {p.batch_heads() * words, 0, 0};
    }
    const std::int64_t iw = ElementWords::of(sizeof(Scalar)).index;
    std::int64_t words = 0, indices = 0; // indices: each copy walks its order once per slice
    if (plan.rows_reordered) {
        words += p.batch_heads() * p.n_q * (fwd ? p.d + p.d_v + 1 : 2 * p.d + 2 * p.d_v + 1);
        indices += p.batch_heads() * p.n_q * (fwd ? 3 : 5); // Q in, O, L out; + dO, O in, dQ out
    }
    if (plan.keys_reordered) {
        words += p.batch * p.kv_heads * p.n_k * (p.d + p.d_v) * (fwd ? 1 : 2);
        indices += p.batch * p.kv_heads * p.n_k * (fwd ? 2 : 4); // K, V in; + dK, dV out
    }
    const bool any = plan.rows_reordered || plan.keys_reordered;
    return {words + indices * iw, words, any ? copy_line<Scalar>(p) : 0};
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward_permuted<Scalar, Counter>(const ForwardArgs<Scalar>&,                    \
                                                    const PartsView&,                              \
                                                    const VariantPlan&,                            \
                                                    const MemoryModel&,                            \
                                                    Counter&);                                     \
    template void backward_permuted<Scalar, Counter>(const BackwardArgs<Scalar>&,                  \
                                                     const PartsView&,                             \
                                                     const VariantPlan&,                           \
                                                     const MemoryModel&,                           \
                                                     Counter&);
IOATTN_FOR_EACH_SCALAR_COUNTER(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template IoReport io_cost_permutation<Scalar>(                                                 \
        const Problem&, const PartsView&, const VariantPlan&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse::detail
