#pragma once
// The data of `ioattn run --dist`: the global seeded inputs (every rank generates the same),
// this rank's shards and outputs, and the gather of shards to rank 0 for --check. bf16: the
// float run's inputs (same seed) rounded to bf16, L in fp32.

#include <ioattn/bf16.hpp>
#include <ioattn/dist/shard.hpp>
#include <ioattn/dist/sharding.hpp>
#include <ioattn/problem.hpp>

#include <cstdint>
#include <vector>

#include <mpi.h>

namespace ioattn::app {

/// Rows of a packed [batch][heads][n][cols] tensor that `rank` holds, in its local order.
template <typename Scalar>
std::vector<Scalar> shard_rows(const std::vector<Scalar>& global,
                               std::int64_t batch,
                               std::int64_t heads,
                               std::int64_t cols,
                               const dist::Sharding& s,
                               int rank);

/// The inverse on rank 0: every rank's local [batch][heads][rows][cols] shard placed at its
/// global rows. Collective; returns the whole tensor on rank 0, an empty vector elsewhere.
template <typename Scalar>
std::vector<Scalar> gather_rows(MPI_Comm comm,
                                const std::vector<Scalar>& local,
                                std::int64_t batch,
                                std::int64_t heads,
                                std::int64_t cols,
                                const dist::Sharding& s);

/// Global inputs (Q, K, V as measure::ForwardData with the seed, dO from seed + 3) and this
/// rank's shards of them and of the outputs.
template <typename Scalar>
struct DistData {
    Problem p; ///< global, resolved
    dist::Layout layout;
    dist::Sharding queries;
    dist::Sharding keys;
    int rank = 0;
    std::vector<Scalar> q, k, v, d_o;      ///< global
    std::vector<Scalar> lq, lk, lv, ld_o;  ///< this rank's shards
    std::vector<Scalar> lo, ldq, ldk, ldv; ///< this rank's outputs
    std::vector<Accumulator<Scalar>> llse; ///< and its L (fp32 for bf16)

    DistData(const Problem& problem, dist::Layout layout, int ranks, int rank, std::uint64_t seed);

    [[nodiscard]] dist::ShardForwardArgs<Scalar> forward();
    [[nodiscard]] dist::ShardBackwardArgs<Scalar> backward();
};

extern template struct DistData<float>;
extern template struct DistData<double>;
extern template struct DistData<bf16>;

} // namespace ioattn::app
