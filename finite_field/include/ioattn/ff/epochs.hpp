#pragma once
/// Epochs of a recorded schedule (Saha & Ye Thm 4.4 / 4.8; docs/design.md sections 10.1-10.5).
///
/// A trace (IoCounter with recording, one batch x head slice) is cut into epochs of M I/Os:
/// word w of the I/O stream (reads and writes, block by block, row-major inside a block; a
/// sparse operand's stored entries row-major) lies in epoch floor(w / M); a `complete` event
/// after w >= 1 words lies in the epoch of word w - 1, floor((w - 1) / M) (epoch 0 when w = 0),
/// so epochs = ceil(total I/O / M). I_t is the set of entries of S = Q K^T completed in epoch t
/// (for a sparse kernel, the entries of Omega inside its complete blocks). An epoch's
/// computation uses at most the cache contents at its start (<= M words) plus its reads (<= M
/// words), so Lemma 4.6 gives |I_t| <= B_max = max(8M^2/d^2, 8M) and the rank argument gives
/// r_R(I_t), r_C(I_t) <= 2M.
///
/// Sparse inputs (Q, K stored with patterns T_i, U_j of their rows): an entry's inner dimension
/// is w_ij = |T_i & U_j|; entries with w_ij = 0 are identically 0 and need no message. For every
/// w >= 1 the entries with w_ij >= w, I_t(w), satisfy |I_t(w)| <= B(M, w) = max(8M^2/w^2, 8M)
/// and r_R^w(I_t(w)), r_C^w(I_t(w)) <= 2M with r^w the rank formula at head dimension w
/// (derivation: finite_field/src/epochs.cpp). With dense inputs w_ij = d and this is the above.

#include <ioattn/ff/field.hpp>
#include <ioattn/ff/index_set.hpp>
#include <ioattn/ff/matrix.hpp>
#include <ioattn/io_counter.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ioattn::ff {

/// A 0/1 pattern over rows as CSR: row r holds the ascending, distinct columns
/// cols[offsets[r] .. offsets[r + 1]).
struct RowPattern {
    std::vector<std::int64_t> offsets{0};
    std::vector<std::int64_t> cols;

    [[nodiscard]] std::int64_t rows() const {
        return static_cast<std::int64_t>(offsets.size()) - 1;
    }

    [[nodiscard]] std::int64_t row_size(std::int64_t r) const {
        const auto u = static_cast<std::size_t>(r);
        return offsets[u + 1] - offsets[u];
    }

    /// Entries (their count, the nonzeros of a stored operand).
    [[nodiscard]] std::int64_t size() const { return static_cast<std::int64_t>(cols.size()); }

    bool operator==(const RowPattern&) const = default;
};

/// What an epoch check needs besides the trace: slice 0's n_q x n_k scores with head dimension
/// d, the support Omega (n_q rows over n_k keys; null: every pair) and the stored patterns of Q
/// (n_q rows over d) and K (n_k rows over d; null: dense). Non-owning; the patterns must
/// outlive the call.
struct EpochShape {
    std::int64_t n_q = 0;
    std::int64_t n_k = 0;
    std::int64_t d = 0;
    const RowPattern* omega = nullptr;
    const RowPattern* q = nullptr;
    const RowPattern* k = nullptr;

    /// Throws InvalidArgument naming `where`: a size < 1, or a pattern of the wrong number of
    /// rows, with offsets that do not start at 0 or decrease, or a column out of range, unsorted
    /// or repeated.
    void validate(const char* where) const;
};

/// Per-epoch measures of one trace.
struct EpochStats {
    std::int64_t epochs = 0;        ///< ceil(total I/O / M) (at least 1)
    std::int64_t total_io = 0;      ///< words read + written
    std::int64_t max_entries = 0;   ///< max_t |I_t(1)| (every entry with w_ij >= 1)
    std::int64_t zero_entries = 0;  ///< completed entries with w_ij = 0 (in no budget)
    std::int64_t busiest = 0;       ///< the first epoch attaining max_ratio
    std::int64_t worst_w = 0;       ///< the inner dimension w attaining max_ratio
    std::int64_t max_rank_rows = 0; ///< max over t, w of r_R^w(I_t(w))
    std::int64_t max_rank_cols = 0; ///< max over t, w of r_C^w(I_t(w))
    double entry_limit = 0;         ///< B(M, worst_w); B_max for dense inputs
    double max_ratio = 0;           ///< max over t, w of |I_t(w)| / B(M, w)
    bool within_budget = true;      ///< |I_t(w)| <= B(M, w) for every t, w (exact integers)
    bool complete_once = true;      ///< every allowed entry completed exactly once
};

/// Cuts `trace` into epochs of m I/Os and measures every I_t against its budgets. Throws
/// InvalidArgument for m < 1, a bad shape, or a complete event outside the n_q x n_k scores
/// or of another slice.
EpochStats
epoch_stats(const std::vector<TraceEvent>& trace, const EpochShape& shape, std::int64_t m);

/// Dense inputs, every pair: epoch_stats with EpochShape{n_q, n_k, d}.
EpochStats epoch_stats(const std::vector<TraceEvent>& trace,
                       std::int64_t n_q,
                       std::int64_t n_k,
                       std::int64_t d,
                       std::int64_t m);

/// Outcome of replaying Theorem 4.4's protocol on one epoch, with the cache contents at the
/// epoch's start taken from the trace (replay_epoch).
struct ProtocolReplay {
    std::int64_t epoch = 0;
    std::int64_t entries = 0;        ///< |I_t(1)|: the entries Bob recomputes
    std::int64_t resident_words = 0; ///< words acquired and not released at the epoch's start
    std::int64_t live_words = 0;     ///< Q, K words the recorded contents hold at the start
    std::int64_t read_words = 0;     ///< Q, K words read in the epoch (part of the message)
    std::int64_t start_words = 0;    ///< live words the entries use and the epoch does not read
    std::int64_t partial_sums = 0;   ///< entries whose earlier products arrive as one partial sum
    std::int64_t message = 0;        ///< read_words + start_words + partial_sums
    bool start_fits = false;         ///< live_words + partial_sums <= resident_words <= M
    bool recomputed = false;         ///< Bob recomputed every entry of I_t from the message
    bool holds = false;              ///< start_fits, recomputed and message <= 2M
    std::string detail;              ///< what went wrong, if anything
};

/// Replays epoch `epoch` of `trace` over F_p for Q (n_q x d) and K (n_k x d), zero outside
/// the shape's stored patterns. The cache at the epoch's start comes from the trace: the words
/// acquired and not released (acquire / release events) and the Q, K words they hold: a read
/// belongs to the innermost acquired scope open at the read and stays until that scope is
/// released or a later read of the same operand into the same scope, after a complete event,
/// replaces it (the next block of a streamed operand). Alice sends the Q, K words read in the
/// epoch, the live words the epoch's entries use, and for every entry with a product whose
/// words are gone one partial sum (the products the schedule accumulated before the start; the
/// cache must hold it: live words + partial sums <= resident words <= M). Bob recomputes I_t from
/// the message alone. A read whose words do not match the stored entries of its block, a read
/// of Q or K outside any acquired scope, or live words exceeding the acquired words make the
/// replay fail (holds false, detail says why). Throws InvalidArgument on a bad shape,
/// mismatched matrices, entries outside [0, p), a release of more words than acquired, m < 1
/// or epoch < 0.
ProtocolReplay replay_epoch(const std::vector<TraceEvent>& trace,
                            const EpochShape& shape,
                            const Matrix& q,
                            const Matrix& k,
                            std::int64_t m,
                            std::int64_t epoch,
                            const Prime& p);

/// Dense inputs, every pair: replay_epoch with EpochShape{q.rows(), k.rows(), q.cols()}.
ProtocolReplay replay_epoch(const std::vector<TraceEvent>& trace,
                            const Matrix& q,
                            const Matrix& k,
                            std::int64_t m,
                            std::int64_t epoch,
                            const Prime& p);

} // namespace ioattn::ff
