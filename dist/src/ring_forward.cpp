// ioattn::dist::ring_forward: ring attention forward over MPI (docs/design.md section 12.4)
// Per rank r of P: O, L of its query rows against every rank's K/V block.
// Reference: dense::forward on the whole sequence (tests compare with it).
//   pack own K, V into block buffer 0                                   rows_k(r) * W words
//   for step s = 0 .. P-1, holding the block of rank r - s:
//     post: receive block r-s-1 from rank r-1, send block r-s to rank r+1   (s < P-1)
//     for each (query chunk, key chunk) pair and piece of query rows:
//       rectangles of the causal mask -> dense::forward into (O_p, L_p)
//       L' = log(e^L + e^L_p), O' = e^(L-L') O + e^(L_p-L') O_p; poll MPI
//     wait for both messages (time not hidden by compute)
// W = batch * kv_heads * (d + d_v): GQA sends key/value heads only.
// Communication = comm_cost_ring_forward: received (n_k - rows_k(r)) W in P-1 messages.
// Merges are in step order, element-wise: bitwise identical for a fixed P and sharding, any
// thread count.
// bf16 (docs/design.md section 16): the blocks travel in bf16 (2 bytes a word) and each is
// widened exactly to fp32 before its kernels; Q is widened once; (O, L) and every partial stay
// fp32 through all merges, and O is rounded to the caller's bf16 once, after the last step
// (compute_shard.hpp). The result is bit for bit the float ring's on the widened inputs, O
// rounded. Tests: tests/dist/ring_test.cpp, tests/dist/bf16_test.cpp

#include "channel.hpp"
#include "compute_shard.hpp"
#include "ring_plan.hpp"

#include <ioattn/dense/forward.hpp>
#include <ioattn/dist/ring.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <limits>
#include <vector>

namespace ioattn::dist {

namespace {

using detail::Channel;
using detail::KvBlock;
using detail::PassShape;
using detail::Rect;
using detail::rows_of;

constexpr int kTagForwardKv = 1601;

/// The compute of the steps: one block's pairs, pieces and rectangles.
template <typename Scalar, typename Counter>
struct ForwardRunner {
    const PassShape& s;
    const ShardForwardArgs<Scalar>& a;
    const Tiling& tiling;
    const MemoryModel& memory;
    Counter& counter;
    Channel& channel;
    std::int64_t piece = 0;
    std::vector<Scalar> o_part{};
    std::vector<Scalar> lse_part{};
    std::int64_t calls = 0;
    bool poll = true; ///< poll MPI between pieces (false on workers: the caller polls)

    void block(int src, Scalar* data) {
        const auto kv = KvBlock<Scalar>::over(data, s.problem, s.keys.rows(src));
        std::int64_t lq = 0;
        for (const Range& qr : s.queries.ranges(s.rank)) {
            std::int64_t lk = 0;
            for (const Range& kr : s.keys.ranges(src)) {
                pair(qr, lq, kr, lk, kv);
                lk += kr.size();
            }
            lq += qr.size();
        }
    }

    void pair(const Range& qr,
              std::int64_t lq,
              const Range& kr,
              std::int64_t lk,
              const KvBlock<Scalar>& kv) {
        const Problem& p = s.problem;
        // query i of the chunk sees key j of the chunk iff kr.begin + j <= qr.begin + i + n_k - n_q
        const std::int64_t t = qr.begin - kr.begin + p.n_k - p.n_q;
        for (std::int64_t p0 = 0; p0 < qr.size(); p0 += piece) {
            const std::int64_t p1 = std::min(qr.size(), p0 + piece);
            const detail::Rects rs = detail::rectangles(p1 - p0, kr.size(), t + p0, p.causal);
            for (int i = 0; i < rs.count; ++i)
                run(rs.rect[static_cast<std::size_t>(i)], lq + p0, lk, kv);
            if (rs.count > 0 && poll)
                channel.poll();
        }
    }

    void run(const Rect& r, std::int64_t q_at, std::int64_t k_at, const KvBlock<Scalar>& kv) {
        const Problem& p = s.problem;
        Problem sub = p;
        sub.n_q = r.q1 - r.q0;
        sub.n_k = r.k1 - r.k0;
        sub.causal = r.causal;
        using In = TensorView<const Scalar>;
        using Out = TensorView<Scalar>;
        const Out o = Out::packed(o_part.data(), p.batch, p.heads, sub.n_q, p.d_v);
        const Out lse = Out::packed(lse_part.data(), p.batch, p.heads, sub.n_q, 1);
        const ForwardArgs<Scalar> f{sub,
                                    rows_of(a.q, q_at + r.q0, sub.n_q),
                                    rows_of(In(kv.k), k_at + r.k0, sub.n_k),
                                    rows_of(In(kv.v), k_at + r.k0, sub.n_k),
                                    o,
                                    lse};
        dense::forward(f, tiling, memory, counter);
        detail::merge_partial<Scalar>(
            o, lse, rows_of(a.o, q_at + r.q0, sub.n_q), rows_of(a.lse, q_at + r.q0, sub.n_q));
        ++calls;
    }
};

} // namespace

template <typename Scalar, typename Counter>
PassStats ring_forward(MPI_Comm comm,
                       const ShardForwardArgs<Scalar>& args,
                       const Tiling& tiling,
                       const MemoryModel& memory,
                       Counter& counter,
                       const PassOptions& options) {
    using Compute = Accumulator<Scalar>;
    constexpr const char* kWhere = "ioattn::dist::ring_forward";
    const double t0 = MPI_Wtime();
    const PassShape s = detail::validate_pass<Scalar>(
        comm, args, nullptr, nullptr, tiling, memory, options, kWhere);
    const Problem& p = s.problem;
    const int ranks = s.keys.ranks();
    const int threads = max_concurrency(); // the caller's arena
    const std::int64_t w = kv_row_words(p);
    const auto words = static_cast<std::size_t>(s.keys.max_rows() * w);
    const detail::ComputeShard<Scalar> shard(args, nullptr);
    const ShardForwardArgs<Compute>& a = shard.forward();
    std::vector<Scalar> buffers[2] = {std::vector<Scalar>(words), std::vector<Scalar>(words)};
    std::vector<Compute> widened(detail::ComputeShard<Scalar>::kWidened ? words : 0);
    const auto own = KvBlock<Scalar>::over(buffers[0].data(), p, s.keys.rows(s.rank));
    detail::copy_view(args.k, own.k);
    detail::copy_view(args.v, own.v);
    detail::fill_view(a.o, Compute(0));
    detail::fill_view(a.lse, -std::numeric_limits<Compute>::infinity());
    Channel channel(comm); // after the buffers: its destructor waits for their messages

    ForwardRunner<Compute, Counter> runner{s, a, tiling, memory, counter, channel};
    runner.piece = std::min(s.queries.max_rows(),
                            detail::piece_rows(p, tiling, s.keys.max_rows(), options.poll_flops));
    runner.o_part.resize(static_cast<std::size_t>(p.batch_heads() * runner.piece * p.d_v));
    runner.lse_part.resize(static_cast<std::size_t>(p.batch_heads() * runner.piece));
    for (int step = 0; step < ranks; ++step) {
        const int src = (s.rank - step + ranks) % ranks;
        Scalar* current = buffers[step % 2].data();
        detail::post_rotation(
            channel, s, step, current, buffers[(step + 1) % 2].data(), kTagForwardKv);
        if (!options.communication_only)
            channel.overlap(options.progress_beside, threads, [&](bool poll) {
                runner.poll = poll;
                runner.block(src, detail::compute_block(current, widened, s.keys.rows(src) * w));
            });
        channel.wait(detail::kRotateReceive);
        channel.wait(detail::kRotateSend);
    }
    shard.round_o(); // bf16: the one rounding of O, after every merge
    return channel.stats(runner.calls, t0);
}

#define IOATTN_DIST_INSTANTIATE(T, C)                                                              \
    template PassStats ring_forward<T, C>(MPI_Comm,                                                \
                                          const ShardForwardArgs<T>&,                              \
                                          const Tiling&,                                           \
                                          const MemoryModel&,                                      \
                                          C&,                                                      \
                                          const PassOptions&);

IOATTN_DIST_FOR_EACH_PASS_TYPE(IOATTN_DIST_INSTANTIATE)
#undef IOATTN_DIST_INSTANTIATE

} // namespace ioattn::dist
