#pragma once
/// Support: the set Omega of allowed (query, key) pairs of a sparse attention, stored as CSR over
/// the query rows (docs/design.md section 6.1). Pairs outside Omega take no part in the softmax.

#include <ioattn/error.hpp>
#include <ioattn/sparse/block_view.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ioattn::sparse {

struct SupportFamily;

namespace detail {
struct BlockKeys;
struct ElementPanels;

/// Tag of the constructor the library's own builders use (Support(detail::BuiltRows, ...)).
struct BuiltRows {};
} // namespace detail

/// Rows known to come in aligned runs of equal rows (the same keys): rows i and i' are equal
/// when floor((i + shift) / period) is the same for both. period 0: nothing known. What the
/// builders of block patterns know of their rows (block, bigbird-block) and of their keys
/// (the transpose's rows), so that the planner and the tile kernels' key lists take one row
/// of a run for all of it (Support::row_runs).
struct RowRuns {
    std::int64_t period = 0;
    std::int64_t shift = 0;

    /// The run of row i (period > 0).
    [[nodiscard]] std::int64_t run(std::int64_t i) const {
        const std::int64_t x = i + shift;
        return x / period - (x % period < 0 ? 1 : 0);
    }

    /// Whether rows [i0, i1) (i0 < i1) lie in one run.
    [[nodiscard]] bool one_run(std::int64_t i0, std::int64_t i1) const {
        return period > 0 && run(i0) == run(i1 - 1);
    }
};

/// Omega as CSR over n_q query rows and n_k keys: row i allows the keys
/// col_indices[row_offsets[i] .. row_offsets[i+1]), sorted ascending and unique.
/// Immutable after construction; concurrent reads are safe. A default-constructed Support is
/// the empty 0 x 0 support.
class Support {
public:
    Support() = default;
    Support(const Support&) = default;
    Support(Support&&) noexcept = default;
    Support& operator=(const Support&) = default;
    Support& operator=(Support&&) noexcept = default;

    /// Gives its index arrays to the index pool (ioattn/sparse/index_pool.hpp).
    ~Support();

    /// Takes ownership of a CSR structure and validates it in O(n_q + Z_QK). Throws
    /// InvalidArgument naming the row and the value when: n_q < 0 or n_k < 0; row_offsets does
    /// not have n_q + 1 entries; row_offsets[0] != 0; offsets decrease; row_offsets[n_q] !=
    /// col_indices.size(); a column is outside [0, n_k); a row's columns are unsorted or repeat.
    Support(std::int64_t n_q,
            std::int64_t n_k,
            std::vector<std::int64_t> row_offsets,
            std::vector<std::int64_t> col_indices);

    /// A CSR structure the library built (the pattern builders, transposes, split parts),
    /// whose rows are sorted, unique and in range by construction: the shape is checked as
    /// above, every row only in Debug and sanitizer builds (an O(Z_QK) pass over columns just
    /// written: 5% of a fresh window:256 step at N = 16384). Not for a caller's arrays.
    Support(detail::BuiltRows,
            std::int64_t n_q,
            std::int64_t n_k,
            std::vector<std::int64_t> row_offsets,
            std::vector<std::int64_t> col_indices);

    /// The n_q x n_k support with no allowed pair.
    static Support none(std::int64_t n_q, std::int64_t n_k);

    [[nodiscard]] std::int64_t n_q() const { return n_q_; }

    [[nodiscard]] std::int64_t n_k() const { return n_k_; }

    /// Z_QK = |Omega|, the number of allowed pairs.
    [[nodiscard]] std::int64_t z_qk() const { return static_cast<std::int64_t>(cols_.size()); }

    /// The sorted keys query row i may see. Precondition: 0 <= i < n_q (checked in Debug and
    /// sanitizer builds). Inline: the kernels call it per row and tile.
    [[nodiscard]] std::span<const std::int64_t> row(std::int64_t i) const {
        IOATTN_ASSERT(i >= 0 && i < n_q_);
        const auto u = static_cast<std::size_t>(i);
        return {cols_.data() + offsets_[u],
                static_cast<std::size_t>(offsets_[u + 1] - offsets_[u])};
    }

    /// Number of allowed keys of row i. Precondition: 0 <= i < n_q.
    [[nodiscard]] std::int64_t row_nonzeros(std::int64_t i) const {
        const auto u = static_cast<std::size_t>(i);
        return offsets_[u + 1] - offsets_[u];
    }

    /// Whether (i, j) is in Omega: binary search in row i, O(log row_nonzeros(i)).
    /// Out-of-range i or j give false.
    [[nodiscard]] bool contains(std::int64_t i, std::int64_t j) const;

    /// Number of query rows with no allowed key (their output is 0 and L = -inf).
    [[nodiscard]] std::int64_t empty_rows() const;

    /// The n_q + 1 row offsets.
    [[nodiscard]] std::span<const std::int64_t> row_offsets() const { return offsets_; }

    /// The Z_QK column indices, row by row.
    [[nodiscard]] std::span<const std::int64_t> col_indices() const { return cols_; }

    /// The tile view for row blocks of Br query rows and column tiles of Bc keys, in
    /// O(Z_QK + n_q + sum over row blocks of (visible keys) log (visible keys)), serial.
    /// Throws InvalidArgument if Br < 1 or Bc < 1.
    [[nodiscard]] BlockView block_view(std::int64_t br, std::int64_t bc) const;

    /// block_view(br, bc), built on first use for each (br, bc) and kept with the structure
    /// (copies share it; thread-safe): the kernels' view, so that repeated runs on one structure
    /// do not rebuild it (20% of a materializing window:256 forward, N=16384, H=1).
    [[nodiscard]] const BlockView& cached_block_view(std::int64_t br, std::int64_t bc) const;

    /// The fused kernels' plan for row blocks of at most `rows` rows (internal type, see
    /// sparse/src/support/block_keys.hpp), built on first use for each `rows` and kept with the
    /// structure (copies share it; thread-safe; built outside any lock, so a call from inside a
    /// parallel region cannot deadlock): repeated runs on one structure do not rebuild it.
    [[nodiscard]] const detail::BlockKeys& cached_block_keys(std::int64_t rows) const;

    /// The element kernels' plan for row blocks of at most `rows` rows and key panels of
    /// `panel` keys (sparse/src/kernels/element/panels.hpp), kept as cached_block_keys:
    /// rebuilding it would be 16% of the instructions of a random:0.02 forward, N = 16384
    /// (callgrind).
    [[nodiscard]] const detail::ElementPanels& cached_element_panels(std::int64_t rows,
                                                                     std::int64_t panel) const;

    /// A value the sparse library builds from this structure, by key (the variant planner's
    /// plans: sparse::plan_variants), built on first use outside any lock and kept
    /// with the structure (copies share it; thread-safe); the kKeptValues most recent keys are
    /// kept, older ones dropped. A build that throws keeps nothing.
    [[nodiscard]] std::shared_ptr<const void>
    cached_value(const std::string& key,
                 const std::function<std::shared_ptr<const void>()>& build) const;

    /// How many values cached_value keeps per structure.
    static constexpr std::size_t kKeptValues = 8;

    /// A copy with a cache of its own, nothing built yet: what a value kept by cached_value may
    /// hold (a copy sharing this cache would keep the cache alive through itself: a leak).
    [[nodiscard]] Support detached() const {
        Support c = *this;
        c.cache_ = make_cache();
        return c;
    }

    /// Omega^T: the n_k x n_q support whose row j lists the queries that may see key j. Built
    /// on first use (O(n_k + Z_QK)) and kept: copies share it; thread-safe. A symmetric support
    /// of interval rows (a window, a band) is its own transpose: *this, nothing built.
    [[nodiscard]] const Support& transposed() const;

    /// Keeps t, which is this structure's Omega^T, as transposed(), nothing built (ignored when
    /// one is kept already). For the library's planner (the tag): the backward's parts are
    /// split in the transposed orientation and turned back, and the backward kernels read them
    /// transposed again. Throws InvalidArgument when t's shape or pair count is not the
    /// transpose's.
    void keep_transposed(detail::BuiltRows, Support t) const;

    /// The runs of equal rows its builder declared (keep_runs; period 0 when none): kept by
    /// copies, swapped with the key runs by transposed(), not kept by detached() or by any
    /// structure built from this one.
    [[nodiscard]] RowRuns row_runs() const;

    /// Declares the runs of equal rows and of keys with equal row sets (the transpose's equal
    /// rows), for the library's builders (the tag) right after they build the structure, before
    /// it is shared. Debug and sanitizer builds check every row against its run's first (and the
    /// key runs through the transpose).
    void keep_runs(detail::BuiltRows, RowRuns rows, RowRuns keys) const;

    /// The step between consecutive keys of every row its builder declared (keep_steps; 0 when
    /// none): kept by copies, swapped with the keys' step by transposed(), not kept by
    /// detached() or by any structure built from this one.
    [[nodiscard]] std::int64_t row_step() const;

    /// Declares that each row's keys step by `rows` from one to the next (and each key's
    /// queries, the transpose's rows, by `keys`; 0: not declared), for the library's builders
    /// (the tag) as keep_runs: dilated:W:S's rows step by S, so that the planner counts and
    /// reorders them by their ends. Debug and sanitizer builds check every row (and the
    /// transpose's).
    void keep_steps(detail::BuiltRows, std::int64_t rows, std::int64_t keys) const;

    /// The runs of rows its builder declared as chains (keep_chains; period 0 when none): kept
    /// by copies, not by transposed(), detached() or any structure built from this one.
    [[nodiscard]] RowRuns chain_runs() const;

    /// Declares that each row of a run (RowRuns) is the row before with keys added after its
    /// last, for the library's builders (the tag) as keep_runs: strided:L's rows within one of
    /// its blocks, so that the chains are known without comparing rows (sparse/src/support/
    /// chains.hpp). Debug and sanitizer builds check every row.
    void keep_chains(detail::BuiltRows, RowRuns rows) const;

    /// For each entry of transposed() in its CSR order, the position of the same pair in this
    /// support's CSR order (built on first use, O(n_k + Z_QK), and kept; thread-safe): how the
    /// materializing backward walks its stored P and dS column by column.
    [[nodiscard]] std::span<const std::int64_t> transposed_positions() const;

    /// The family of this structure: the spec and shape support_cache::pattern drew it from,
    /// whatever the seed (null for a structure given as arrays or not drawn through the cache).
    /// The variant planner keeps its decisions there for the family's next structure: a random
    /// mask drawn afresh every step is planned by its family's decision, not priced again.
    [[nodiscard]] std::shared_ptr<SupportFamily> family() const;

    /// Makes `f` this structure's family (and its copies'), if it has none yet; what
    /// support_cache::pattern does.
    void join_family(std::shared_ptr<SupportFamily> f) const;

    /// Same shape and same allowed pairs.
    bool operator==(const Support& other) const {
        return n_q_ == other.n_q_ && n_k_ == other.n_k_ && offsets_ == other.offsets_ &&
               cols_ == other.cols_;
    }

private:
    std::int64_t n_q_ = 0;
    std::int64_t n_k_ = 0;
    std::vector<std::int64_t> offsets_{0};
    std::vector<std::int64_t> cols_;
    struct Cache;
    static std::shared_ptr<Cache> make_cache();
    void check_shape() const;                     ///< the constructors' O(1) checks
    void check_rows() const;                      ///< every row: sorted, unique, in [0, n_k)
    std::shared_ptr<Cache> cache_ = make_cache(); ///< the lazily built transpose and views
};

} // namespace ioattn::sparse
