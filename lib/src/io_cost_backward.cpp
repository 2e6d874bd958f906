// Closed-form I/O of the dense backward schedules. Each formula mirrors the loop structure of
// the kernel named in its comment; tests hold the kernels' counted I/O equal to it.

#include "io_cost_util.hpp"

#include <ioattn/error.hpp>
#include <ioattn/io_cost.hpp>
#include <ioattn/tiling.hpp>

#include <algorithm>
#include <string>

namespace ioattn {

using detail::ceil_div;
using detail::require_schedule;

namespace {

/// First query row that sees key j (n_q if none): j <= i + n_k - n_q.
std::int64_t first_row(const Problem& p, std::int64_t j) {
    if (!p.causal)
        return 0;
    return std::clamp<std::int64_t>(j - p.causal_offset(), 0, p.n_q);
}

} // namespace

// backward_fused.cpp: R = tiling.rows resident, C = tiling.cols streamed, G dQ partials.
//   pass 0, per row block:  read O_i, dO_i                 write D_i
//   pass A, per kv slice and key block j (group j mod G): read K_j, V_j; per query head of the
//           group, per streamed query block from first_row(j0): read Q_i, dO_i, L_i, D_i (and
//           the partial dQ_i unless j is the group's first block)   write the partial dQ_i
//                                                           write dK_j, dV_j
//   pass R, per row: read the partials of the groups whose first block reaches it   write dQ
IoReport io_cost_backward_fused(const Problem& problem, const Tiling& tiling) {
    const Problem p = problem.resolved("ioattn::io_cost_backward_fused");
    require_schedule(tiling, Schedule::fused, "ioattn::io_cost_backward_fused");
    const std::int64_t rs = tiling.rows;
    const std::int64_t k_blocks = ceil_div(p.n_k, rs);
    const std::int64_t groups = backward_dq_groups(p, k_blocks);
    std::int64_t slice_reads = 2 * p.n_q * p.d_v;    // pass 0
    std::int64_t slice_writes = p.n_q + p.n_q * p.d; // D, dQ
    for (std::int64_t jb = 0; jb < k_blocks; ++jb) {
        const std::int64_t rows = p.n_q - first_row(p, jb * rs); // streamed past key block j
        slice_reads += rows * (p.d + p.d_v + 2) + (jb >= groups ? rows * p.d : 0);
        slice_writes += rows * p.d;
        if (jb < groups)
            slice_reads += rows * p.d; // pass R reads what the group's first block reaches
    }
    const std::int64_t kv_words = p.batch * p.kv_heads * p.n_k * (p.d + p.d_v);
    return {slice_reads * p.batch_heads() + kv_words,
            slice_writes * p.batch_heads() + kv_words,
            tiling.resident_words(p, Pass::backward)};
}

// backward_materialized.cpp: square tiles of side b, per query head and row tile i with T_i
// visible column tiles of total width C_i (a row tile with T_i = 0 only writes its zero dQ_i),
// vch = ceil(d_v/b), dch = ceil(d/b):
//   P:  read L_i once; per visible tile: read Q_i, K_j chunks           write P_ij
//   dV: per key tile and d_v chunk, per head of the group and row tile that sees it:
//       read P_ij, dO_i chunk                                            write dV_j chunk
//   dS: read O_i, dO_i chunks (D_i = rowsum(dO_i o O_i) stays resident, never stored);
//       per visible tile: read dO_i, V_j chunks, P_ij                    write dS_ij
//   dQ: per row tile and d chunk, per visible tile: read dS_ij, K_j chunk   write dQ_i chunk
//   dK: per key tile and d chunk, per head and row tile that sees it: read dS_ij, Q_i chunk
//                                                                        write dK_j chunk
IoReport io_cost_backward_materialized(const Problem& problem, const Tiling& tiling) {
    const Problem p = problem.resolved("ioattn::io_cost_backward_materialized");
    require_schedule(tiling, Schedule::materialized, "ioattn::io_cost_backward_materialized");
    const std::int64_t b = tiling.rows;
    const std::int64_t vch = ceil_div(p.d_v, b), dch = ceil_div(p.d, b);
    std::int64_t reads = 0;
    std::int64_t writes = p.n_q * p.d; // dQ
    for (std::int64_t i0 = 0; i0 < p.n_q; i0 += b) {
        const std::int64_t r = std::min(b, p.n_q - i0);
        const std::int64_t tiles = ceil_div(p.visible_keys(i0 + r - 1), b);
        if (tiles == 0)
            continue;
        const std::int64_t cols = std::min(p.n_k, tiles * b);
        reads += tiles * r * p.d + cols * p.d + r;                            // P
        reads += vch * r * cols + tiles * r * p.d_v;                          // dV
        reads += 2 * r * p.d_v + tiles * r * p.d_v + cols * p.d_v + r * cols; // dS
        reads += dch * r * cols + cols * p.d;                                 // dQ
        reads += dch * r * cols + tiles * r * p.d;                            // dK
        writes += 2 * r * cols;                                               // P, dS
    }
    const std::int64_t kv_words = p.batch * p.kv_heads * p.n_k * (p.d + p.d_v); // dK, dV
    return {reads * p.batch_heads(),
            writes * p.batch_heads() + kv_words,
            tiling.resident_words(p, Pass::backward)};
}

IoReport io_cost_backward(const Problem& problem, const Tiling& tiling) {
    switch (tiling.schedule) {
    case Schedule::fused:
        return io_cost_backward_fused(problem, tiling);
    case Schedule::materialized:
        return io_cost_backward_materialized(problem, tiling);
    case Schedule::reference:
        break;
    }
    throw InvalidArgument("ioattn::io_cost_backward: the reference schedule has no I/O model");
}

IoReport io_cost(const Problem& problem, const Tiling& tiling, Pass pass) {
    return pass == Pass::forward ? io_cost_forward(problem, tiling)
                                 : io_cost_backward(problem, tiling);
}

} // namespace ioattn
