// ioattn::sparse::support_cache (support_cache.hpp): a mutex-guarded list in recency order,
// front most recent, each entry a shared support, its content hash (none for a support built
// from a spec: hashing its columns was 3% of a fresh window:256 step, and a content lookup
// compares shape, pair count and arrays instead) and the spec keys it was built from. Lookups
// scan the list (capacity is small: tens of entries); builds run unlocked.
// Content hash: parts of 2^16 words hashed in parallel, each by four interleaved multiply-xor
// lanes over the 64-bit words (one multiply per word, the lanes independent), folded in order
// with the shape through SplitMix64's finaliser.
// Tests: tests/sparse/support_cache_test.cpp

#include "patterns/pattern_util.hpp"
#include "support/family.hpp"
#include "support/index_pool.hpp"

#include <ioattn/error.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/resources.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/support_cache.hpp>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ioattn::sparse::support_cache {

namespace {

struct SpecKey {
    std::string spec;
    std::int64_t n_q;
    std::int64_t n_k;
    std::uint64_t seed;

    bool operator==(const SpecKey&) const = default;
};

/// A family: a spec at a shape, whatever its seed.
struct FamilyKey {
    std::string spec;
    std::int64_t n_q;
    std::int64_t n_k;

    bool operator==(const FamilyKey&) const = default;
};

struct Entry {
    std::shared_ptr<const Support> support;
    std::optional<std::uint64_t> hash; ///< none: built from a spec, never hashed
    std::vector<SpecKey> specs;
};

/// The structures of one family (a spec and shape, any seed) the cache keeps, the most recent.
constexpr std::size_t kFamilyKept = 2;

/// IOATTN_PLAN_CACHE_SIZE, or kDefaultCapacity when unset or empty.
std::size_t capacity_from_environment() {
    return environment_count(
               "IOATTN_PLAN_CACHE_SIZE", "ioattn::sparse::support_cache", "a count >= 0")
        .value_or(kDefaultCapacity);
}

class Cache {
public:
    Cache()
        : capacity_(capacity_from_environment()) {}

    /// The entry a spec key names, moved to the front, or null.
    std::shared_ptr<const Support> find(const SpecKey& key) {
        const std::lock_guard lock(mutex_);
        for (auto it = list_.begin(); it != list_.end(); ++it)
            if (std::find(it->specs.begin(), it->specs.end(), key) != it->specs.end())
                return hit(it);
        return nullptr;
    }

    /// The entry with this content, moved to the front, or null.
    std::shared_ptr<const Support> find(std::optional<std::uint64_t> hash,
                                        std::int64_t n_q,
                                        std::int64_t n_k,
                                        std::span<const std::int64_t> offsets,
                                        std::span<const std::int64_t> cols) {
        const std::lock_guard lock(mutex_);
        const auto it = find_content(hash, n_q, n_k, offsets, cols);
        return it == list_.end() ? nullptr : hit(it);
    }

    /// Keeps `s` (or the equal support kept meanwhile) under `hash` and, if given, `key`.
    std::shared_ptr<const Support>
    keep(std::shared_ptr<const Support> s, std::optional<std::uint64_t> hash, const SpecKey* key) {
        std::list<Entry> dropped; // freed after the lock is released
        const std::lock_guard lock(mutex_);
        ++stats_.misses;
        if (capacity_ == 0)
            return s;
        auto it = find_content(hash, s->n_q(), s->n_k(), s->row_offsets(), s->col_indices());
        if (it == list_.end()) {
            list_.push_front(Entry{std::move(s), hash, {}});
            it = list_.begin();
        } else {
            list_.splice(list_.begin(), list_, it);
        }
        if (key != nullptr) {
            it->specs.push_back(*key);
            trim_family(*key, dropped);
        }
        trim();
        return list_.front().support;
    }

    void count_miss() {
        const std::lock_guard lock(mutex_);
        ++stats_.misses;
    }

    [[nodiscard]] bool enabled() {
        const std::lock_guard lock(mutex_);
        return capacity_ > 0;
    }

    Stats stats() {
        const std::lock_guard lock(mutex_);
        Stats s = stats_;
        s.entries = list_.size();
        s.capacity = capacity_;
        s.family_plans = detail::family_plans().load();
        return s;
    }

    void set_capacity(std::size_t n) {
        const std::lock_guard lock(mutex_);
        capacity_ = n;
        trim();
    }

    void clear() {
        const std::lock_guard lock(mutex_);
        list_.clear();
        families_.clear();
        stats_ = {};
        detail::family_plans() = 0;
    }

    /// The family of `spec` at this shape (any seed), made when there is none; at most
    /// capacity of them, the least recently used dropped (a support keeps its own).
    std::shared_ptr<SupportFamily>
    family(const std::string& spec, std::int64_t n_q, std::int64_t n_k) {
        const std::lock_guard lock(mutex_);
        const FamilyKey key{spec, n_q, n_k};
        for (auto it = families_.begin(); it != families_.end(); ++it)
            if (it->first == key) {
                families_.splice(families_.begin(), families_, it);
                return families_.front().second;
            }
        families_.emplace_front(key, std::make_shared<SupportFamily>());
        while (families_.size() > capacity_)
            families_.pop_back();
        return families_.front().second;
    }

    /// Drops every entry (counted as evictions), freed after the lock is released, and then
    /// the index arrays they gave back: memory pressure (require_memory). A fresh mask every
    /// step fills the cache with supports no call will find again (random:0.02 at N = 16384:
    /// tens of MiB each with its transpose and plans), and memory kept for speed must never
    /// make a call fail.
    void release() noexcept {
        std::list<Entry> dropped;
        std::list<std::pair<FamilyKey, std::shared_ptr<SupportFamily>>> families;
        {
            const std::lock_guard lock(mutex_);
            stats_.evictions += list_.size();
            dropped.swap(list_);
            families.swap(families_);
        }
        dropped.clear();
        detail::release_index_arrays();
    }

private:
    using Iterator = std::list<Entry>::iterator;

    /// The entry with this content: hashes compared where both are known, then the shape,
    /// the pair count and the arrays.
    Iterator find_content(std::optional<std::uint64_t> hash,
                          std::int64_t n_q,
                          std::int64_t n_k,
                          std::span<const std::int64_t> offsets,
                          std::span<const std::int64_t> cols) {
        for (auto it = list_.begin(); it != list_.end(); ++it) {
            const Support& s = *it->support;
            if (it->hash && hash && *it->hash != *hash)
                continue;
            if (s.n_q() == n_q && s.n_k() == n_k &&
                s.z_qk() == static_cast<std::int64_t>(cols.size()) &&
                std::ranges::equal(s.row_offsets(), offsets) &&
                std::ranges::equal(s.col_indices(), cols))
                return it;
        }
        return list_.end();
    }

    std::shared_ptr<const Support> hit(Iterator it) {
        ++stats_.hits;
        list_.splice(list_.begin(), list_, it);
        return list_.front().support;
    }

    /// Moves to `dropped` the structures of key's family (its spec and shape, any seed) past the
    /// kFamilyKept most recently used: a spec drawn with a new seed every step (a mask per
    /// training step) would fill the cache with structures no call finds again, and hold their
    /// index arrays, which the next structure's build reuses once they are let go
    /// (index_pool.hpp) instead of having fresh pages faulted in and zeroed (a quarter of
    /// bigbird:64:2:3's drawn step at N = 16384).
    void trim_family(const SpecKey& key, std::list<Entry>& dropped) {
        std::size_t seen = 0;
        for (auto it = list_.begin(); it != list_.end();) {
            const bool same = std::ranges::any_of(it->specs, [&](const SpecKey& k) {
                return k.spec == key.spec && k.n_q == key.n_q && k.n_k == key.n_k;
            });
            auto next = std::next(it);
            if (same && ++seen > kFamilyKept) {
                dropped.splice(dropped.end(), list_, it);
                ++stats_.evictions;
            }
            it = next;
        }
    }

    void trim() {
        while (list_.size() > capacity_) {
            list_.pop_back();
            ++stats_.evictions;
        }
    }

    std::mutex mutex_;
    std::list<Entry> list_;
    std::list<std::pair<FamilyKey, std::shared_ptr<SupportFamily>>> families_; ///< MRU first
    std::size_t capacity_;
    Stats stats_;
};

Cache& cache() {
    // never destroyed, as the release registered with it outlives statics
    static Cache* const c = [] {
        auto* made = new Cache();
        on_memory_pressure([] { cache().release(); });
        return made;
    }();
    return *c;
}

std::uint64_t hash_part(std::span<const std::int64_t> x, std::uint64_t seed) {
    constexpr std::uint64_t kOdd = 0x9fb21c651e98df25ULL;
    std::uint64_t h[4] = {seed, seed ^ 1U, seed ^ 2U, seed ^ 3U};
    const std::size_t n = x.size(), whole = n - n % 4;
    for (std::size_t i = 0; i < whole; i += 4)
        for (std::size_t l = 0; l < 4; ++l)
            h[l] = (h[l] ^ static_cast<std::uint64_t>(x[i + l])) * kOdd;
    for (std::size_t i = whole; i < n; ++i)
        h[0] = (h[0] ^ static_cast<std::uint64_t>(x[i])) * kOdd;
    std::uint64_t out = detail::mix64(n);
    for (const std::uint64_t v : h)
        out = detail::mix64(out ^ v);
    return out;
}

/// The words in parts of kHashPart, each hashed with its index (in parallel), the parts'
/// hashes folded in order: the same value for every thread count.
std::uint64_t hash_words(std::span<const std::int64_t> x, std::uint64_t seed) {
    constexpr std::size_t kHashPart = std::size_t{1} << 16;
    const std::size_t parts = (x.size() + kHashPart - 1) / kHashPart;
    std::vector<std::uint64_t> part(parts);
    parallel_for_tiles(static_cast<std::int64_t>(parts), [&](std::int64_t t, int) {
        const auto u = static_cast<std::size_t>(t);
        part[u] = hash_part(x.subspan(u * kHashPart, std::min(kHashPart, x.size() - u * kHashPart)),
                            detail::mix64(seed ^ u));
    });
    std::uint64_t out = detail::mix64(seed ^ x.size());
    for (const std::uint64_t v : part)
        out = detail::mix64(out ^ v);
    return out;
}

} // namespace

std::uint64_t content_hash(std::int64_t n_q,
                           std::int64_t n_k,
                           std::span<const std::int64_t> row_offsets,
                           std::span<const std::int64_t> col_indices) {
    const std::uint64_t shape = detail::mix64(static_cast<std::uint64_t>(n_q) ^
                                              detail::mix64(static_cast<std::uint64_t>(n_k)));
    return hash_words(col_indices, hash_words(row_offsets, shape));
}

std::shared_ptr<const Support>
pattern(std::string_view spec, std::int64_t n_q, std::int64_t n_k, std::uint64_t seed) {
    Cache& c = cache();
    if (!c.enabled()) {
        c.count_miss();
        return std::make_shared<const Support>(parse_pattern(spec, n_q, n_k, seed));
    }
    const bool by_spec = spec.find("file:") == std::string_view::npos;
    const SpecKey key{std::string(spec), n_q, n_k, seed};
    if (by_spec)
        if (auto s = c.find(key))
            return s;
    auto s = std::make_shared<const Support>(parse_pattern(spec, n_q, n_k, seed));
    if (by_spec) { // found again by its spec; a content lookup compares it without a hash
        s->join_family(c.family(key.spec, n_q, n_k));
        return c.keep(std::move(s), std::nullopt, &key);
    }
    const std::uint64_t h = content_hash(n_q, n_k, s->row_offsets(), s->col_indices());
    if (auto kept = c.find(h, n_q, n_k, s->row_offsets(), s->col_indices()))
        return kept;
    return c.keep(std::move(s), h, nullptr);
}

std::shared_ptr<const Support> csr(std::int64_t n_q,
                                   std::int64_t n_k,
                                   std::span<const std::int64_t> row_offsets,
                                   std::span<const std::int64_t> col_indices) {
    Cache& c = cache();
    const bool on = c.enabled();
    const std::uint64_t h = on ? content_hash(n_q, n_k, row_offsets, col_indices) : 0;
    if (on)
        if (auto s = c.find(h, n_q, n_k, row_offsets, col_indices))
            return s;
    auto s = std::make_shared<const Support>(
        n_q,
        n_k,
        std::vector<std::int64_t>(row_offsets.begin(), row_offsets.end()),
        std::vector<std::int64_t>(col_indices.begin(), col_indices.end()));
    return c.keep(std::move(s), h, nullptr);
}

std::shared_ptr<const Support> intern(Support support) {
    Cache& c = cache();
    const std::uint64_t h =
        content_hash(support.n_q(), support.n_k(), support.row_offsets(), support.col_indices());
    if (auto s =
            c.find(h, support.n_q(), support.n_k(), support.row_offsets(), support.col_indices()))
        return s;
    return c.keep(std::make_shared<const Support>(std::move(support)), h, nullptr);
}

Stats stats() {
    return cache().stats();
}

std::size_t capacity() {
    return cache().stats().capacity;
}

void set_capacity(std::size_t n) {
    cache().set_capacity(n);
}

void clear() {
    cache().clear();
}

} // namespace ioattn::sparse::support_cache
