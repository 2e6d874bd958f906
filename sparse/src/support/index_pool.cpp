// The index pool (ioattn/sparse/index_pool.hpp, support/index_pool.hpp): kept arrays in an
// unordered list of at most kIndexPoolArrays, taken best fit (the least room of at least n and
// at most 2n words), not zeroed: its taker writes every word.
// Tests: tests/sparse/index_pool_whitebox_test.cpp

#include "support/index_pool.hpp"

#include <ioattn/error.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/sparse/index_pool.hpp>

#include <algorithm>
#include <array>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace ioattn::sparse {

namespace {

/// IOATTN_INDEX_POOL_MB in bytes, or the default when unset or empty.
std::size_t limit_from_environment() {
    return environment_count("IOATTN_INDEX_POOL_MB",
                             "ioattn::sparse",
                             "a count of MiB >= 0",
                             std::uint64_t{1} << 20)
        .value_or(kDefaultIndexPoolBytes);
}

std::size_t bytes_of(const std::vector<std::int64_t>& v) {
    return v.capacity() * sizeof(std::int64_t);
}

class Pool {
public:
    /// The process's pool (never destroyed: supports kept in static caches outlive statics).
    static Pool& instance() {
        static Pool* const pool = [] {
            auto* p = new Pool(limit_from_environment());
            on_memory_pressure([] { Pool::instance().release(); });
            return p;
        }();
        return *pool;
    }

    /// Frees every kept array (the limit stays): memory pressure (require_memory).
    void release() noexcept {
        const std::lock_guard lock(mutex_);
        kept_.clear();
        kept_bytes_ = 0;
    }

    std::vector<std::int64_t> take(std::int64_t n) {
        const std::lock_guard lock(mutex_);
        auto best = kept_.end();
        for (auto it = kept_.begin(); it != kept_.end(); ++it) {
            const auto room = static_cast<std::int64_t>(it->capacity());
            if (room >= n && room / 2 <= n &&
                (best == kept_.end() || it->capacity() < best->capacity()))
                best = it;
        }
        if (best == kept_.end())
            return {};
        std::vector<std::int64_t> v = std::move(*best);
        kept_.erase(best);
        kept_bytes_ -= bytes_of(v);
        ++reused_;
        return v;
    }

    void note(const std::int64_t* data) {
        const std::lock_guard lock(mutex_);
        fresh_[next_fresh_++ % fresh_.size()] = data;
    }

    /// Keeps v, or leaves it to its owner; an array a full pool drops is freed after the lock
    /// is released (declared before it), as is v by its owner: unmapping tens of MiB under the
    /// lock would hold up every take.
    void give(std::vector<std::int64_t>& v) {
        std::vector<std::int64_t> dropped;
        const std::lock_guard lock(mutex_);
        const bool advised = std::find(fresh_.begin(), fresh_.end(), v.data()) != fresh_.end();
        if (!advised || bytes_of(v) > limit_ || kept_.size() == kept_.capacity())
            return;
        kept_bytes_ += bytes_of(v);
        kept_.push_back(std::move(v));
        trim(&dropped);
    }

    void set_limit(std::size_t bytes) {
        const std::lock_guard lock(mutex_);
        limit_ = bytes;
        trim(nullptr);
    }

    IndexPoolStats stats() const {
        const std::lock_guard lock(mutex_);
        return {kept_bytes_, kept_.size(), limit_, reused_};
    }

private:
    explicit Pool(std::size_t limit)
        : limit_(limit) {
        kept_.reserve(kIndexPoolArrays + 1); // give() never allocates
    }

    /// Drops the smallest kept arrays until the pool is within its limits (lock held); the last
    /// one dropped moves to *dropped when given, to be freed by the caller after the lock.
    void trim(std::vector<std::int64_t>* dropped) {
        while (!kept_.empty() && (kept_bytes_ > limit_ || kept_.size() > kIndexPoolArrays)) {
            const auto smallest =
                std::min_element(kept_.begin(), kept_.end(), [](const auto& a, const auto& b) {
                    return a.capacity() < b.capacity();
                });
            kept_bytes_ -= bytes_of(*smallest);
            if (dropped != nullptr)
                *dropped = std::move(*smallest);
            kept_.erase(smallest);
        }
    }

    mutable std::mutex mutex_;
    std::vector<std::vector<std::int64_t>> kept_;
    std::size_t kept_bytes_ = 0, limit_;
    std::uint64_t reused_ = 0;
    static constexpr std::size_t kFreshNoted = 64;
    std::array<const std::int64_t*, kFreshNoted> fresh_{}; ///< the newest noted arrays
    std::size_t next_fresh_ = 0;
};

} // namespace

IndexPoolStats index_pool_stats() {
    return Pool::instance().stats();
}

void set_index_pool_limit(std::size_t bytes) {
    Pool::instance().set_limit(bytes);
}

namespace detail {

void release_index_arrays() noexcept {
    Pool::instance().release();
}

std::vector<std::int64_t> take_index_array(std::int64_t n) {
    if (n < kPoolMinWords)
        return {};
    std::vector<std::int64_t> v = Pool::instance().take(n);
    if (v.empty())
        return v;
    v.resize(static_cast<std::size_t>(n)); // not zeroed: its taker writes every word
    return v;
}

void note_fresh_array(const std::int64_t* data) {
    Pool::instance().note(data);
}

void give_index_array(std::vector<std::int64_t>& v) noexcept {
    if (static_cast<std::int64_t>(v.size()) < kPoolMinWords)
        return;
    try {
        Pool::instance().give(v);
    } catch (...) { // a malformed IOATTN_INDEX_POOL_MB (refused where arrays are taken)
    }
}

} // namespace detail

} // namespace ioattn::sparse
