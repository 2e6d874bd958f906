// Closed forms of the distributed schedules' communication, and the sharding's lower bound
// (see ioattn/dist/comm_cost.hpp).

#include <ioattn/dist/comm_cost.hpp>

#include <algorithm>
#include <ostream>
#include <vector>

namespace ioattn::dist {

std::ostream& operator<<(std::ostream& os, const CommReport& r) {
    return os << "{sent " << r.sent_words << " words in " << r.sent_messages << " messages, "
              << r.sent_bytes << " bytes; received " << r.received_words << " words in "
              << r.received_messages << " messages, " << r.received_bytes << " bytes}";
}

std::int64_t kv_row_words(const Problem& problem) {
    return problem.batch * problem.kv_heads * (problem.d + problem.d_v);
}

CommReport
comm_cost_ring_forward(const Problem& problem, const Sharding& keys, int rank, WireBytes bytes) {
    const int p = keys.ranks();
    if (p == 1)
        return {};
    const std::int64_t w = kv_row_words(problem);
    const int next = (rank + 1) % p;
    // K/V blocks visit every rank: rank r receives every block but its own and forwards every
    // block but the one of r + 1, which would only return to its owner
    const std::int64_t sent = (keys.n() - keys.rows(next)) * w;
    const std::int64_t received = (keys.n() - keys.rows(rank)) * w;
    return {sent, received, p - 1, p - 1, sent * bytes.operand, received * bytes.operand};
}

CommReport
comm_cost_ring_backward(const Problem& problem, const Sharding& keys, int rank, WireBytes bytes) {
    const int p = keys.ranks();
    if (p == 1)
        return {};
    CommReport r = comm_cost_ring_forward(problem, keys, rank, bytes);
    const std::int64_t w = kv_row_words(problem);
    const std::int64_t all = keys.n() * w;
    r.sent_words += all; // dK, dV of every block leave every rank once, the last hop home
    r.received_words += all;
    r.sent_messages += p;
    r.received_messages += p;
    // the last hop carries a finished sum (the block of rank + 1 out, the own block in), rounded
    // to the storage type; the other P - 1 hops carry partial sums in the accumulator type
    const std::int64_t home_out = keys.rows((rank + 1) % p) * w;
    const std::int64_t home_in = keys.rows(rank) * w;
    r.sent_bytes += home_out * bytes.operand + (all - home_out) * bytes.sum;
    r.received_bytes += home_in * bytes.operand + (all - home_in) * bytes.sum;
    return r;
}

std::int64_t
comm_lower_bound(const Problem& problem, const Sharding& queries, const Sharding& keys, int rank) {
    // visible keys of the rank's queries: a prefix [0, end) of the keys (all of them unless
    // causal, where query i sees j <= i + n_k - n_q)
    std::int64_t end = 0;
    for (const Range& q : queries.ranges(rank)) {
        const std::int64_t last =
            problem.causal ? q.end - 1 + problem.n_k - problem.n_q : problem.n_k - 1;
        end = std::max(end, std::min(problem.n_k, last + 1));
    }
    std::int64_t held = 0;
    for (const Range& k : keys.ranges(rank))
        held += std::max<std::int64_t>(0, std::min(k.end, end) - k.begin);
    return (end - held) * kv_row_words(problem);
}

namespace {

/// For each rank s, the number of distinct keys held by `owner_rank` that some query row of s
/// may see (s = owner_rank included).
std::vector<std::int64_t> seen_keys_of(const sparse::Support& support,
                                       const Sharding& queries,
                                       const Sharding& keys,
                                       int owner_rank) {
    std::vector<std::int64_t> seen(static_cast<std::size_t>(queries.ranks()), 0);
    std::vector<int> mark(static_cast<std::size_t>(keys.n()), -1); // last rank that saw key j
    for (int s = 0; s < queries.ranks(); ++s)
        for (const Range& q : queries.ranges(s))
            for (std::int64_t i = q.begin; i < q.end; ++i)
                for (const std::int64_t j : support.row(i)) {
                    int& m = mark[static_cast<std::size_t>(j)];
                    if (m != s && keys.owner(j) == owner_rank) {
                        m = s;
                        ++seen[static_cast<std::size_t>(s)];
                    }
                }
    return seen;
}

} // namespace

CommReport comm_cost_sparse_forward(const Problem& problem,
                                    const sparse::Support& support,
                                    const Sharding& queries,
                                    const Sharding& keys,
                                    int rank,
                                    WireBytes bytes) {
    const std::int64_t w = kv_row_words(problem);
    CommReport r;
    // received: the keys of other ranks the rank's queries see, counted per owner
    std::vector<std::int64_t> from(static_cast<std::size_t>(keys.ranks()), 0);
    std::vector<char> seen(static_cast<std::size_t>(keys.n()), 0);
    for (const Range& q : queries.ranges(rank))
        for (std::int64_t i = q.begin; i < q.end; ++i)
            for (const std::int64_t j : support.row(i)) {
                char& s = seen[static_cast<std::size_t>(j)];
                const int owner = keys.owner(j);
                if (s == 0 && owner != rank) {
                    s = 1;
                    ++from[static_cast<std::size_t>(owner)];
                }
            }
    for (const std::int64_t n : from) {
        r.received_words += n * w;
        r.received_messages += n > 0 ? 1 : 0;
    }
    // sent: per other rank, the rank's own keys it sees
    const std::vector<std::int64_t> mine = seen_keys_of(support, queries, keys, rank);
    for (int s = 0; s < queries.ranks(); ++s) {
        if (s == rank)
            continue;
        r.sent_words += mine[static_cast<std::size_t>(s)] * w;
        r.sent_messages += mine[static_cast<std::size_t>(s)] > 0 ? 1 : 0;
    }
    r.sent_bytes = r.sent_words * bytes.operand;
    r.received_bytes = r.received_words * bytes.operand;
    return r;
}

CommReport comm_cost_sparse_backward(const Problem& problem,
                                     const sparse::Support& support,
                                     const Sharding& queries,
                                     const Sharding& keys,
                                     int rank,
                                     WireBytes bytes) {
    const CommReport f = comm_cost_sparse_forward(problem, support, queries, keys, rank, bytes);
    const std::int64_t words = f.sent_words + f.received_words;
    const std::int64_t messages = f.sent_messages + f.received_messages;
    // K/V rows out in the storage type, their dK, dV partial sums back in the accumulator type
    return {words,
            words,
            messages,
            messages,
            f.sent_words * bytes.operand + f.received_words * bytes.sum,
            f.received_words * bytes.operand + f.sent_words * bytes.sum};
}

std::int64_t comm_lower_bound(const Problem& problem,
                              const sparse::Support& support,
                              const Sharding& queries,
                              const Sharding& keys,
                              int rank) {
    std::vector<char> seen(static_cast<std::size_t>(keys.n()), 0);
    std::int64_t rows = 0;
    for (const Range& q : queries.ranges(rank))
        for (std::int64_t i = q.begin; i < q.end; ++i)
            for (const std::int64_t j : support.row(i)) {
                char& s = seen[static_cast<std::size_t>(j)];
                if (s == 0 && keys.owner(j) != rank) {
                    s = 1;
                    ++rows;
                }
            }
    return rows * kv_row_words(problem);
}

} // namespace ioattn::dist
