#pragma once
/// The element kernels of the fused sparse schedule: one query row at a time over its own keys
/// (K_j, V_j gathered per allowed key; no tile, no mask), 2-D cache blocked, for scattered
/// rows (random, graph and the random part of BigBird patterns). The variant planner
/// (ioattn/sparse/variants.hpp) runs them on the pairs tiles would waste work on. Bitwise
/// independent of the thread count; counted I/O equals the closed forms below and is the same
/// under every instruction set.

#include <ioattn/io_counter.hpp>
#include <ioattn/memory_model.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

#include <cstdint>

namespace ioattn::sparse {

/// Element forward: per (batch, head), blocks of at most tiling.rows query rows (cut by
/// nonzeros too) keep each row's scaled q, output accumulator and softmax state resident while
/// the panels of tiling.cols keys pass; every row consumes its keys in the panel (a batch of a
/// vector's width of keys at a time: dot products in flight, one online-softmax update, V rows
/// accumulated), so each panel's K and V rows are read once per block. Only allowed pairs are
/// touched. tiling.schedule must be fused. Residency (rows padded to 64 bytes, indices 8 bytes):
/// r (line(d) + line(d_v)) + 2 line(r) + line(r iw), plus per panel its distinct keys times
/// line(d) + line(d_v) and the longest run's indices. I/O = io_cost_forward_element. Throws
/// InvalidArgument (shapes, views, causal, tiling) and CapacityError (peak > M).
template <typename Scalar, typename Counter>
void forward_element(const ForwardArgs<Scalar>& args,
                     const Support& support,
                     const Tiling& tiling,
                     const MemoryModel& memory,
                     Counter& counter);

/// Exact I/O of forward_element<Scalar> (the padding of its residency depends on the word).
template <typename Scalar>
IoReport
io_cost_forward_element(const Problem& problem, const Support& support, const Tiling& tiling);

/// Element backward: dQ over Omega (sweep Q: a row block resident with q, dO, L, D and its dQ
/// accumulator, key panels streamed), then dK, dV over Omega^T (sweep K: a key block resident
/// with k, v and both accumulators, query panels streamed); P and dS recomputed per pair in each
/// sweep. Deterministic, no atomics. Reads args.o and args.lse from the forward. tiling as for
/// forward_element (blocks of both sweeps, panels of both). I/O = io_cost_backward_element.
/// Throws as forward_element.
template <typename Scalar, typename Counter>
void backward_element(const BackwardArgs<Scalar>& args,
                      const Support& support,
                      const Tiling& tiling,
                      const MemoryModel& memory,
                      Counter& counter);

/// Exact I/O of backward_element<Scalar>.
template <typename Scalar>
IoReport
io_cost_backward_element(const Problem& problem, const Support& support, const Tiling& tiling);

/// The element tiling timed runs use: blocks of 256 rows, panels of 512 keys, halved (panels
/// first) until the kernel's worst-case peak for `pass` fits M words of Scalar. Throws
/// CapacityError when not even 1 x 1 fits.
template <typename Scalar>
Tiling element_tiling(const Problem& problem, const MemoryModel& memory, Pass pass);

} // namespace ioattn::sparse
