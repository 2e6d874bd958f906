#pragma once
/// Counters of the two-level memory model. Kernels are templated on the counter type: with
/// NullCounter every call is empty and compiles away; with IoCounter the same code reports the
/// words it moved; with DryRunCounter the schedule is walked without arithmetic.

#include <ioattn/error.hpp>

#include <array>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace ioattn {

/// Which operand a block of words belongs to.
enum class Operand : std::uint8_t {
    q,
    k,
    v,
    o,
    lse,
    scores,
    stats,
    d_o,
    d_q,
    d_k,
    d_v,
    delta,
    probs,
    d_scores,
    d_q_partial, ///< a partial sum of dQ; Block::slice = group * batch_heads + slice
    index ///< the sparse kernels' index arrays (a block's keys, rows' column indices): one row
          ///< of `cols` words per read, Block::row0 = the kernel's block
};

/// The number of Operand values.
inline constexpr int kOperandCount = static_cast<int>(Operand::index) + 1;

/// Whether `op` is one of the attention operands stored in the working type (Q, K, V, O, dO,
/// dQ, dK, dV), as opposed to L, the statistics, the intermediates and the indices.
constexpr bool is_operand_stream(Operand op) {
    switch (op) {
    case Operand::q:
    case Operand::k:
    case Operand::v:
    case Operand::o:
    case Operand::d_o:
    case Operand::d_q:
    case Operand::d_k:
    case Operand::d_v:
        return true;
    default:
        return false;
    }
}

/// A rectangular block of an operand of one (batch, head) slice: rows [row0, row0 + rows),
/// columns [col0, col0 + cols).
struct Block {
    Operand operand = Operand::q;
    std::int64_t slice = 0; ///< batch * heads index (kv slices for k and v)
    std::int64_t row0 = 0;
    std::int64_t rows = 0;
    std::int64_t col0 = 0;
    std::int64_t cols = 0;

    [[nodiscard]] std::int64_t words() const { return rows * cols; }

    bool operator==(const Block&) const = default;
};

/// One event of a recorded trace.
struct TraceEvent {
    enum class Kind : std::uint8_t { read, write, complete, acquire, release };
    Kind kind = Kind::read;
    /// read, write: where the words lie; complete: the entries of S = Q K^T (operand scores) now
    /// final (a sparse kernel: those of its support inside the block); acquire, release: unused.
    Block block;
    /// read, write: the words moved, -1 for all of block (a sparse operand moves the entries it
    /// stores inside block, row-major); acquire, release: the words taken or freed; complete: 0.
    std::int64_t words = -1;

    /// Words moved (read, write) or taken / freed (acquire, release).
    [[nodiscard]] std::int64_t moved() const { return words >= 0 ? words : block.words(); }
};

/// Counted traffic: words read from and written to slow memory, and the largest number of
/// words resident in fast memory at once (the max over tasks: each task is one processor).
struct IoReport {
    std::int64_t reads = 0;
    std::int64_t writes = 0;
    std::int64_t peak = 0;

    [[nodiscard]] std::int64_t total() const { return reads + writes; }

    bool operator==(const IoReport&) const = default;
};

std::ostream& operator<<(std::ostream& os, const IoReport& r);

/// The do-nothing counter: full-speed runs.
class NullCounter {
public:
    static constexpr bool kCounts = false;
    static constexpr bool kComputes = true;

    NullCounter() = default;

    explicit NullCounter(std::int64_t /*fast_words*/) {}

    void read(const Block& /*b*/) {}

    void read(const Block& /*where*/, std::int64_t /*words*/) {}

    void write(const Block& /*b*/) {}

    void complete(const Block& /*b*/) {}

    void acquire(std::int64_t /*words*/) {}

    void release(std::int64_t /*words*/) {}

    void merge(const NullCounter& /*other*/) {}

    [[nodiscard]] static constexpr bool recording() { return false; }

    [[nodiscard]] NullCounter fork() const { return {}; }

    [[nodiscard]] IoReport report() const { return {}; }
};

/// Exact counter with capacity checking: acquire() throws CapacityError when more than
/// `fast_words` would be resident. Constructed with record = true it also keeps the event
/// trace: every read, write, complete, acquire and release in call order (the counts do not
/// depend on it).
class IoCounter {
public:
    static constexpr bool kCounts = true;
    static constexpr bool kComputes = true;

    IoCounter() = default;

    explicit IoCounter(std::int64_t fast_words, bool record = false)
        : fast_words_(fast_words)
        , record_(record) {}

    void read(const Block& b) { read(b, b.words()); }

    /// Reads `words` words lying inside `where`: the entries a sparse operand stores there
    /// (words <= where.words()).
    void read(const Block& where, std::int64_t words) {
        reads_ += words;
        streams_[static_cast<std::size_t>(where.operand)] += words;
        if (record_)
            trace_.push_back({TraceEvent::Kind::read, where, words});
    }

    void write(const Block& b) {
        writes_ += b.words();
        streams_[static_cast<std::size_t>(b.operand)] += b.words();
        if (record_)
            trace_.push_back({TraceEvent::Kind::write, b, b.words()});
    }

    void complete(const Block& b) {
        if (record_)
            trace_.push_back({TraceEvent::Kind::complete, b, 0});
    }

    void acquire(std::int64_t words) {
        if (record_)
            trace_.push_back({TraceEvent::Kind::acquire, {}, words});
        resident_ += words;
        if (resident_ > fast_words_)
            throw CapacityError("ioattn::IoCounter: " + std::to_string(resident_) +
                                " words resident > M = " + std::to_string(fast_words_));
        if (resident_ > peak_)
            peak_ = resident_;
    }

    void release(std::int64_t words) {
        if (record_)
            trace_.push_back({TraceEvent::Kind::release, {}, words});
        resident_ -= words;
    }

    /// A fresh counter with the same M and recording mode, for one task.
    [[nodiscard]] IoCounter fork() const { return IoCounter(fast_words_, record_); }

    /// Adds a task's counts (peak: max) and appends its trace. Merge tasks in task order.
    void merge(const IoCounter& other) {
        reads_ += other.reads_;
        writes_ += other.writes_;
        for (std::size_t i = 0; i < streams_.size(); ++i)
            streams_[i] += other.streams_[i];
        peak_ = peak_ > other.peak_ ? peak_ : other.peak_;
        if (record_)
            trace_.insert(trace_.end(), other.trace_.begin(), other.trace_.end());
    }

    /// Empties the counts and the trace, keeping the trace's storage: a fresh fork() that
    /// reuses this counter's buffer (parallel_for_counted, one task after another).
    void restart() {
        reads_ = writes_ = resident_ = peak_ = 0;
        streams_ = {};
        trace_.clear();
    }

    /// Records into `buffer`'s storage from now on (its contents are dropped, its capacity
    /// kept) when that is more room than the trace has and nothing is recorded yet, so that a
    /// caller recording many runs reuses one buffer instead of faulting a fresh one in for each.
    void reuse_trace(std::vector<TraceEvent>&& buffer) {
        if (!record_ || !trace_.empty() || buffer.capacity() <= trace_.capacity())
            return;
        buffer.clear();
        trace_.swap(buffer);
    }

    [[nodiscard]] IoReport report() const { return {reads_, writes_, peak_}; }

    [[nodiscard]] std::int64_t fast_words() const { return fast_words_; }

    [[nodiscard]] std::int64_t resident() const { return resident_; }

    /// Words read and written of one stream (operand); they sum to report().total().
    [[nodiscard]] std::int64_t words(Operand op) const {
        return streams_[static_cast<std::size_t>(op)];
    }

    /// The counted traffic in bytes (docs/design.md section 16): the operand streams
    /// (is_operand_stream) at `operand_bytes` per word, every other stream (L, statistics,
    /// intermediates, indices) at `word_bytes`. float: 4, 4; double: 8, 8; bf16: 2, 4.
    [[nodiscard]] std::int64_t bytes(std::int64_t operand_bytes, std::int64_t word_bytes) const {
        std::int64_t total = 0;
        for (int i = 0; i < kOperandCount; ++i)
            total += streams_[static_cast<std::size_t>(i)] *
                     (is_operand_stream(static_cast<Operand>(i)) ? operand_bytes : word_bytes);
        return total;
    }

    /// Whether the trace is kept.
    [[nodiscard]] bool recording() const { return record_; }

    [[nodiscard]] const std::vector<TraceEvent>& trace() const { return trace_; }

    /// Moves the trace out; the counter's trace is empty afterwards (the counts stay).
    [[nodiscard]] std::vector<TraceEvent> take_trace() { return std::move(trace_); }

private:
    std::int64_t fast_words_ = 0;
    bool record_ = false;
    std::int64_t reads_ = 0;
    std::int64_t writes_ = 0;
    std::int64_t resident_ = 0;
    std::int64_t peak_ = 0;
    std::array<std::int64_t, kOperandCount> streams_{};
    std::vector<TraceEvent> trace_;
};

/// Counts like IoCounter but the kernel skips all arithmetic and never touches data, so
/// shapes with N in the millions are walked in seconds.
class DryRunCounter : public IoCounter {
public:
    static constexpr bool kComputes = false;
    using IoCounter::IoCounter;

    [[nodiscard]] DryRunCounter fork() const {
        DryRunCounter c;
        static_cast<IoCounter&>(c) = IoCounter::fork();
        return c;
    }
};

} // namespace ioattn
