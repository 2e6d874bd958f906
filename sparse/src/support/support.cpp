// ioattn::sparse::Support: CSR of the allowed (query, key) pairs Omega, validated on entry.
// Construction checks offsets (size n_q + 1, start 0, monotone, end = Z_QK) and each row's
// columns (in [0, n_k), strictly increasing) in one parallel pass: O(n_q + Z_QK) work, no extra
// memory; a bad row is then named by a serial pass (the library's builders' rows: in Debug and
// sanitizer builds only). The transpose (support/transpose.cpp) and plans are kept per support.
// row(i) and row_nonzeros(i) are O(1); contains(i, j) is a binary search in row i.
// Tests: tests/sparse/support_test.cpp

#include "fail.hpp"
#include "kernels/element/panels.hpp"
#include "support/block_keys.hpp"
#include "support/index_pool.hpp"
#include "support/interval_transpose.hpp"
#include "support/transpose.hpp"

#include <ioattn/error.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/sparse/support.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <utility>

namespace ioattn::sparse {

namespace {

/// Plans and views built on first use for each key and kept (stable addresses: references stay
/// valid). The build runs unlocked (it runs parallel loops: a worker waiting on the lock here could
/// be the one the build needs); of two concurrent builds of one key the first stored is kept.
template <typename Key, typename Plan>
class Kept {
public:
    template <typename Build>
    const Plan& get(const Key& key, Build build) {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            if (const Plan* found = find(key))
                return *found;
        }
        auto plan = std::make_unique<Plan>(build());
        const std::lock_guard<std::mutex> lock(mutex_);
        if (const Plan* found = find(key))
            return *found;
        plans_.emplace_back(key, std::move(plan));
        return *plans_.back().second;
    }

private:
    const Plan* find(const Key& key) const {
        for (const auto& [k, plan] : plans_)
            if (k == key)
                return plan.get();
        return nullptr;
    }

    std::mutex mutex_;
    std::vector<std::pair<Key, std::unique_ptr<Plan>>> plans_;
};

} // namespace

struct Support::Cache {
    // Not std::call_once: ThreadSanitizer's pthread_once interceptor keeps the flag taken
    // after a throw (a refused transpose), so the retry the API promises hung under the tsan
    // preset. Double-checked instead: `ready` is published after the build, under the lock.
    std::mutex transpose_mutex;
    std::atomic<const Support*> ready{nullptr};
    std::atomic<int> symmetric{-1}; ///< interval_symmetric: -1 not known yet, 0 no, 1 yes
    std::unique_ptr<Support> transposed;
    std::atomic<const std::vector<std::int64_t>*> positions_ready{nullptr};
    std::vector<std::int64_t>
        transposed_positions; ///< per entry of the transpose, its position here
    Kept<std::pair<std::int64_t, std::int64_t>, BlockView> views; ///< by Br, Bc
    Kept<std::int64_t, detail::BlockKeys> block_keys_kept;        ///< by rows
    Kept<std::pair<std::int64_t, std::int64_t>, detail::ElementPanels>
        element_panels_kept; ///< rows, P
    std::mutex values_mutex;
    std::vector<std::pair<std::string, std::shared_ptr<const void>>>
        values;                            ///< least recently used first
    std::shared_ptr<SupportFamily> family; ///< under values_mutex
    RowRuns row_runs, key_runs; ///< set by the builder (keep_runs) before the structure is shared
    std::int64_t row_step = 0, key_step = 0; ///< set by the builder (keep_steps), likewise
    RowRuns chain_runs;                      ///< set by the builder (keep_chains), likewise
};

std::shared_ptr<SupportFamily> Support::family() const {
    const std::lock_guard<std::mutex> lock(cache_->values_mutex);
    return cache_->family;
}

void Support::join_family(std::shared_ptr<SupportFamily> f) const {
    const std::lock_guard<std::mutex> lock(cache_->values_mutex);
    if (cache_->family == nullptr)
        cache_->family = std::move(f);
}

std::shared_ptr<Support::Cache> Support::make_cache() {
    return std::make_shared<Cache>();
}

const BlockView& Support::cached_block_view(std::int64_t br, std::int64_t bc) const {
    return cache_->views.get({br, bc}, [&] { return block_view(br, bc); });
}

std::shared_ptr<const void>
Support::cached_value(const std::string& key,
                      const std::function<std::shared_ptr<const void>()>& build) const {
    const auto find = [&]() -> std::shared_ptr<const void> { // a hit becomes the most recent
        auto& values = cache_->values;
        for (auto it = values.begin(); it != values.end(); ++it)
            if (it->first == key) {
                auto v = it->second;
                std::rotate(it, std::next(it), values.end());
                return v;
            }
        return nullptr;
    };
    {
        const std::lock_guard<std::mutex> lock(cache_->values_mutex);
        if (auto found = find())
            return found;
    }
    std::shared_ptr<const void> value = build(); // unlocked: it runs parallel loops
    const std::lock_guard<std::mutex> lock(cache_->values_mutex);
    if (auto found = find())
        return found;
    auto& values = cache_->values;
    if (values.size() == kKeptValues)
        values.erase(values.begin());
    values.emplace_back(key, value);
    return value;
}

const detail::BlockKeys& Support::cached_block_keys(std::int64_t rows) const {
    return cache_->block_keys_kept.get(rows, [&] { return detail::BlockKeys::build(*this, rows); });
}

const detail::ElementPanels& Support::cached_element_panels(std::int64_t rows,
                                                            std::int64_t panel) const {
    return cache_->element_panels_kept.get(
        {rows, panel}, [&] { return detail::ElementPanels::build(*this, rows, panel); });
}

const Support& Support::transposed() const {
    if (const Support* t = cache_->ready.load(std::memory_order_acquire))
        return *t;
    // a symmetric band is its own transpose: no copy (window:256 at N = 16384: 64 MiB), and
    // the backward's key-side plans are its query-side ones
    int symmetric = cache_->symmetric.load(std::memory_order_acquire);
    if (symmetric < 0) {
        symmetric = detail::interval_symmetric(*this) ? 1 : 0;
        cache_->symmetric.store(symmetric, std::memory_order_release);
    }
    if (symmetric == 1)
        return *this;
    // built unlocked (its loops run in parallel: a worker waiting on the lock could be one they
    // need); of two concurrent builds the first stored is kept; a throw stores nothing, so the
    // next call retries
    detail::TransposeParts t = detail::transpose_of(*this, false);
    auto built = std::make_unique<Support>(
        detail::BuiltRows{}, n_k(), n_q(), std::move(t.offsets), std::move(t.entries));
    built->cache_->row_runs = cache_->key_runs;
    built->cache_->key_runs = cache_->row_runs;
    built->cache_->row_step = cache_->key_step;
    built->cache_->key_step = cache_->row_step;
    const std::lock_guard<std::mutex> lock(cache_->transpose_mutex);
    if (cache_->transposed == nullptr) {
        cache_->transposed = std::move(built);
        cache_->ready.store(cache_->transposed.get(), std::memory_order_release);
    }
    return *cache_->transposed;
}

RowRuns Support::row_runs() const {
    return cache_->row_runs;
}

void Support::keep_runs(detail::BuiltRows, RowRuns rows, RowRuns keys) const {
    cache_->row_runs = rows;
    cache_->key_runs = keys;
#ifndef NDEBUG
    const auto equal_in_runs = [](const Support& s, const RowRuns& r) {
        for (std::int64_t i = 1; i < s.n_q() && r.period > 0; ++i)
            if (r.one_run(i - 1, i + 1) && !std::ranges::equal(s.row(i - 1), s.row(i)))
                return false;
        return true;
    };
    IOATTN_ASSERT(equal_in_runs(*this, rows));
    IOATTN_ASSERT(keys.period == 0 || equal_in_runs(transposed(), keys));
#endif
}

std::int64_t Support::row_step() const {
    return cache_->row_step;
}

void Support::keep_steps(detail::BuiltRows, std::int64_t rows, std::int64_t keys) const {
    cache_->row_step = rows;
    cache_->key_step = keys;
#ifndef NDEBUG
    const auto steps_by = [](const Support& s, std::int64_t t) {
        for (std::int64_t i = 0; i < s.n_q() && t > 0; ++i)
            for (std::size_t k = 1; k < s.row(i).size(); ++k)
                if (s.row(i)[k] - s.row(i)[k - 1] != t)
                    return false;
        return true;
    };
    IOATTN_ASSERT(rows >= 0 && keys >= 0);
    IOATTN_ASSERT(steps_by(*this, rows));
    IOATTN_ASSERT(keys == 0 || steps_by(transposed(), keys));
#endif
}

RowRuns Support::chain_runs() const {
    return cache_->chain_runs;
}

void Support::keep_chains(detail::BuiltRows, RowRuns rows) const {
    cache_->chain_runs = rows;
#ifndef NDEBUG
    for (std::int64_t i = 1; i < n_q() && rows.period > 0; ++i) {
        const auto before = row(i - 1), here = row(i);
        IOATTN_ASSERT(!rows.one_run(i - 1, i + 1) ||
                      (before.size() <= here.size() &&
                       std::equal(before.begin(), before.end(), here.begin())));
    }
#endif
}

void Support::keep_transposed(detail::BuiltRows, Support t) const {
    if (t.n_q() != n_k() || t.n_k() != n_q() || t.z_qk() != z_qk())
        throw InvalidArgument("ioattn::sparse::Support::keep_transposed: a " +
                              std::to_string(t.n_q()) + " x " + std::to_string(t.n_k()) +
                              " structure of " + std::to_string(t.z_qk()) +
                              " pairs is not the transpose of a " + std::to_string(n_q()) + " x " +
                              std::to_string(n_k()) + " one of " + std::to_string(z_qk()));
    auto kept = std::make_unique<Support>(std::move(t));
    const std::lock_guard<std::mutex> lock(cache_->transpose_mutex);
    if (cache_->transposed == nullptr) {
        cache_->transposed = std::move(kept);
        cache_->ready.store(cache_->transposed.get(), std::memory_order_release);
    }
}

std::span<const std::int64_t> Support::transposed_positions() const {
    // a pass of its own: only the materializing backward reads the positions, so the fused
    // backward's transpose (window:256, N = 16384: 64 MiB) does not fill them
    if (const auto* p = cache_->positions_ready.load(std::memory_order_acquire))
        return *p;
    detail::TransposeParts t = detail::transpose_of(*this, true);
    const std::lock_guard<std::mutex> lock(cache_->transpose_mutex);
    if (cache_->positions_ready.load(std::memory_order_relaxed) == nullptr) {
        cache_->transposed_positions = std::move(t.entries);
        cache_->positions_ready.store(&cache_->transposed_positions, std::memory_order_release);
    }
    return cache_->transposed_positions;
}

namespace {

constexpr std::string_view kSupportWhere = "ioattn::sparse::Support";

/// Whether rows [i0, i1) have offsets that do not decrease and stay within cols, and sorted
/// unique columns in [0, n_k).
bool rows_valid(std::span<const std::int64_t> offsets,
                std::span<const std::int64_t> cols,
                std::int64_t n_k,
                std::int64_t i0,
                std::int64_t i1) {
    const auto z = static_cast<std::int64_t>(cols.size());
    for (std::int64_t i = i0; i < i1; ++i) {
        const std::int64_t lo = offsets[static_cast<std::size_t>(i)];
        const std::int64_t hi = offsets[static_cast<std::size_t>(i) + 1];
        if (hi < lo || hi > z)
            return false;
        std::int64_t prev = -1;
        for (std::int64_t p = lo; p < hi; ++p) {
            const std::int64_t j = cols[static_cast<std::size_t>(p)];
            if (j <= prev || j >= n_k)
                return false;
            prev = j;
        }
    }
    return true;
}

/// Throws InvalidArgument naming the first row that rows_valid refuses.
void name_bad_row(std::span<const std::int64_t> offsets,
                  std::span<const std::int64_t> cols,
                  std::int64_t n_k) {
    const auto n_q = static_cast<std::int64_t>(offsets.size()) - 1;
    const auto z = static_cast<std::int64_t>(cols.size());
    for (std::int64_t i = 0; i < n_q; ++i) {
        const std::int64_t lo = offsets[static_cast<std::size_t>(i)];
        const std::int64_t hi = offsets[static_cast<std::size_t>(i) + 1];
        if (hi < lo)
            detail::fail(kSupportWhere,
                         "row ",
                         i,
                         ": row_offsets[",
                         i + 1,
                         "] = ",
                         hi,
                         " < row_offsets[",
                         i,
                         "] = ",
                         lo,
                         " (offsets must not decrease)");
        if (hi > z)
            detail::fail(kSupportWhere,
                         "row ",
                         i,
                         ": row_offsets[",
                         i + 1,
                         "] = ",
                         hi,
                         " exceeds the number of column indices ",
                         z);
        for (std::int64_t p = lo; p < hi; ++p) {
            const std::int64_t j = cols[static_cast<std::size_t>(p)];
            if (j < 0 || j >= n_k)
                detail::fail(
                    kSupportWhere, "row ", i, ": column ", j, " out of range [0, ", n_k, ")");
            if (p > lo) {
                const std::int64_t prev = cols[static_cast<std::size_t>(p) - 1];
                if (j == prev)
                    detail::fail(kSupportWhere, "row ", i, ": duplicate column ", j);
                if (j < prev)
                    detail::fail(kSupportWhere,
                                 "row ",
                                 i,
                                 ": column ",
                                 j,
                                 " after column ",
                                 prev,
                                 " (columns must be sorted ascending)");
            }
        }
    }
}

} // namespace

Support::Support(std::int64_t n_q,
                 std::int64_t n_k,
                 std::vector<std::int64_t> row_offsets,
                 std::vector<std::int64_t> col_indices)
    : Support(detail::BuiltRows{}, n_q, n_k, std::move(row_offsets), std::move(col_indices)) {
#ifdef NDEBUG // (the constructor delegated to checks them otherwise)
    check_rows();
#endif
}

Support::Support(detail::BuiltRows,
                 std::int64_t n_q,
                 std::int64_t n_k,
                 std::vector<std::int64_t> row_offsets,
                 std::vector<std::int64_t> col_indices)
    : n_q_(n_q)
    , n_k_(n_k)
    , offsets_(std::move(row_offsets))
    , cols_(std::move(col_indices)) {
    check_shape();
#ifndef NDEBUG
    check_rows();
#endif
}

void Support::check_shape() const {
    if (n_q_ < 0)
        detail::fail(kSupportWhere, "n_q = ", n_q_, " (expected >= 0)");
    if (n_k_ < 0)
        detail::fail(kSupportWhere, "n_k = ", n_k_, " (expected >= 0)");
    if (static_cast<std::int64_t>(offsets_.size()) != n_q_ + 1)
        detail::fail(kSupportWhere,
                     "row_offsets has ",
                     offsets_.size(),
                     " entries (expected n_q + 1 = ",
                     n_q_ + 1,
                     ")");
    if (offsets_[0] != 0)
        detail::fail(kSupportWhere, "row_offsets[0] = ", offsets_[0], " (expected 0)");
}

void Support::check_rows() const {
    const auto z = static_cast<std::int64_t>(cols_.size());
    // the rows checked in parallel; the first bad row, if any, found and named serially
    const std::int64_t step = std::max<std::int64_t>(1024, (n_q_ + 255) / 256);
    std::atomic<bool> bad{false};
    parallel_for_tiles((n_q_ + step - 1) / step, [&](std::int64_t t, int) {
        if (!rows_valid(offsets_, cols_, n_k_, t * step, std::min(n_q_, (t + 1) * step)))
            bad.store(true, std::memory_order_relaxed);
    });
    if (bad.load())
        name_bad_row(offsets_, cols_, n_k_);
    if (offsets_[static_cast<std::size_t>(n_q_)] != z)
        detail::fail(kSupportWhere,
                     "row_offsets[n_q] = ",
                     offsets_[static_cast<std::size_t>(n_q_)],
                     " but there are ",
                     z,
                     " column indices");
}

Support::~Support() {
    detail::give_index_array(cols_);
    detail::give_index_array(offsets_);
}

Support Support::none(std::int64_t n_q, std::int64_t n_k) {
    if (n_q < 0)
        detail::fail("ioattn::sparse::Support::none", "n_q = ", n_q, " (expected >= 0)");
    require_memory(
        "ioattn::sparse::Support::none",
        add_bytes(bytes_of(n_q, sizeof(std::int64_t)), sizeof(std::int64_t)), // n_q + 1 offsets
        "row offsets");
    return {n_q, n_k, std::vector<std::int64_t>(static_cast<std::size_t>(n_q) + 1, 0), {}};
}

bool Support::contains(std::int64_t i, std::int64_t j) const {
    if (i < 0 || i >= n_q_ || j < 0 || j >= n_k_)
        return false;
    const auto r = row(i);
    return std::binary_search(r.begin(), r.end(), j);
}

std::int64_t Support::empty_rows() const {
    std::int64_t count = 0;
    for (std::size_t i = 0; i + 1 < offsets_.size(); ++i)
        count += offsets_[i] == offsets_[i + 1] ? 1 : 0;
    return count;
}

} // namespace ioattn::sparse
