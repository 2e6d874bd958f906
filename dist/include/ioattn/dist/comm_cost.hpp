#pragma once
/// Counted communication of the distributed schedules and its closed forms (docs/design.md section
/// 12.4). A word is one scalar of the working type, as in the memory model. Only point-to-point
/// data is counted (the ring's K/V blocks and dK/dV sums, the sparse exchange's rows), never the
/// few words of validation handshakes, so the counts are what crossed the wire. Words are
/// counted alike for every dtype; bytes weigh each word at the size it travels in (WireBytes):
/// with bf16 operands (docs/design.md section 16) K/V rows and finished dK, dV rows travel in
/// 2 bytes, dK, dV sums that are still being added to in fp32 (4 bytes).

#include <ioattn/dist/sharding.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/view.hpp>

#include <cstdint>
#include <iosfwd>

namespace ioattn::dist {

/// Words, bytes and messages one rank sent to and received from other ranks.
struct CommReport {
    std::int64_t sent_words = 0;
    std::int64_t received_words = 0;
    std::int64_t sent_messages = 0;
    std::int64_t received_messages = 0;
    std::int64_t sent_bytes = 0;
    std::int64_t received_bytes = 0;

    bool operator==(const CommReport&) const = default;
};

std::ostream& operator<<(std::ostream& os, const CommReport& r);

/// Bytes per word on the wire. `operand`: K, V rows and finished dK, dV rows (the last hop of a
/// ring sum, rounded once before it leaves) travel in the storage type; `sum`: dK, dV partial
/// sums that another rank still adds to travel in the accumulator type, so that they are
/// rounded once, at the end. {4, 4} float, {8, 8} double, {2, 4} bf16.
struct WireBytes {
    std::int64_t operand = 4;
    std::int64_t sum = 4;

    bool operator==(const WireBytes&) const = default;
};

/// The wire bytes of a pass in Scalar: {sizeof(Scalar), sizeof(Accumulator<Scalar>)}.
template <typename Scalar>
constexpr WireBytes wire_bytes_of() {
    return {static_cast<std::int64_t>(sizeof(Scalar)),
            static_cast<std::int64_t>(sizeof(Accumulator<Scalar>))};
}

/// Words of one key/value row over all batches and key/value heads: batch * kv_heads *
/// (d + d_v). Grouped-query attention sends kv_heads, never the query heads.
std::int64_t kv_row_words(const Problem& problem);

/// Exact communication of ring_forward on `rank` (keys sharded by `keys`): P-1 messages each
/// way; received = (n_k - keys.rows(rank)) * kv_row_words, the blocks of every other rank;
/// sent = (n_k - keys.rows(rank + 1 mod P)) * kv_row_words. With P = 1: nothing. Bytes:
/// bytes.operand per word. `problem` must be resolved (Problem::resolved).
CommReport
comm_cost_ring_forward(const Problem& problem, const Sharding& keys, int rank, WireBytes bytes);

/// Exact communication of ring_backward on `rank`: the forward's K/V rotation plus the dK, dV
/// sums, which visit every rank and return home: P messages of every block's rows each way,
/// n_k * kv_row_words sent and received. With P = 1: nothing. Bytes: the rotation and each
/// sum's last hop home (rows(rank + 1) sent, rows(rank) received) at bytes.operand per word, the
/// other hops of the sums (partial: n_k - those rows) at bytes.sum.
CommReport
comm_cost_ring_backward(const Problem& problem, const Sharding& keys, int rank, WireBytes bytes);

/// The sharding's lower bound for `rank`: a rank holding its query rows must receive every
/// key/value row one of them may see (all n_k keys, or the causal ones, bottom-right aligned)
/// that it does not hold, kv_row_words each. Exact for the given sharding: no schedule that
/// keeps the queries in place receives less.
std::int64_t
comm_lower_bound(const Problem& problem, const Sharding& queries, const Sharding& keys, int rank);

/// Exact communication of sparse_forward on `rank` for the support Omega (n_q x n_k, global):
/// it receives each key row not its own that one of its query rows may see, once, from its
/// owner, and sends each of its key rows to every other rank with a query row that may see it;
/// kv_row_words per row, one message per rank with a nonzero count. Computed from the
/// structure in O(n_k + Z_QK). Bytes: bytes.operand per word.
CommReport comm_cost_sparse_forward(const Problem& problem,
                                    const sparse::Support& support,
                                    const Sharding& queries,
                                    const Sharding& keys,
                                    int rank,
                                    WireBytes bytes);

/// Exact communication of sparse_backward: the forward's exchange, then the same rows back as
/// dK, dV (what was received is sent home), so sent and received are both the forward's sent
/// plus received. Bytes: the forward's exchange at bytes.operand per word, the dK, dV rows going
/// home at bytes.sum (their owner adds them to its own: partial sums).
CommReport comm_cost_sparse_backward(const Problem& problem,
                                     const sparse::Support& support,
                                     const Sharding& queries,
                                     const Sharding& keys,
                                     int rank,
                                     WireBytes bytes);

/// The lower bound for a sparse support: the key/value rows that the rank's query rows may see
/// and that it does not hold, kv_row_words each (what sparse_forward receives: it is optimal).
std::int64_t comm_lower_bound(const Problem& problem,
                              const sparse::Support& support,
                              const Sharding& queries,
                              const Sharding& keys,
                              int rank);

} // namespace ioattn::dist
