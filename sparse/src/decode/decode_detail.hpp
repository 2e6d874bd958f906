#pragma once
// Private: the pieces of the decode entry point (decode/decode.cpp) compiled once: the checks
// of the views and the merge of the chunks' partial states.

#include <ioattn/decode.hpp>
#include <ioattn/view.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace ioattn::sparse::detail {

/// Words of one task's partial state: R rows of O (unnormalized), m and l.
inline std::int64_t decode_partial_words(const DecodePlan& plan) {
    return plan.group_rows() * (plan.shape.d_v + 2);
}

/// Words a chunk task holds: Q rows R d, a tile of cached rows kDecodeTile (d + d_v), O rows
/// R d_v, m and l 2R, the tile's scores R kDecodeTile.
inline std::int64_t decode_chunk_footprint(const DecodePlan& plan) {
    const std::int64_t r = plan.group_rows(), d = plan.shape.d, d_v = plan.shape.d_v;
    return r * d + kDecodeTile * (d + d_v) + r * d_v + 2 * r + r * kDecodeTile;
}

/// Words the merge of one (sequence, kv head) holds: one row's running state and one partial.
inline std::int64_t decode_merge_footprint(const DecodePlan& plan) {
    return 2 * (plan.shape.d_v + 2);
}

/// The task of chunk c of (sequence b, kv head g) in the order the chunk phase numbers them.
inline std::int64_t
decode_task(const DecodePlan& plan, std::int64_t b, std::int64_t g, std::int64_t c) {
    return plan.first_chunk[static_cast<std::size_t>(b)] * plan.shape.kv_heads +
           g * plan.chunks(b) + c;
}

/// The keys of a window spec (decode_window_of: 0 for dense and causal, W + 1 for window:W
/// and causal-window:W); nullopt for any other spec. Throws for a window spec with a bad W.
std::optional<std::int64_t> decode_window_spec(std::string_view spec, std::string_view where);

/// A window spec in s.pattern made s.window (the pattern cleared); any other pattern kept.
/// Throws InvalidArgument naming `where` when s.window is set beside a pattern that is not the
/// same window (or "dense", "causal").
void resolve_window_spec(DecodeShape& s, std::string_view where);

/// The shape of the views (kv_lens read from args), checked as decode() documents. Throws
/// InvalidArgument naming `where`. With `shape_only`, data pointers may be null.
template <typename Scalar, typename Cache>
DecodeShape
validate_decode(const DecodeArgs<Scalar, Cache>& args, std::string_view where, bool shape_only);

/// decode/decode_merge.cpp: for each (sequence, kv head) of zero chunks, O = 0 and L = -inf;
/// of more than one, O and L from its chunks' partial states combined in chunk order.
template <typename Scalar, typename Counter>
void decode_merge(const TensorView<Scalar>& o,
                  const TensorView<Scalar>& lse,
                  const DecodePlan& plan,
                  const Scalar* partials,
                  Counter& counter);

} // namespace ioattn::sparse::detail
