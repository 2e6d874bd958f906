// The documented throws of the distributed passes under mpirun: every rank throws together
// (InvalidArgument) when any rank's arguments are bad, so a mistake cannot hang the ring.

#include "dist_case.hpp"

#include <ioattn/dist/ring.hpp>
#include <ioattn/dist/sparse_exchange.hpp>
#include <ioattn/error.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <catch2/catch.hpp>

using namespace ioattn;
using namespace ioattn::dist;
using namespace ioattn::dist::test;

namespace {

/// Owned shard of a forward pass of an n x n problem on this rank.
struct Shard {
    Problem p;
    Tensor<float> q, k, v, o, lse;

    Shard(std::int64_t n, bool causal, std::int64_t rows_q_delta = 0) {
        p.heads = 2;
        p.n_q = n;
        p.n_k = n;
        p.d = 8;
        p.causal = causal;
        p = p.resolved();
        const Sharding s(Layout::contiguous, n, world_size());
        const std::int64_t rows = s.rows(world_rank());
        q = Tensor<float>(1, 2, rows + rows_q_delta, 8, 0.5F);
        k = Tensor<float>(1, 2, rows, 8, 0.25F);
        v = Tensor<float>(1, 2, rows, 8, 1.0F);
        o = Tensor<float>(1, 2, rows + rows_q_delta, 8);
        lse = Tensor<float>(1, 2, rows + rows_q_delta, 1);
    }

    ShardForwardArgs<float> args() {
        return {p, Layout::contiguous, q.cview(), k.cview(), v.cview(), o.view(), lse.view()};
    }
};

} // namespace

TEST_CASE("ranks that disagree on the problem all throw", "[errors]") {
    if (world_size() == 1)
        return; // nothing to disagree with
    Shard a(24, true);
    ShardForwardArgs<float> args = a.args();
    if (world_rank() == world_size() - 1)
        args.problem.scale = 0.5; // one rank passes another scale
    NullCounter c;
    CHECK_THROWS_AS(ring_forward(MPI_COMM_WORLD, args, kTiling, kMemory, c), InvalidArgument);
}

TEST_CASE("a bad view on one rank makes every rank throw", "[errors]") {
    const bool last = world_rank() == world_size() - 1;
    Shard a(24, false, last ? 1 : 0); // the last rank's q has one row too many
    NullCounter c;
    CHECK_THROWS_AS(ring_forward(MPI_COMM_WORLD, a.args(), kTiling, kMemory, c), InvalidArgument);
    // and the ring still works afterwards: no message was left in flight
    Shard b(24, false);
    CHECK(ring_forward(MPI_COMM_WORLD, b.args(), kTiling, kMemory, c).kernel_calls > 0);
}

TEST_CASE("ring and sparse passes reject bad schedules, options and supports", "[errors]") {
    Shard a(24, true);
    NullCounter c;
    CHECK_THROWS_AS(
        ring_forward(MPI_COMM_WORLD, a.args(), Tiling{Schedule::reference, 24, 24}, kMemory, c),
        InvalidArgument);
    PassOptions bad;
    bad.poll_flops = 0;
    CHECK_THROWS_AS(ring_forward(MPI_COMM_WORLD, a.args(), kTiling, kMemory, c, bad),
                    InvalidArgument);
    CHECK_THROWS_AS(ring_forward(MPI_COMM_WORLD, a.args(), kTiling, MemoryModel{16}, c),
                    CapacityError);
    const sparse::Support window = sparse::pattern_window(24, 24, 2);
    // causal flag with a support: the support carries the mask
    CHECK_THROWS_AS(sparse_forward(MPI_COMM_WORLD, a.args(), window, kTiling, kMemory, c),
                    InvalidArgument);
    Shard b(24, false);
    const sparse::Support wrong = sparse::pattern_window(24, 25, 2);
    CHECK_THROWS_AS(sparse_forward(MPI_COMM_WORLD, b.args(), wrong, kTiling, kMemory, c),
                    InvalidArgument);
    CHECK(sparse_forward(MPI_COMM_WORLD, b.args(), window, kTiling, kMemory, c).kernel_calls == 1);
}

TEST_CASE("too few rows for the ranks is rejected on every rank", "[errors]") {
    Shard a(24, false);
    ShardForwardArgs<float> args = a.args();
    args.layout = Layout::zigzag;
    args.problem.n_q = args.problem.n_k = 2 * world_size() - 1; // fewer than 2P chunks
    NullCounter c;
    CHECK_THROWS_AS(ring_forward(MPI_COMM_WORLD, args, kTiling, kMemory, c), InvalidArgument);
}
