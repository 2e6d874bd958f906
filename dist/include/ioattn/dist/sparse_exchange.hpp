#pragma once
/// Sparse attention over MPI (docs/design.md section 12.4): for a support Omega, each rank receives
/// only the key/value rows its query rows may see, in one MPI_Alltoallv whose counts come from the
/// structure (window:W needs its neighbours only), runs the sparse kernel on its rows against that
/// local key set, and in the backward sends back only those rows' dK, dV, which their owners add in
/// rank order. Communication = comm_cost_sparse_forward / _backward, and the forward's equals the
/// sharding's lower bound.
///
/// Requirements as ring.hpp: MPI with at least MPI_THREAD_FUNNELED, called from the main thread
/// on every rank with the same problem, layout, Scalar, tiling and support (the whole n_q x n_k
/// Omega, e.g. from the same spec string and seed); bad input on any rank makes every rank throw.
/// Bitwise identical run to run for a fixed P and sharding, any thread count.

#include <ioattn/dist/shard.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>

#include <cstdint>
#include <vector>

#include <mpi.h>

namespace ioattn::dist {

/// Who sends which key rows to whom, for one rank, from the structure alone (no messages).
struct ExchangePlan {
    /// Per rank s: the global key rows of s this rank's queries may see, ascending (empty for
    /// this rank itself).
    std::vector<std::vector<std::int64_t>> receive_rows;
    /// Per rank s: this rank's global key rows that s's queries may see, ascending (empty for
    /// this rank itself).
    std::vector<std::vector<std::int64_t>> send_rows;
    /// The local key set: this rank's key rows and the received ones, ascending global rows.
    std::vector<std::int64_t> keys;
    /// Omega restricted to this rank's query rows (local order) and the local key set
    /// (positions in `keys`).
    sparse::Support support;

    /// Builds the plan of `rank` in O(n_k + Z_QK + local key set log). Throws InvalidArgument
    /// when the support is not queries.n() x keys.n() or the rank counts differ.
    static ExchangePlan
    build(const sparse::Support& support, const Sharding& queries, const Sharding& keys, int rank);

    /// The ranks this rank exchanges rows with (either way), ascending.
    [[nodiscard]] std::vector<int> peers() const;
};

/// O, L of this rank's query rows over Omega: the exchange, then sparse::forward with the
/// tiling's schedule on the local rows (problem.causal must be false: the support carries the
/// mask). Communication = comm_cost_sparse_forward(problem, support, queries, keys, rank).
template <typename Scalar, typename Counter>
PassStats sparse_forward(MPI_Comm comm,
                         const ShardForwardArgs<Scalar>& args,
                         const sparse::Support& support,
                         const Tiling& tiling,
                         const MemoryModel& memory,
                         Counter& counter,
                         const PassOptions& options = {});

/// dQ, dK, dV of this rank's rows over Omega, recomputed from (O, L): the forward's exchange,
/// sparse::backward on the local rows, then the received rows' dK, dV back to their owners.
/// Communication = comm_cost_sparse_backward(problem, support, queries, keys, rank).
template <typename Scalar, typename Counter>
PassStats sparse_backward(MPI_Comm comm,
                          const ShardBackwardArgs<Scalar>& args,
                          const sparse::Support& support,
                          const Tiling& tiling,
                          const MemoryModel& memory,
                          Counter& counter,
                          const PassOptions& options = {});

} // namespace ioattn::dist
