#pragma once
/// One rank's shard of a distributed pass: its rows of the operands under a Sharding
/// (docs/design.md section 12.4), the options of a pass and what a pass reports. Shared by the ring
/// (ring.hpp) and the sparse exchange (sparse_exchange.hpp).

#include <ioattn/dist/comm_cost.hpp>
#include <ioattn/dist/sharding.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/view.hpp>

#include <cstdint>

namespace ioattn::dist {

/// One rank's shard of a forward pass. `problem` is the global problem (n_q, n_k are the whole
/// sequences; causal masks are bottom-right aligned over them). q: [batch][heads][rows_q][d],
/// k: [batch][kv_heads][rows_k][d], v: [batch][kv_heads][rows_k][d_v], o: [batch][heads][rows_q]
/// [d_v], lse: [batch][heads][rows_q][1], with rows_q = Sharding(layout, n_q, P).rows(rank) and
/// rows_k likewise over n_k, in the sharding's local order. Outputs must not overlap inputs.
/// Scalar is float, double or bf16; lse is Accumulator<Scalar> (fp32 for bf16, as in
/// ForwardArgs).
template <typename Scalar>
struct ShardForwardArgs {
    Problem problem;
    Layout layout = Layout::contiguous;
    TensorView<const Scalar> q;
    TensorView<const Scalar> k;
    TensorView<const Scalar> v;
    TensorView<Scalar> o;
    TensorView<Accumulator<Scalar>> lse;
};

/// One rank's shard of a backward pass: the forward's shard with o and lse as the distributed
/// forward wrote them (read here), the upstream gradient d_o (like o) and the gradients d_q (like
/// q), d_k (like k), d_v (like v), which are overwritten.
template <typename Scalar>
struct ShardBackwardArgs : ShardForwardArgs<Scalar> {
    TensorView<const Scalar> d_o;
    TensorView<Scalar> d_q;
    TensorView<Scalar> d_k;
    TensorView<Scalar> d_v;
};

/// Options of a distributed pass.
struct PassOptions {
    /// Walk the communication schedule with no arithmetic: the same messages, no kernels. The
    /// outputs are left unspecified. Its time is what the transfers cost when nothing hides them.
    bool communication_only = false;
    /// Work per piece of a ring step (the calling thread polls MPI between pieces when it
    /// computes itself, see progress_beside): about this many flops, and at least one kernel
    /// tile of rows. The default, 2^34, is about a second of one core: few kernel calls. The
    /// results depend on it only through the order of floating-point sums (the backward's dQ
    /// and dK, dV partials), never on timing, thread count or progress_beside.
    double poll_flops = 17179869184.0;
    /// The ring passes compute each step on a second thread (with as many oneTBB slots as the
    /// caller's arena) while the calling thread keeps MPI progressing, so that transfers
    /// advance during the kernels; false: the calling thread computes and polls MPI between
    /// pieces. The results are the same bit for bit.
    bool progress_beside = true;
};

/// What one rank did: its counted communication and where its time went.
struct PassStats {
    CommReport comm;
    double seconds = 0;            ///< wall time of the pass
    double wait_seconds = 0;       ///< blocked in MPI waits: communication not hidden by compute
    std::int64_t kernel_calls = 0; ///< kernel calls (a causal mask's hidden rectangles make none)
};

} // namespace ioattn::dist
