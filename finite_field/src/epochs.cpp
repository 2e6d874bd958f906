// ioattn::ff::epoch_stats, replay_epoch: epochs of a recorded schedule and Theorem 4.4's
// protocol replayed on one of them
// Field: F_p for the replay (Q, K given; the bilinear part S = Q K^T only, no exp).
// Epochs: the I/O stream is cut every M words (a block that straddles a boundary is split
//   word by word, row-major); a complete event lies in the epoch of the last word moved
//   before it (epoch 0 if none).
// Exactness: |I_t| <= B_max is tested in integers by the caller (8M^2 >= |I_t| d^2 or
//   8M >= |I_t|); r_R(I_t), r_C(I_t) from per-epoch row and column counts (entries complete
//   once, which epoch_stats verifies with a bitmap).
// Replay: message = Q, K words read in the epoch + the smaller start state (Q, K words the
//   entries need and did not read, or one partial sum per such entry); Bob recomputes I_t from
//   the message alone and the result is compared with Q K^T.
// Ops: O(trace events + n_q n_k) per stats; O(total I/O + |I_t| d) per replay.
// Tests: tests/finite_field/epochs_test.cpp

#include <ioattn/error.hpp>
#include <ioattn/ff/epochs.hpp>
#include <ioattn/io_cost.hpp>

#include <algorithm>
#include <string>

namespace ioattn::ff {

namespace {

void check_complete(const Block& b, std::int64_t n_q, std::int64_t n_k, const char* where) {
    if (b.operand != Operand::scores || b.slice != 0 || b.row0 < 0 || b.col0 < 0 || b.rows < 0 ||
        b.cols < 0 || b.row0 + b.rows > n_q || b.col0 + b.cols > n_k)
        throw InvalidArgument(
            std::string(where) + ": complete event rows [" + std::to_string(b.row0) + ", " +
            std::to_string(b.row0 + b.rows) + ") cols [" + std::to_string(b.col0) + ", " +
            std::to_string(b.col0 + b.cols) + ") of slice " + std::to_string(b.slice) +
            " is not inside the " + std::to_string(n_q) + " x " + std::to_string(n_k) +
            " scores of slice 0");
}

// The epoch of a complete event after `pos` words: that of the last word moved before it.
std::int64_t epoch_of(std::int64_t pos, std::int64_t m) {
    return pos == 0 ? 0 : (pos - 1) / m;
}

// The I_t accumulator: row and column counts of the current epoch.
struct EpochCounts {
    std::vector<std::int64_t> rows;
    std::vector<std::int64_t> cols;
    std::int64_t entries = 0;

    void flush(std::int64_t epoch, std::int64_t d, EpochStats& s) {
        const std::int64_t r_row = capped(rows, d);
        const std::int64_t r_col = capped(cols, d);
        if (entries > s.max_entries) {
            s.max_entries = entries;
            s.busiest = epoch;
        }
        s.max_rank_rows = std::max(s.max_rank_rows, r_row);
        s.max_rank_cols = std::max(s.max_rank_cols, r_col);
        std::fill(rows.begin(), rows.end(), 0);
        std::fill(cols.begin(), cols.end(), 0);
        entries = 0;
    }

    static std::int64_t capped(const std::vector<std::int64_t>& c, std::int64_t d) {
        std::int64_t s = 0;
        for (std::int64_t v : c)
            s += std::min(v, d); // min(|R_i|, d)
        return s;
    }
};

} // namespace

EpochStats epoch_stats(const std::vector<TraceEvent>& trace,
                       std::int64_t n_q,
                       std::int64_t n_k,
                       std::int64_t d,
                       std::int64_t m) {
    constexpr const char* kWhere = "ioattn::ff::epoch_stats";
    if (m < 1 || d < 1 || n_q < 1 || n_k < 1)
        throw InvalidArgument(std::string(kWhere) + ": M = " + std::to_string(m) +
                              ", d = " + std::to_string(d) + ", n_q = " + std::to_string(n_q) +
                              ", n_k = " + std::to_string(n_k) + " (expected all >= 1)");
    EpochStats s;
    s.entry_limit = epoch_entry_limit(m, d);
    EpochCounts cur{std::vector<std::int64_t>(static_cast<std::size_t>(n_q), 0),
                    std::vector<std::int64_t>(static_cast<std::size_t>(n_k), 0),
                    0};
    std::vector<char> seen(static_cast<std::size_t>(n_q * n_k), 0);
    std::int64_t pos = 0;
    std::int64_t epoch = 0;
    for (const TraceEvent& ev : trace) {
        if (ev.kind != TraceEvent::Kind::complete) {
            pos += ev.block.words();
            continue;
        }
        const Block& b = ev.block;
        check_complete(b, n_q, n_k, kWhere);
        // --- the epoch of the words moved so far; flush I_t when it changes ---
        if (epoch_of(pos, m) != epoch) {
            cur.flush(epoch, d, s);
            epoch = epoch_of(pos, m);
        }
        for (std::int64_t i = b.row0; i < b.row0 + b.rows; ++i) {
            cur.rows[static_cast<std::size_t>(i)] += b.cols;
            for (std::int64_t j = b.col0; j < b.col0 + b.cols; ++j) {
                char& f = seen[static_cast<std::size_t>(i * n_k + j)];
                if (f != 0)
                    s.complete_once = false;
                f = 1;
            }
        }
        for (std::int64_t j = b.col0; j < b.col0 + b.cols; ++j)
            cur.cols[static_cast<std::size_t>(j)] += b.rows;
        cur.entries += b.rows * b.cols;
    }
    cur.flush(epoch, d, s);
    if (std::find(seen.begin(), seen.end(), 0) != seen.end())
        s.complete_once = false;
    s.total_io = pos;
    s.epochs = std::max<std::int64_t>((pos + m - 1) / m, 1);
    s.max_ratio = static_cast<double>(s.max_entries) / s.entry_limit;
    return s;
}

namespace {

// Word keys of the message: Q(i, c) -> i d + c, K(j, c) -> n_q d + j d + c.
struct Keys {
    std::int64_t n_q = 0;
    std::int64_t d = 0;

    [[nodiscard]] std::size_t q(std::int64_t i, std::int64_t c) const {
        return static_cast<std::size_t>(i * d + c);
    }

    [[nodiscard]] std::size_t k(std::int64_t j, std::int64_t c) const {
        return static_cast<std::size_t>(n_q * d + j * d + c);
    }
};

// Alice's view of one epoch: which Q, K words it reads and which entries it completes.
struct EpochView {
    std::vector<char> read; // by key
    std::vector<Entry> entries;
};

// Marks the words of read block b (starting at I/O position pos) that lie in `epoch`.
void mark_reads(const Block& b,
                std::int64_t pos,
                std::int64_t m,
                std::int64_t epoch,
                const Keys& keys,
                EpochView& v) {
    for (std::int64_t r = 0; r < b.rows; ++r)
        for (std::int64_t c = 0; c < b.cols; ++c)
            if ((pos + r * b.cols + c) / m == epoch)
                v.read[b.operand == Operand::q ? keys.q(b.row0 + r, b.col0 + c)
                                               : keys.k(b.row0 + r, b.col0 + c)] = 1;
}

EpochView walk(const std::vector<TraceEvent>& trace,
               std::int64_t n_q,
               std::int64_t n_k,
               std::int64_t d,
               std::int64_t m,
               std::int64_t epoch,
               const char* where) {
    const Keys keys{n_q, d};
    EpochView v{std::vector<char>(static_cast<std::size_t>((n_q + n_k) * d), 0), {}};
    std::int64_t pos = 0;
    for (const TraceEvent& ev : trace) {
        const Block& b = ev.block;
        if (ev.kind == TraceEvent::Kind::complete) {
            check_complete(b, n_q, n_k, where);
            if (epoch_of(pos, m) == epoch)
                for (std::int64_t i = b.row0; i < b.row0 + b.rows; ++i)
                    for (std::int64_t j = b.col0; j < b.col0 + b.cols; ++j)
                        v.entries.push_back({i, j});
            continue;
        }
        const bool in_range = pos + b.words() > epoch * m && pos < (epoch + 1) * m;
        const bool operand = (b.operand == Operand::q || b.operand == Operand::k) && b.slice == 0;
        if (ev.kind == TraceEvent::Kind::read && in_range && operand) {
            const std::int64_t n_rows = b.operand == Operand::q ? n_q : n_k;
            if (b.row0 < 0 || b.col0 < 0 || b.row0 + b.rows > n_rows || b.col0 + b.cols > d)
                throw InvalidArgument(std::string(where) + ": a read block lies outside Q or K");
            mark_reads(b, pos, m, epoch, keys, v);
        }
        pos += b.words();
    }
    return v;
}

// The cache at the epoch's start in word form: the Q, K words of products the epoch's reads
// do not cover. Returns the number of entries needing any of them (the partial-sum form).
std::int64_t needed_words(const EpochView& v, const Keys& keys, std::vector<char>& needed) {
    std::int64_t partial_count = 0;
    for (const Entry& e : v.entries) {
        bool uncovered = false;
        for (std::int64_t c = 0; c < keys.d; ++c) {
            const std::size_t kq = keys.q(e.row, c);
            const std::size_t kk = keys.k(e.col, c);
            if (v.read[kq] == 0)
                needed[kq] = 1;
            if (v.read[kk] == 0)
                needed[kk] = 1;
            uncovered = uncovered || v.read[kq] == 0 || v.read[kk] == 0;
        }
        partial_count += uncovered ? 1 : 0;
    }
    return partial_count;
}

// Bob: S_ij = partial_ij + sum over sent products; "" when every entry matches Q K^T.
std::string recompute(const EpochView& v,
                      const Keys& keys,
                      const std::vector<std::int64_t>& message,
                      const std::vector<std::int64_t>& partial,
                      const Matrix& q,
                      const Matrix& k,
                      const Prime& p) {
    for (std::size_t x = 0; x < v.entries.size(); ++x) {
        const Entry& e = v.entries[x];
        std::int64_t s = partial.empty() ? 0 : partial[x];
        std::int64_t truth = 0;
        for (std::int64_t c = 0; c < keys.d; ++c) {
            truth = add_mod(truth, mul_mod(q(e.row, c), k(e.col, c), p), p);
            const std::int64_t a = message[keys.q(e.row, c)];
            const std::int64_t b = message[keys.k(e.col, c)];
            const bool in_partial = !partial.empty() && (v.read[keys.q(e.row, c)] == 0 ||
                                                         v.read[keys.k(e.col, c)] == 0);
            if (in_partial)
                continue;
            if (a < 0 || b < 0)
                return "entry (" + std::to_string(e.row) + ", " + std::to_string(e.col) +
                       ") needs a word the message lacks";
            s = add_mod(s, mul_mod(a, b, p), p); // S_ij += Q_ic K_jc
        }
        if (s != truth)
            return "entry (" + std::to_string(e.row) + ", " + std::to_string(e.col) +
                   ") recomputed as " + std::to_string(s) + ", Q K^T has " + std::to_string(truth);
    }
    return {};
}

} // namespace

ProtocolReplay replay_epoch(const std::vector<TraceEvent>& trace,
                            const Matrix& q,
                            const Matrix& k,
                            std::int64_t m,
                            std::int64_t epoch,
                            const Prime& p) {
    constexpr const char* kWhere = "ioattn::ff::replay_epoch";
    if (m < 1 || epoch < 0 || q.cols() != k.cols() || q.cols() < 1 || q.rows() < 1 || k.rows() < 1)
        throw InvalidArgument(std::string(kWhere) + ": M = " + std::to_string(m) +
                              ", epoch = " + std::to_string(epoch) + ", Q " +
                              std::to_string(q.rows()) + " x " + std::to_string(q.cols()) + ", K " +
                              std::to_string(k.rows()) + " x " + std::to_string(k.cols()) +
                              " (expected M >= 1, epoch >= 0, same d >= 1)");
    check_entries(q, p, kWhere);
    check_entries(k, p, kWhere);
    const Keys keys{q.rows(), q.cols()};

    // --- Alice: walk the schedule, collect the epoch's reads and its completed entries ---
    const EpochView v = walk(trace, q.rows(), k.rows(), q.cols(), m, epoch, kWhere);
    ProtocolReplay out;
    out.epoch = epoch;
    out.entries = static_cast<std::int64_t>(v.entries.size());
    out.read_words = std::count(v.read.begin(), v.read.end(), 1);

    // --- the start state: the smaller of the needed words and the partial sums ---
    std::vector<char> needed(v.read.size(), 0);
    const std::int64_t partial_count = needed_words(v, keys, needed);
    const std::int64_t word_count = std::count(needed.begin(), needed.end(), 1);
    out.start_as_partial_sums = partial_count < word_count;
    out.start_words = out.start_as_partial_sums ? partial_count : word_count;
    out.message = out.read_words + out.start_words;

    // --- the message: read (and, in word form, needed) words; -1 = not sent ---
    std::vector<std::int64_t> message(v.read.size(), -1);
    for (std::int64_t i = 0; i < q.rows(); ++i)
        for (std::int64_t c = 0; c < keys.d; ++c)
            if (v.read[keys.q(i, c)] != 0 ||
                (!out.start_as_partial_sums && needed[keys.q(i, c)] != 0))
                message[keys.q(i, c)] = q(i, c);
    for (std::int64_t j = 0; j < k.rows(); ++j)
        for (std::int64_t c = 0; c < keys.d; ++c)
            if (v.read[keys.k(j, c)] != 0 ||
                (!out.start_as_partial_sums && needed[keys.k(j, c)] != 0))
                message[keys.k(j, c)] = k(j, c);
    std::vector<std::int64_t> partial; // the part of S_ij accumulated before the epoch
    if (out.start_as_partial_sums)
        for (const Entry& e : v.entries) {
            std::int64_t s = 0;
            for (std::int64_t c = 0; c < keys.d; ++c)
                if (v.read[keys.q(e.row, c)] == 0 || v.read[keys.k(e.col, c)] == 0)
                    s = add_mod(s, mul_mod(q(e.row, c), k(e.col, c), p), p);
            partial.push_back(s);
        }

    // --- Bob: every entry of I_t from the message alone, against Q K^T ---
    out.detail = recompute(v, keys, message, partial, q, k, p);
    out.recomputed = out.detail.empty();
    return out;
}

} // namespace ioattn::ff
