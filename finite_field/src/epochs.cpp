// ioattn::ff::epoch_stats: epochs of a recorded schedule measured against the per-epoch budgets
// of the entries of S = Q K^T they complete, for dense and for sparse inputs
// Field: none (counting); the protocol replay is epoch_replay.cpp.
// Epochs: the I/O stream is cut every M words (a block that straddles a boundary is split
//   word by word, row-major; a sparse operand's block by its stored entries); a complete event
//   lies in the epoch of the last word moved before it (epoch 0 if none). A sparse kernel's
//   complete block stands for the entries of Omega inside it.
// Budget with dense inputs (Saha & Ye Lemma 4.6 + Thm 4.4): an epoch's message has <= 2M field
//   elements, so r_R(I_t), r_C(I_t) <= 2M and |I_t| <= B_max = max(8M^2/d^2, 8M).
// Budget with sparse inputs, derived by the same argument. Q has row patterns T_i, K has U_j
//   (stored entries), S_ij = sum over c in T_i & U_j of Q_ic K_jc, w_ij = |T_i & U_j|.
//   (1) Fix K with pattern U and vary Q over the matrices with pattern T: Q -> (Q K^T)|_I is
//       block diagonal over the rows of Q, row i's block being K[R_i, T_i], so its rank is
//       sum_i rank K[R_i, T_i]; any protocol sends at least that many elements (p^rank outputs).
//   (2) New lemma: if every entry of I has w_ij >= w, then for generic K on U,
//       rank K[R_i, T_i] >= min(|R_i|, w). Each row of K[R_i, T_i] has >= w structural
//       nonzeros, so a greedy matching of rows to columns reaches min(|R_i|, w), and a generic
//       matrix has the rank of its pattern's largest matching. One K is generic for all rows
//       when p > N: the product of one such minor per row is a nonzero polynomial of degree
//       <= N < p in each entry, so it has a non-root in F_p. Hence a protocol for I needs
//       r_R^w(I) = sum_i min(|R_i|, w) elements, and r_C^w(I) with Q fixed and K varying.
//       The sparse-rank experiment checks (2) with NTL ranks on instances before this uses it.
//   (3) Lemma 4.6 concerns only I and a number d; with d = w:
//       max(r_R^w, r_C^w)(I) >= min(w sqrt(|I|/2), |I|/4).
//   (4) The epoch's message determines every subset of I_t, in particular I_t(w) = the entries
//       with w_ij >= w: r_R^w(I_t(w)), r_C^w(I_t(w)) <= 2M and |I_t(w)| <= B(M, w) =
//       max(8M^2/w^2, 8M), for every w >= 1. Entries with w_ij = 0 are 0 and cost nothing.
//   Only the w present in the epoch matter: between two of them I_t(w) is constant and B, r^w
//   are monotone in w. Dense inputs: w_ij = d, one level, the dense budget.
// Exactness: budgets in integers (|I| w^2 <= 8M^2 or |I| <= 8M, 128-bit); ranks from per-epoch
//   row and column counts; complete_once from a per-entry count over Omega.
// Ops: O(trace events + entries of Omega (log)) plus, per epoch, O(levels x touched rows)
//   (sparse inputs: + O(d), the counting sort by w).
// Tests: tests/finite_field/epochs_test.cpp

#include "epoch_entries.hpp"

#include <ioattn/error.hpp>
#include <ioattn/ff/epochs.hpp>
#include <ioattn/io_cost.hpp>

#include <algorithm>
#include <string>

namespace ioattn::ff {

namespace {

void check_pattern(const RowPattern* pat,
                   std::int64_t rows,
                   std::int64_t cols,
                   const char* name,
                   const char* where) {
    if (pat == nullptr)
        return;
    const auto fail = [&](const std::string& why) {
        throw InvalidArgument(std::string(where) + ": pattern " + name + " " + why);
    };
    if (pat->rows() != rows || pat->offsets.front() != 0 ||
        pat->offsets.back() != static_cast<std::int64_t>(pat->cols.size()))
        fail("has " + std::to_string(pat->rows()) + " rows and " +
             std::to_string(pat->cols.size()) + " columns stored (expected " +
             std::to_string(rows) + " rows, offsets from 0 to the stored count)");
    for (std::int64_t r = 0; r < rows; ++r) {
        const auto u = static_cast<std::size_t>(r);
        if (pat->offsets[u + 1] < pat->offsets[u])
            fail("row " + std::to_string(r) + " has decreasing offsets");
        for (std::int64_t e = pat->offsets[u]; e < pat->offsets[u + 1]; ++e) {
            const std::int64_t c = pat->cols[static_cast<std::size_t>(e)];
            if (c < 0 || c >= cols ||
                (e > pat->offsets[u] && c <= pat->cols[static_cast<std::size_t>(e - 1)]))
                fail("row " + std::to_string(r) + " column " + std::to_string(c) +
                     " is outside [0, " + std::to_string(cols) + "), unsorted or repeated");
        }
    }
}

__extension__ using I128 = __int128; // M <= 2^40: 8 M^2 needs more than 64 bits

// |I| <= B(M, w) = max(8M^2/w^2, 8M), exactly.
bool within(std::int64_t entries, std::int64_t w, std::int64_t m) {
    const auto e = static_cast<I128>(entries);
    return e * w * w <= 8 * static_cast<I128>(m) * m || e <= 8 * static_cast<I128>(m);
}

struct Item {
    std::int64_t row = 0;
    std::int64_t col = 0;
    std::int64_t w = 0;
};

// The entries of the current epoch and the measures of the levels w present in it. Dense
// inputs (every w = d, one level) keep row and column counts only; sparse inputs keep the
// entries and order them by w, descending, with a counting sort (w in [1, d]).
class EpochLevels {
public:
    EpochLevels(std::int64_t n_q, std::int64_t n_k, std::int64_t d, std::int64_t m, bool dense)
        : m_(m)
        , d_(d)
        , dense_(dense)
        , rows_(static_cast<std::size_t>(n_q), 0)
        , cols_(static_cast<std::size_t>(n_k), 0) {
        if (!dense)
            bucket_.assign(static_cast<std::size_t>(d + 2), 0);
    }

    // Dense inputs: `count` entries of row i, and (separately) `count` entries of column j.
    void add_row(std::int64_t i, std::int64_t count) {
        bump(rows_, touched_rows_, i, count);
        size_ += count;
    }

    void add_col(std::int64_t j, std::int64_t count) { bump(cols_, touched_cols_, j, count); }

    // Sparse inputs: one entry of inner dimension w >= 1.
    void add(Item it) { items_.push_back(it); }

    void flush(std::int64_t epoch, EpochStats& s) {
        if (dense_) {
            s.max_entries = std::max(s.max_entries, size_);
            level(epoch, d_, size_, s);
        } else {
            order_by_w();
            s.max_entries = std::max(s.max_entries, static_cast<std::int64_t>(items_.size()));
            for (std::size_t x = 0; x < sorted_.size();) {
                // --- level w: I_t(w) = the items so far plus those of inner dimension w ---
                const std::int64_t w = sorted_[x].w;
                for (; x < sorted_.size() && sorted_[x].w == w; ++x) {
                    bump(rows_, touched_rows_, sorted_[x].row, 1);
                    bump(cols_, touched_cols_, sorted_[x].col, 1);
                }
                level(epoch, w, static_cast<std::int64_t>(x), s);
            }
            items_.clear();
        }
        reset(rows_, touched_rows_);
        reset(cols_, touched_cols_);
        size_ = 0;
    }

private:
    // The measures of I_t(w) (`size` entries, counted in rows_ and cols_).
    void level(std::int64_t epoch, std::int64_t w, std::int64_t size, EpochStats& s) {
        if (size == 0)
            return;
        const double limit = epoch_entry_limit(m_, w);
        const double ratio = static_cast<double>(size) / limit;
        if (ratio > s.max_ratio) {
            s.max_ratio = ratio;
            s.busiest = epoch;
            s.worst_w = w;
            s.entry_limit = limit;
        }
        s.within_budget = s.within_budget && within(size, w, m_);
        s.max_rank_rows = std::max(s.max_rank_rows, capped(rows_, touched_rows_, w));
        s.max_rank_cols = std::max(s.max_rank_cols, capped(cols_, touched_cols_, w));
    }

    // sorted_ = items_ by w descending, stable (counting sort over w in [1, d]).
    void order_by_w() {
        for (const Item& it : items_)
            ++bucket_[static_cast<std::size_t>(d_ - it.w + 1)];
        for (std::size_t x = 1; x < bucket_.size(); ++x)
            bucket_[x] += bucket_[x - 1];
        sorted_.resize(items_.size());
        for (const Item& it : items_)
            sorted_[static_cast<std::size_t>(bucket_[static_cast<std::size_t>(d_ - it.w)]++)] = it;
        std::fill(bucket_.begin(), bucket_.end(), 0);
    }

    static void bump(std::vector<std::int64_t>& c,
                     std::vector<std::int64_t>& touched,
                     std::int64_t i,
                     std::int64_t by) {
        std::int64_t& v = c[static_cast<std::size_t>(i)];
        if (by == 0) // an empty block: nothing to count (and i must not be touched twice)
            return;
        if (v == 0)
            touched.push_back(i);
        v += by;
    }

    // sum over touched i of min(c_i, w): r^w from row (column) counts
    static std::int64_t capped(const std::vector<std::int64_t>& c,
                               const std::vector<std::int64_t>& touched,
                               std::int64_t w) {
        std::int64_t s = 0;
        for (std::int64_t i : touched)
            s += std::min(c[static_cast<std::size_t>(i)], w);
        return s;
    }

    static void reset(std::vector<std::int64_t>& c, std::vector<std::int64_t>& touched) {
        for (std::int64_t i : touched)
            c[static_cast<std::size_t>(i)] = 0;
        touched.clear();
    }

    std::int64_t m_;
    std::int64_t d_;
    bool dense_;
    std::int64_t size_ = 0; // dense inputs: |I_t|
    std::vector<Item> items_, sorted_;
    std::vector<std::int64_t> bucket_;
    std::vector<std::int64_t> rows_, cols_, touched_rows_, touched_cols_;
};

// The entries of Omega inside a complete block into the epoch (dense inputs): row and column
// counts directly, each entry counted once in `seen` (saturating at 2).
void add_dense_block(const Block& b,
                     const RowPattern* omega,
                     std::int64_t n_k,
                     std::vector<std::uint8_t>& seen,
                     EpochLevels& cur) {
    for (std::int64_t i = b.row0; i < b.row0 + b.rows; ++i) {
        std::uint8_t* row = seen.data() + i * n_k;
        if (omega == nullptr) {
            for (std::int64_t j = b.col0; j < b.col0 + b.cols; ++j)
                row[j] = static_cast<std::uint8_t>(row[j] + (row[j] < 2 ? 1 : 0));
            cur.add_row(i, b.cols);
            continue;
        }
        const auto [a, z] = detail::cols_in(*omega, i, b.col0, b.cols);
        for (const std::int64_t* j = a; j != z; ++j) {
            row[*j] = static_cast<std::uint8_t>(row[*j] + (row[*j] < 2 ? 1 : 0));
            cur.add_col(*j, 1);
        }
        if (z != a)
            cur.add_row(i, z - a);
    }
    if (omega == nullptr && b.rows > 0)
        for (std::int64_t j = b.col0; j < b.col0 + b.cols; ++j)
            cur.add_col(j, b.rows);
}

} // namespace

void EpochShape::validate(const char* where) const {
    if (n_q < 1 || n_k < 1 || d < 1)
        throw InvalidArgument(std::string(where) + ": n_q = " + std::to_string(n_q) +
                              ", n_k = " + std::to_string(n_k) + ", d = " + std::to_string(d) +
                              " (expected all >= 1)");
    check_pattern(omega, n_q, n_k, "omega", where);
    check_pattern(q, n_q, d, "q", where);
    check_pattern(k, n_k, d, "k", where);
}

namespace detail {

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

InnerDims::InnerDims(const EpochShape& s)
    : d_(s.d)
    , words_((s.d + 63) / 64)
    , dense_(s.q == nullptr && s.k == nullptr) {
    if (dense_)
        return;
    const auto bits =
        [&](const RowPattern* pat, std::int64_t rows, std::vector<std::uint64_t>& out) {
            out.assign(static_cast<std::size_t>(rows * words_), 0);
            for (std::int64_t r = 0; r < rows; ++r) {
                std::uint64_t* row = out.data() + r * words_;
                if (pat == nullptr) {
                    for (std::int64_t c = 0; c < d_; ++c)
                        row[c / 64] |= std::uint64_t{1} << (c % 64);
                    continue;
                }
                const auto [a, z] = cols_in(*pat, r, 0, d_);
                for (const std::int64_t* c = a; c != z; ++c)
                    row[*c / 64] |= std::uint64_t{1} << (*c % 64);
            }
        };
    bits(s.q, s.n_q, q_);
    bits(s.k, s.n_k, k_);
}

std::int64_t stored_words(const Block& b, const RowPattern* pattern) {
    if (pattern == nullptr)
        return b.words();
    std::int64_t n = 0;
    for (std::int64_t r = b.row0; r < b.row0 + b.rows; ++r) {
        const auto [a, z] = cols_in(*pattern, r, b.col0, b.cols);
        n += z - a;
    }
    return n;
}

} // namespace detail

EpochStats
epoch_stats(const std::vector<TraceEvent>& trace, const EpochShape& shape, std::int64_t m) {
    constexpr const char* kWhere = "ioattn::ff::epoch_stats";
    if (m < 1)
        throw InvalidArgument(std::string(kWhere) + ": M = " + std::to_string(m) +
                              " (expected >= 1)");
    shape.validate(kWhere);
    const detail::InnerDims inner(shape);
    EpochStats s;
    EpochLevels cur(shape.n_q, shape.n_k, shape.d, m, inner.dense());
    std::vector<std::uint8_t> seen(static_cast<std::size_t>(shape.n_q * shape.n_k), 0);
    std::int64_t pos = 0;
    std::int64_t epoch = 0;
    for (const TraceEvent& ev : trace) {
        if (ev.kind == TraceEvent::Kind::read || ev.kind == TraceEvent::Kind::write) {
            pos += ev.moved();
            continue;
        }
        if (ev.kind != TraceEvent::Kind::complete)
            continue;
        detail::check_complete(ev.block, shape.n_q, shape.n_k, kWhere);
        // --- the epoch of the words moved so far; flush I_t when it changes ---
        if (detail::epoch_of(pos, m) != epoch) {
            cur.flush(epoch, s);
            epoch = detail::epoch_of(pos, m);
        }
        if (inner.dense()) {
            add_dense_block(ev.block, shape.omega, shape.n_k, seen, cur);
            continue;
        }
        detail::for_each_entry(ev.block, shape.omega, [&](std::int64_t i, std::int64_t j) {
            std::uint8_t& f = seen[static_cast<std::size_t>(i * shape.n_k + j)];
            f = static_cast<std::uint8_t>(std::min(f + 1, 2));
            const std::int64_t w = inner(i, j);
            if (w == 0)
                ++s.zero_entries;
            else
                cur.add({i, j, w});
        });
    }
    cur.flush(epoch, s);
    // --- every allowed entry exactly once ---
    const Block all{Operand::scores, 0, 0, shape.n_q, 0, shape.n_k};
    detail::for_each_entry(all, shape.omega, [&](std::int64_t i, std::int64_t j) {
        s.complete_once = s.complete_once && seen[static_cast<std::size_t>(i * shape.n_k + j)] == 1;
    });
    s.total_io = pos;
    s.epochs = std::max<std::int64_t>((pos + m - 1) / m, 1);
    if (s.entry_limit == 0)
        s.entry_limit = epoch_entry_limit(m, shape.d);
    return s;
}

EpochStats epoch_stats(const std::vector<TraceEvent>& trace,
                       std::int64_t n_q,
                       std::int64_t n_k,
                       std::int64_t d,
                       std::int64_t m) {
    return epoch_stats(trace, EpochShape{n_q, n_k, d, nullptr, nullptr, nullptr}, m);
}

} // namespace ioattn::ff
