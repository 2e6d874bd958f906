#pragma once
/// Counted communication of the distributed schedules and its closed forms (docs/design.md section
/// 12.4). A word is one scalar of the working type, as in the memory model. Only point-to-point
/// data is counted (the ring's K/V blocks and dK/dV sums, the sparse exchange's rows), never the
/// few words of validation handshakes, so the counts are what crossed the wire.

#include <ioattn/dist/sharding.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/sparse/support.hpp>

#include <cstdint>
#include <iosfwd>

namespace ioattn::dist {

/// Words and messages one rank sent to and received from other ranks.
struct CommReport {
    std::int64_t sent_words = 0;
    std::int64_t received_words = 0;
    std::int64_t sent_messages = 0;
    std::int64_t received_messages = 0;

    bool operator==(const CommReport&) const = default;
};

std::ostream& operator<<(std::ostream& os, const CommReport& r);

/// Words of one key/value row over all batches and key/value heads: batch * kv_heads *
/// (d + d_v). Grouped-query attention sends kv_heads, never the query heads.
std::int64_t kv_row_words(const Problem& problem);

/// Exact communication of ring_forward on `rank` (keys sharded by `keys`): P-1 messages each
/// way; received = (n_k - keys.rows(rank)) * kv_row_words, the blocks of every other rank;
/// sent = (n_k - keys.rows(rank + 1 mod P)) * kv_row_words. With P = 1: nothing.
/// `problem` must be resolved (Problem::resolved).
CommReport comm_cost_ring_forward(const Problem& problem, const Sharding& keys, int rank);

/// Exact communication of ring_backward on `rank`: the forward's K/V rotation plus the dK, dV
/// sums, which visit every rank and return home: P messages of every block's rows each way,
/// n_k * kv_row_words sent and received. With P = 1: nothing.
CommReport comm_cost_ring_backward(const Problem& problem, const Sharding& keys, int rank);

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
/// structure in O(n_k + Z_QK).
CommReport comm_cost_sparse_forward(const Problem& problem,
                                    const sparse::Support& support,
                                    const Sharding& queries,
                                    const Sharding& keys,
                                    int rank);

/// Exact communication of sparse_backward: the forward's exchange, then the same rows back as
/// dK, dV (what was received is sent home), so sent and received are both the forward's sent
/// plus received.
CommReport comm_cost_sparse_backward(const Problem& problem,
                                     const sparse::Support& support,
                                     const Sharding& queries,
                                     const Sharding& keys,
                                     int rank);

/// The lower bound for a sparse support: the key/value rows that the rank's query rows may see
/// and that it does not hold, kv_row_words each (what sparse_forward receives: it is optimal).
std::int64_t comm_lower_bound(const Problem& problem,
                              const sparse::Support& support,
                              const Sharding& queries,
                              const Sharding& keys,
                              int rank);

} // namespace ioattn::dist
