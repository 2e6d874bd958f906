// ioattn::dist::ring_backward: ring attention backward over MPI (docs/design.md section 12.4)
// Per rank r of P: dQ of its query rows, dK, dV of its key rows, recomputed from (O, L).
// Reference: dense::backward on the whole sequence (tests compare with it).
//   pack own K, V into block buffer 0; dQ = 0
//   for step s = 0 .. P-1, holding the block b = r - s:
//     post: receive block b-1 from r-1, send block b to r+1             (s < P-1)
//           receive the dK, dV sum of block b from r-1                   (s > 0)
//     part = 0; for each (query chunk, key chunk) pair and piece of key rows:
//       rectangles of the causal mask -> dense::backward (D, P = exp(S - L), dS, ...)
//       dQ += its dQ; part += its dK, dV; poll MPI
//     sum(b) = part (s = 0) or sum(b) + part; send sum(b) to r+1            (P > 1)
//   receive the finished sum of block r from r-1 (its last hop home): dK, dV
// W = batch * kv_heads * (d + d_v) words per key row, K/V and dK/dV alike.
// Communication = comm_cost_ring_backward: the forward's rotation plus n_k W each way.
// dK, dV of block b sum the ranks' parts in ring order b, b+1, ..., b+P-1; dQ sums the steps
// in order; no atomics: bitwise identical for a fixed P and sharding, any thread count.
// bf16 (docs/design.md section 16): K/V blocks travel in bf16 and are widened exactly before
// their kernels; Q, O, dO are widened once; dQ and the dK, dV sums are fp32, and the sums'
// hops between ranks carry fp32 words, so no partial is ever rounded. Each sum is rounded once,
// when it is finished: on rank r - 1 before its last hop home, which therefore carries bf16 (the
// same value as rounding at home, half the bytes); dQ is rounded once after the last step.
// Bit for bit the float ring's on the widened inputs, rounded.
// Tests: tests/dist/ring_test.cpp, tests/dist/bf16_test.cpp

#include "channel.hpp"
#include "compute_shard.hpp"
#include "ring_plan.hpp"

#include <ioattn/dense/backward.hpp>
#include <ioattn/dist/ring.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <vector>

namespace ioattn::dist {

namespace {

using detail::Channel;
using detail::KvBlock;
using detail::PassShape;
using detail::Rect;
using detail::rows_of;

constexpr int kSumReceive = 2; // 0 and 1: the K/V rotation (ring_plan.hpp)
constexpr int kSumSend = 3;    // and 4: one slot per sum buffer
constexpr int kTagBackwardKv = 1611;
constexpr int kTagSum = 1612;

template <typename Scalar, typename Counter>
struct BackwardRunner {
    const PassShape& s;
    const ShardBackwardArgs<Scalar>& a;
    const Tiling& tiling;
    const MemoryModel& memory;
    Counter& counter;
    Channel& channel;
    std::int64_t piece = 0;
    std::vector<Scalar> dq{};
    std::vector<Scalar> dk{};
    std::vector<Scalar> dv{};
    std::int64_t calls = 0;
    bool poll = true; ///< poll MPI between pieces (false on workers: the caller polls)

    void block(int src, Scalar* data, Scalar* part_data) {
        const auto kv = KvBlock<Scalar>::over(data, s.problem, s.keys.rows(src));
        const auto part = KvBlock<Scalar>::over(part_data, s.problem, s.keys.rows(src));
        std::int64_t lq = 0;
        for (const Range& qr : s.queries.ranges(s.rank)) {
            std::int64_t lk = 0;
            for (const Range& kr : s.keys.ranges(src)) {
                pair(qr, lq, kr, lk, kv, part);
                lk += kr.size();
            }
            lq += qr.size();
        }
    }

    void pair(const Range& qr,
              std::int64_t lq,
              const Range& kr,
              std::int64_t lk,
              const KvBlock<Scalar>& kv,
              const KvBlock<Scalar>& part) {
        const Problem& p = s.problem;
        const std::int64_t t = qr.begin - kr.begin + p.n_k - p.n_q;
        for (std::int64_t a0 = 0; a0 < kr.size(); a0 += piece) {
            const std::int64_t a1 = std::min(kr.size(), a0 + piece);
            // keys [a0, a1) of the chunk: query i sees key j iff j <= i + t - a0
            const detail::Rects rs = detail::rectangles(qr.size(), a1 - a0, t - a0, p.causal);
            for (int i = 0; i < rs.count; ++i)
                run(rs.rect[static_cast<std::size_t>(i)], lq, lk + a0, kv, part);
            if (rs.count > 0 && poll)
                channel.poll();
        }
    }

    void run(const Rect& r,
             std::int64_t q_at,
             std::int64_t k_at,
             const KvBlock<Scalar>& kv,
             const KvBlock<Scalar>& part) {
        const Problem& p = s.problem;
        Problem sub = p;
        sub.n_q = r.q1 - r.q0;
        sub.n_k = r.k1 - r.k0;
        sub.causal = r.causal;
        using In = TensorView<const Scalar>;
        using Out = TensorView<Scalar>;
        const std::int64_t q0 = q_at + r.q0;
        const std::int64_t k0 = k_at + r.k0;
        BackwardArgs<Scalar> b;
        static_cast<ForwardArgs<Scalar>&>(b) = {sub,
                                                rows_of(a.q, q0, sub.n_q),
                                                rows_of(In(kv.k), k0, sub.n_k),
                                                rows_of(In(kv.v), k0, sub.n_k),
                                                rows_of(a.o, q0, sub.n_q),
                                                rows_of(a.lse, q0, sub.n_q)};
        b.d_o = rows_of(a.d_o, q0, sub.n_q);
        b.d_q = Out::packed(dq.data(), p.batch, p.heads, sub.n_q, p.d);
        b.d_k = Out::packed(dk.data(), p.batch, p.kv_heads, sub.n_k, p.d);
        b.d_v = Out::packed(dv.data(), p.batch, p.kv_heads, sub.n_k, p.d_v);
        dense::backward(b, tiling, memory, counter);
        detail::add_view<Scalar>(b.d_q, rows_of(a.d_q, q0, sub.n_q));
        detail::add_view<Scalar>(b.d_k, rows_of(part.k, k0, sub.n_k));
        detail::add_view<Scalar>(b.d_v, rows_of(part.v, k0, sub.n_k));
        ++calls;
    }
};

/// A flat [rows][w] view of a block buffer, for sums of whole blocks.
template <typename Scalar>
TensorView<Scalar> flat(Scalar* data, std::int64_t rows, std::int64_t w) {
    return TensorView<Scalar>::packed(data, 1, 1, rows, w);
}

} // namespace

template <typename Scalar, typename Counter>
PassStats ring_backward(MPI_Comm comm,
                        const ShardBackwardArgs<Scalar>& args,
                        const Tiling& tiling,
                        const MemoryModel& memory,
                        Counter& counter,
                        const PassOptions& options) {
    using Compute = Accumulator<Scalar>;
    constexpr const char* kWhere = "ioattn::dist::ring_backward";
    const double t0 = MPI_Wtime();
    const PassShape s =
        detail::validate_pass<Scalar>(comm, args, &args, nullptr, tiling, memory, options, kWhere);
    const Problem& p = s.problem;
    const int ranks = s.keys.ranks();
    const int threads = max_concurrency(); // the caller's arena
    const std::int64_t w = kv_row_words(p);
    const auto words = static_cast<std::size_t>(s.keys.max_rows() * w);
    const detail::ComputeShard<Scalar> shard(args, &args);
    const ShardBackwardArgs<Compute>& a = shard.backward();
    std::vector<Scalar> kv[2] = {std::vector<Scalar>(words), std::vector<Scalar>(words)};
    std::vector<Compute> widened(detail::ComputeShard<Scalar>::kWidened ? words : 0);
    std::vector<Compute> sums[2] = {std::vector<Compute>(words), std::vector<Compute>(words)};
    std::vector<Compute> part(words);
    // a finished sum on its last hop, rounded to the storage type: out to r + 1, in from r - 1
    std::vector<Scalar> finished_out(ranks > 1 ? words : 0);
    std::vector<Scalar> finished_in(ranks > 1 ? words : 0);
    const auto own = KvBlock<Scalar>::over(kv[0].data(), p, s.keys.rows(s.rank));
    detail::copy_view(args.k, own.k);
    detail::copy_view(args.v, own.v);
    detail::fill_view(a.d_q, Compute(0));
    Channel channel(comm); // after the buffers: its destructor waits for their messages

    BackwardRunner<Compute, Counter> runner{s, a, tiling, memory, counter, channel};
    runner.piece = std::min(
        s.keys.max_rows(), detail::piece_rows(p, tiling, s.queries.max_rows(), options.poll_flops));
    runner.dq.resize(static_cast<std::size_t>(p.batch_heads() * s.queries.max_rows() * p.d));
    runner.dk.resize(static_cast<std::size_t>(p.batch * p.kv_heads * runner.piece * p.d));
    runner.dv.resize(static_cast<std::size_t>(p.batch * p.kv_heads * runner.piece * p.d_v));
    for (int step = 0; step < ranks; ++step) {
        const int src = (s.rank - step + ranks) % ranks;
        const std::int64_t rows = s.keys.rows(src);
        Scalar* current = kv[step % 2].data();
        Compute* sum = sums[step % 2].data();
        detail::post_rotation(channel, s, step, current, kv[(step + 1) % 2].data(), kTagBackwardKv);
        if (step > 0) {
            channel.wait(kSumSend + step % 2); // the buffer's send of two steps ago
            channel.receive(kSumReceive, sum, rows * w, channel.prev(), kTagSum);
        }
        std::fill_n(part.data(), rows * w, Compute(0));
        if (!options.communication_only)
            channel.overlap(options.progress_beside, threads, [&](bool poll) {
                runner.poll = poll;
                runner.block(src, detail::compute_block(current, widened, rows * w), part.data());
            });
        if (step == 0) {
            std::copy_n(part.data(), rows * w, sum);
        } else {
            channel.wait(kSumReceive);
            detail::add_view<Compute>(flat(part.data(), rows, w), flat(sum, rows, w));
        }
        if (ranks > 1 && step == ranks - 1) { // block r + 1's sum is finished: round it, send home
            detail::copy_view<Compute>(flat(sum, rows, w), flat(finished_out.data(), rows, w));
            channel.send(
                kSumSend + step % 2, finished_out.data(), rows * w, channel.next(), kTagSum);
        } else if (ranks > 1) {
            channel.send(kSumSend + step % 2, sum, rows * w, channel.next(), kTagSum);
        }
        channel.wait(detail::kRotateReceive);
        channel.wait(detail::kRotateSend);
    }
    const std::int64_t mine = s.keys.rows(s.rank);
    if (ranks > 1) {
        channel.receive(kSumReceive, finished_in.data(), mine * w, channel.prev(), kTagSum);
        channel.wait(kSumReceive);
        const auto done = KvBlock<Scalar>::over(finished_in.data(), p, mine);
        detail::copy_view<Scalar>(done.k, args.d_k);
        detail::copy_view<Scalar>(done.v, args.d_v);
    } else { // one rank: the sum never leaves, rounded here
        const auto done = KvBlock<Compute>::over(sums[0].data(), p, mine);
        detail::copy_view<Compute>(done.k, args.d_k);
        detail::copy_view<Compute>(done.v, args.d_v);
    }
    channel.wait(kSumSend);
    channel.wait(kSumSend + 1);
    shard.round_dq(); // bf16: the one rounding of dQ, after every step
    return channel.stats(runner.calls, t0);
}

#define IOATTN_DIST_INSTANTIATE(T, C)                                                              \
    template PassStats ring_backward<T, C>(MPI_Comm,                                               \
                                           const ShardBackwardArgs<T>&,                            \
                                           const Tiling&,                                          \
                                           const MemoryModel&,                                     \
                                           C&,                                                     \
                                           const PassOptions&);

IOATTN_DIST_FOR_EACH_PASS_TYPE(IOATTN_DIST_INSTANTIATE)
#undef IOATTN_DIST_INSTANTIATE

} // namespace ioattn::dist
