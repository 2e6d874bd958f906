#pragma once
/// The shape of one attention problem: batch x heads independent softmax(scale*Q K^T + mask) V.

#include <cmath>
#include <cstdint>
#include <iosfwd>
#include <string_view>

namespace ioattn {

/// Shape and options of an attention problem. Fields left at 0 take their documented default
/// in `resolved()`: kv_heads = heads, d_v = d, scale = 1/sqrt(d).
///
/// Causal masking is bottom-right aligned: query i may see key j iff j <= i + (n_k - n_q), so
/// with n_q > n_k the first n_q - n_k query rows see nothing (output 0, L = -inf).
struct Problem {
    std::int64_t batch = 1;
    std::int64_t heads = 1;
    std::int64_t kv_heads = 0; ///< 0: same as heads. Must divide heads (grouped-query attention).
    std::int64_t n_q = 0;
    std::int64_t n_k = 0;
    std::int64_t d = 0;
    std::int64_t d_v = 0; ///< 0: same as d
    bool causal = false;
    double scale = 0.0; ///< 0: 1/sqrt(d)

    /// A copy with the defaults filled in, validated. Throws InvalidArgument naming `where`
    /// and the bad value: non-positive sizes, heads not divisible by kv_heads, non-finite or
    /// negative scale; ResourceError when an operand (Q, K, V, O) or the score matrix
    /// (batch * heads * n_q * n_k) would have 2^62 elements or more, which no machine holds and
    /// whose indices would overflow.
    [[nodiscard]] Problem resolved(std::string_view where = "ioattn::Problem") const;

    /// Validates a problem whose defaults are already filled (throws as resolved()).
    void validate(std::string_view where = "ioattn::Problem") const;

    /// batch * heads.
    [[nodiscard]] std::int64_t batch_heads() const { return batch * heads; }

    /// Query heads that share one key/value head.
    [[nodiscard]] std::int64_t group() const { return heads / kv_heads; }

    /// Offset of the causal diagonal: key j is visible to query i iff j <= i + causal_offset().
    [[nodiscard]] std::int64_t causal_offset() const { return n_k - n_q; }

    /// Number of keys visible to query row i (0 <= i < n_q).
    [[nodiscard]] std::int64_t visible_keys(std::int64_t i) const;

    /// Number of allowed (query, key) pairs per head: n_q*n_k, or the causal count.
    [[nodiscard]] std::int64_t allowed_pairs() const;

    bool operator==(const Problem&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Problem& p);

} // namespace ioattn
