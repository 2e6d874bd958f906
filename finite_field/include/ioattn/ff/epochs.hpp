#pragma once
/// Epochs of a recorded schedule (Saha & Ye Thm 4.4 / 4.8, DESIGN.md section 3, experiment 7).
///
/// A trace (IoCounter with recording, one batch x head slice) is cut into epochs of M I/Os:
/// word w of the I/O stream (reads and writes, block by block, row-major inside a block) lies in
/// epoch floor(w / M); a `complete` event after w >= 1 words lies in the epoch of word w - 1,
/// floor((w - 1) / M) (epoch 0 when w = 0), so epochs = ceil(total I/O / M). I_t is the
/// set of entries of S = Q K^T completed in epoch t. An epoch's computation uses at most the
/// cache contents at its start (<= M words) plus its reads (<= M words), so Lemma 4.6 gives
/// |I_t| <= B_max = max(8M^2/d^2, 8M) and the rank argument gives r_R(I_t), r_C(I_t) <= 2M.

#include <ioattn/ff/field.hpp>
#include <ioattn/ff/index_set.hpp>
#include <ioattn/ff/matrix.hpp>
#include <ioattn/io_counter.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ioattn::ff {

/// Per-epoch measures of one trace.
struct EpochStats {
    std::int64_t epochs = 0;        ///< ceil(total I/O / M) (at least 1 when anything completes)
    std::int64_t total_io = 0;      ///< words read + written
    std::int64_t max_entries = 0;   ///< max_t |I_t|
    std::int64_t busiest = 0;       ///< an epoch t attaining max_entries (the first)
    std::int64_t max_rank_rows = 0; ///< max_t r_R(I_t)
    std::int64_t max_rank_cols = 0; ///< max_t r_C(I_t)
    double entry_limit = 0;         ///< B_max = max(8M^2/d^2, 8M)
    double max_ratio = 0;           ///< max_entries / B_max
    bool complete_once = true;      ///< every entry of the n_q x n_k scores completed exactly once
};

/// Cuts `trace` (scores of slice 0, n_q x n_k, head dimension d) into epochs of m I/Os.
/// Throws InvalidArgument for m < 1, d < 1, sizes < 1, or a complete event outside n_q x n_k
/// or of another slice.
EpochStats epoch_stats(const std::vector<TraceEvent>& trace,
                       std::int64_t n_q,
                       std::int64_t n_k,
                       std::int64_t d,
                       std::int64_t m);

/// Outcome of replaying Theorem 4.4's protocol on one epoch.
struct ProtocolReplay {
    std::int64_t epoch = 0;
    std::int64_t entries = 0;     ///< |I_t|
    std::int64_t read_words = 0;  ///< Q, K words read in the epoch (part of the message)
    std::int64_t start_words = 0; ///< words standing for the cache at the epoch's start
    bool start_as_partial_sums =
        false;                ///< start state sent as partial sums of S, else as Q, K words
    std::int64_t message = 0; ///< read_words + start_words (field elements)
    bool recomputed = false;  ///< Bob recomputed every entry of I_t exactly from the message
    std::string detail;       ///< what went wrong, if anything
};

/// Replays epoch `epoch` of `trace` over F_p for the given Q (n_q x d) and K (n_k x d):
/// Alice's message is the Q, K words read in the epoch plus the cache contents at its start,
/// represented as the smaller of (a) the Q, K words the epoch's entries need and did not read,
/// (b) one partial sum of S per entry that needs any of them. Bob recomputes every entry of I_t
/// from the message alone; the result says whether all agree with Q K^T and the message size
/// (<= 2M is Thm 4.4's claim, checked by the caller). Throws InvalidArgument on mismatched
/// shapes, entries outside [0, p), or m < 1.
ProtocolReplay replay_epoch(const std::vector<TraceEvent>& trace,
                            const Matrix& q,
                            const Matrix& k,
                            std::int64_t m,
                            std::int64_t epoch,
                            const Prime& p);

} // namespace ioattn::ff
