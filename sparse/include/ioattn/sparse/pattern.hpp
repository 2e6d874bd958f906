#pragma once
/// Pattern builders for the support Omega, their union and intersection, and the spec strings
/// of `ioattn --pattern SPEC` (docs/design.md sections 6.1 and 13).
///
/// Alignment: as for the dense causal mask, query i sits at position i' = i + (n_k - n_q) of
/// the key sequence (bottom-right aligned), so with n_q > n_k the first rows have i' < 0 and
/// with n_q < n_k the queries are the last n_q positions (decode: n_q = 1). Every builder
/// accepts n_q, n_k >= 0 and throws InvalidArgument naming itself and the bad value otherwise.
/// Builders are serial; random ones draw from a generator seeded per (seed, row) or
/// (seed, row block), so the same seed gives the same support on any thread count; the
/// generator is ioattn's own (no std:: distributions), so only pattern_random's log1p could
/// differ between C libraries.
/// Cost: O(n_q + Z_QK) unless stated.

#include <ioattn/sparse/support.hpp>

#include <cstdint>
#include <span>
#include <string_view>

namespace ioattn::sparse {

/// Every pair: n_q * n_k.
Support pattern_dense(std::int64_t n_q, std::int64_t n_k);

/// Causal, bottom-right aligned: j visible to i iff j <= i'.
Support pattern_causal(std::int64_t n_q, std::int64_t n_k);

/// Sliding window of half-width w >= 0: |i' - j| <= w.
Support pattern_window(std::int64_t n_q, std::int64_t n_k, std::int64_t w);

/// Causal sliding window, w >= 0: 0 <= i' - j <= w.
Support pattern_causal_window(std::int64_t n_q, std::int64_t n_k, std::int64_t w);

/// Dilated window, w >= 0, s >= 1: |i' - j| <= w*s and (i' - j) divisible by s
/// (2w + 1 keys per interior row, every s-th key within half-width w*s).
Support pattern_dilated(std::int64_t n_q, std::int64_t n_k, std::int64_t w, std::int64_t s);

/// Global tokens, g >= 0 (Longformer): keys j < g are seen by every query, and a query whose
/// position is global (0 <= i' < g) sees every key. Combine with a window by union.
Support pattern_global(std::int64_t n_q, std::int64_t n_k, std::int64_t g);

/// Sparse Transformer "fixed" pattern with c = 1 (Child et al. 2019, section 4.2), causal:
/// j visible to i iff j <= i' and (floor(j / l) == floor(i' / l) or j mod l == l - 1), i.e. the
/// causal part of i's own block of l keys plus the last key of every earlier block (the
/// "summary" columns). l >= 1.
Support pattern_strided(std::int64_t n_q, std::int64_t n_k, std::int64_t l);

/// BigBird: pattern_window(w) + pattern_global(g) + r keys per row drawn uniformly without
/// replacement from the keys the row does not already see (all of them if fewer remain).
/// w, g, r >= 0. Cost O(Z_QK + n_q r log r).
Support pattern_bigbird(std::int64_t n_q,
                        std::int64_t n_k,
                        std::int64_t w,
                        std::int64_t g,
                        std::int64_t r,
                        std::uint64_t seed);

/// Random block-sparse: the grid of b x b blocks anchored at (0, 0) (edge blocks clipped),
/// each block kept independently with probability density. b >= 1, density in [0, 1].
/// Cost O(n_q + Z_QK + ceil(n_q/b) ceil(n_k/b)).
Support pattern_block(
    std::int64_t n_q, std::int64_t n_k, std::int64_t b, double density, std::uint64_t seed);

/// Each pair kept independently with probability density in [0, 1] (geometric skipping, so
/// the cost is O(n_q + Z_QK), not O(n_q n_k)).
Support pattern_random(std::int64_t n_q, std::int64_t n_k, double density, std::uint64_t seed);

/// BigBird's block-sparse pattern as the paper and the Hugging Face implementation build it
/// (block_size 64, 3 sliding, 2 global, 3 random blocks there): keys in blocks of b (the last
/// clipped), query i in block row floor(i' / b). A block row sees the w key blocks around its
/// own (from qb - (w-1)/2 to qb + w/2), the g global key blocks (the first ceil(g/2) and the
/// last floor(g/2)), and r more key blocks drawn uniformly without replacement from the rest
/// (all of them if fewer remain), one draw per block row; a global block row sees every key.
/// b >= 1; w, g, r >= 0. Cost O(n_q + Z_QK + blocks r log r).
Support pattern_bigbird_block(std::int64_t n_q,
                              std::int64_t n_k,
                              std::int64_t b,
                              std::int64_t w,
                              std::int64_t g,
                              std::int64_t r,
                              std::uint64_t seed);

/// A graph with a power-law degree distribution (Chung-Lu, exponent 2.5, as the neighbourhoods
/// of graph attention): pair (i, j) kept independently with probability min(1, c w_i u_j),
/// weights (rank + 1)^(-2/3) over seeded random ranks of the rows and of the keys (hubs at
/// random indices), c such that the expected pairs are avg_degree * n_q. avg_degree > 0
/// (finite); avg_degree >= n_k gives every pair. Cost O(n_q log n_k + Z_QK log Z_QK).
Support pattern_powerlaw(std::int64_t n_q, std::int64_t n_k, double avg_degree, std::uint64_t seed);

/// Packed variable-length sequences (a batch given by its lengths; cu_seqlens are their prefix
/// sums): the sequences lie end to end on both axes, n_q = n_k = the lengths' sum, and query i
/// of the sequence [s, e) sees the keys j in [s, e) only (block diagonal), with j <= i when
/// `causal`, and |i - j| <= window (causal: 0 <= i - j <= window) when window >= 0 (window < 0:
/// the whole sequence). Lengths >= 0 (empty sequences allowed), at least one. Throws
/// InvalidArgument when n_q != n_k, a length is negative, or the lengths do not sum to n_q,
/// naming the sum.
Support pattern_varlen(std::int64_t n_q,
                       std::int64_t n_k,
                       std::span<const std::int64_t> lengths,
                       bool causal = false,
                       std::int64_t window = -1);

/// a union b. Throws InvalidArgument if the shapes differ. O(n_q + Z_a + Z_b).
Support union_of(const Support& a, const Support& b);

/// a intersection b. Throws InvalidArgument if the shapes differ. O(n_q + Z_a + Z_b).
Support intersection_of(const Support& a, const Support& b);

/// Builds the support a spec string names, for n_q queries and n_k keys.
///
/// Terms: `dense`, `causal`, `window:W`, `causal-window:W`, `dilated:W:S`, `global:G`,
/// `bigbird:W:G:R`, `bigbird-block:B:W:G:R`, `strided:L`, `block:B:DENSITY`, `random:DENSITY`,
/// `powerlaw:AVG_DEGREE`, `varlen:L1,L2,...`, `causal-varlen:L1,L2,...`,
/// `window-varlen:W:L1,L2,...`, `causal-window-varlen:W:L1,L2,...` (pattern_varlen: packed
/// sequences of lengths L1, L2, ..., which must sum to n_q = n_k), `file:PATH` (a Matrix
/// Market coordinate file, see read_matrix_market; it must be n_q x n_k; PATH runs to the next
/// `+`, `&`, `(` or `)`, so it cannot contain those). Integers are decimal, DENSITY a decimal
/// number in [0, 1], AVG_DEGREE a decimal number > 0.
/// Operators: `+` is union, `&` is intersection; `&` binds tighter than `+` (as * over +),
/// both associate left, and parentheses group: `window:4+global:2&causal` is
/// window:4 + (global:2 & causal). Spaces around terms and operators are ignored.
/// Seeds: the k-th random term of the spec (k = 0, 1, ...) uses seed for k = 0 and a seed
/// derived from (seed, k) after, so `random:0.1` alone equals pattern_random(.., seed).
///
/// Throws InvalidArgument naming the offending token: unknown name, wrong number of
/// arguments, an argument that is not a number or is out of range, an empty term, an
/// unbalanced parenthesis, parentheses nested deeper than 256, a file that cannot be read or
/// has the wrong shape. Throws ResourceError when a term's support cannot fit in memory_limit().
Support
parse_pattern(std::string_view spec, std::int64_t n_q, std::int64_t n_k, std::uint64_t seed);

} // namespace ioattn::sparse
