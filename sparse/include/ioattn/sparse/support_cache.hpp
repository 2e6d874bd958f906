#pragma once
/// The plan cache: supports kept by content, so that a mask given again (the same spec string
/// and shape, or the same CSR arrays, e.g. a scipy matrix rebuilt every step) reuses the
/// support built before and every plan kept with it (Support::cached_block_keys,
/// cached_value: the variant planner's plans), instead of building and planning again.
///
/// One process-wide least-recently-used cache of at most capacity() supports, shared by every
/// thread (a mutex; lookups hold it, builds do not). Entries are found by the spec string with
/// its shape and seed (specs naming a file are never found by spec, since the file may change),
/// or by content: a 64-bit hash of the shape, row offsets and column indices, confirmed by
/// comparing the arrays, so a hash collision never returns another support (a support built
/// from a spec is not hashed: a content lookup compares its shape, pair count and arrays). A
/// lookup is O(capacity) plus O(n_q + Z_QK) to hash and compare content. Each entry holds its
/// support and its plans in memory (O(n_q + Z_QK) and more each) until it is evicted and its
/// last user lets it go. When a request for memory would be refused (ioattn::require_memory), every entry is
/// dropped first (ioattn::on_memory_pressure), so masks kept for reuse never make a call fail.
///
/// A support built from a spec joins its family (Support::family): the spec and shape, whatever
/// the seed; at most capacity() families are kept, each with the variant planner's decisions
/// (at most 16) for the family's next structure. A seeded spec drawn afresh every step (a new
/// random mask per training step) is then planned by the decision taken for the first one: the
/// same tile height and split of its pairs (every pair through tiles, every pair element by
/// element, or a split priced at that height), built for its own pairs; a decision is taken
/// again when its structure's pair count is more than 5% off the first's. The cache keeps the
/// two most recently used structures of a family (a mask drawn every step is not asked for
/// again, and its freed arrays are the next one's: index_pool.hpp).
///
/// Capacity: the environment variable IOATTN_PLAN_CACHE_SIZE (a count >= 0) when the cache is
/// first used, else kDefaultCapacity; set_capacity changes it at any time; 0 turns the cache
/// off (every call builds its support afresh, as without it, and no family is kept).

#include <ioattn/sparse/support.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace ioattn::sparse::support_cache {

inline constexpr std::size_t kDefaultCapacity = 32;

/// The support of parse_pattern(spec, n_q, n_k, seed), from the cache when this spec, shape
/// and seed (or the same content) was built before; a miss builds it and keeps it. Throws what
/// parse_pattern throws (and keeps nothing).
std::shared_ptr<const Support>
pattern(std::string_view spec, std::int64_t n_q, std::int64_t n_k, std::uint64_t seed);

/// The kept support with this shape and CSR content when there is one (its plans with it),
/// else Support(n_q, n_k, row_offsets, col_indices) (validated as that constructor does, and
/// throwing what it throws), kept. The arrays are hashed and compared before anything is built.
std::shared_ptr<const Support> csr(std::int64_t n_q,
                                   std::int64_t n_k,
                                   std::span<const std::int64_t> row_offsets,
                                   std::span<const std::int64_t> col_indices);

/// The kept support equal to `support` when there is one, else `support` itself, kept.
std::shared_ptr<const Support> intern(Support support);

/// The content hash the cache files a support given as arrays under (shape, offsets, indices).
std::uint64_t content_hash(std::int64_t n_q,
                           std::int64_t n_k,
                           std::span<const std::int64_t> row_offsets,
                           std::span<const std::int64_t> col_indices);

/// Counts since the process started (or the last clear()).
struct Stats {
    std::size_t hits = 0;      ///< lookups answered from the cache
    std::size_t misses = 0;    ///< lookups that built a support
    std::size_t evictions = 0; ///< entries dropped for capacity
    std::size_t entries = 0;   ///< entries kept now
    std::size_t capacity = 0;  ///< the most entries kept
    /// plans made from a family's decision (Support::family): a structure drawn afresh from a
    /// spec already planned at its shape, with another seed
    std::size_t family_plans = 0;
};

Stats stats();

/// The most supports kept (see the file comment for the default).
std::size_t capacity();

/// Keeps at most n supports from now on, evicting the least recently used beyond n; 0 turns
/// the cache off.
void set_capacity(std::size_t n);

/// Drops every entry and family and zeroes the counts (the capacity stays).
void clear();

} // namespace ioattn::sparse::support_cache
