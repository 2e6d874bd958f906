#pragma once
// The large index arrays of freed supports (their columns, transposes, parts), kept for the
// next support built: a loop that builds a fresh mask every step then writes its columns on
// pages already mapped, where each step's arrays (above glibc's 32 MiB mmap threshold) came
// back from the system as fresh pages the kernel faulted in and zeroed (a quarter of a
// window:256 mask's build at N = 16384, its 64 MiB of columns).
// Process-wide and thread-safe (a support may be freed on any thread); arrays of at least
// kMinWords only, at most kMaxArrays and limit bytes kept (IOATTN_INDEX_POOL_MB, read at first
// use; ioattn::sparse::set_index_pool_limit), the largest kept when full.
// Tests: tests/sparse/index_pool_whitebox_test.cpp

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ioattn::sparse::detail {

/// Arrays shorter than this are left to the allocator (4 MiB: the size index_words advises to
/// huge pages).
inline constexpr std::int64_t kPoolMinWords = std::int64_t{1} << 19;

/// A kept array with room for between n and 2n words, its size set to n, its words as its last
/// support left them (past them, zeros): its taker writes every word (index_words); an empty
/// vector when none is kept (n < kPoolMinWords: always).
std::vector<std::int64_t> take_index_array(std::int64_t n);

/// Keeps v's storage for take_index_array while the pool has room and v is an array
/// index_words allocated (noted by note_fresh_array: its pages advised to huge pages), else
/// leaves it to its owner to free; v is left empty when kept. Never throws (a support's
/// destructor calls it). A copy of a support (4 KiB pages) reused for the columns of
/// random:0.02 made its fresh step 1.07x slower.
void give_index_array(std::vector<std::int64_t>& v) noexcept;

/// Notes an array index_words allocated and advised (the newest kFreshNoted are remembered).
void note_fresh_array(const std::int64_t* data);

/// Frees every kept array (what memory pressure does; the plan cache calls it after dropping
/// its entries, whose arrays the pool would otherwise keep).
void release_index_arrays() noexcept;

} // namespace ioattn::sparse::detail
