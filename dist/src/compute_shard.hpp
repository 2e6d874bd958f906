#pragma once
// The views a distributed pass computes on, in Accumulator<Scalar> (docs/design.md section 16).
// float and double: the caller's own views, nothing copied. bf16: fp32 copies of the query-side
// inputs (q; the backward's o and d_o), widened exactly, and fp32 outputs (o; d_q, d_k, d_v)
// that round_o / round_dq / round_dkv round into the caller's bf16 views once, to nearest even,
// after every ring step has been merged or summed: a partial never rounds. L is the caller's
// fp32 view throughout. K and V are not copied: they travel in the storage type (half the
// bytes of fp32 for bf16) and a pass widens each block it computes on (compute_block).
// Memory for bf16: 4 bytes per element of q, o (and d_o, d_q, d_k, d_v) of the rank's rows.
// Conversions are element-wise, parallel over rows: independent of the thread count.

#include <ioattn/dist/shard.hpp>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace ioattn::dist::detail {

template <typename Scalar>
class ComputeShard {
public:
    using Compute = Accumulator<Scalar>;
    static constexpr bool kWidened = !std::is_same_v<Scalar, Compute>;

    /// The forward's views of `f`; with `b` (the same call's backward args), the backward's too.
    ComputeShard(const ShardForwardArgs<Scalar>& f, const ShardBackwardArgs<Scalar>* b);
    ComputeShard(const ComputeShard&) = delete;
    ComputeShard& operator=(const ComputeShard&) = delete;

    /// q, o, lse in Compute (k, v: the caller's for float and double, empty for bf16).
    [[nodiscard]] const ShardForwardArgs<Compute>& forward() const { return args_; }

    /// The forward's views and d_o, d_q, d_k, d_v in Compute.
    [[nodiscard]] const ShardBackwardArgs<Compute>& backward() const { return args_; }

    /// Round the fp32 o (d_q; d_k and d_v) into the caller's bf16 views; nothing for float and
    /// double, whose views are the caller's.
    void round_o() const;
    void round_dq() const;
    void round_dkv() const;

private:
    std::vector<Compute> store_;
    ShardBackwardArgs<Compute> args_;
    ShardBackwardArgs<Scalar> caller_;
};

/// The `words` storage words of a K/V block at `wire` as Compute words: `wire` itself for float
/// and double; for bf16 widened exactly into `widened` (which holds at least `words`).
template <typename Scalar>
Accumulator<Scalar>*
compute_block(Scalar* wire, std::vector<Accumulator<Scalar>>& widened, std::int64_t words);

} // namespace ioattn::dist::detail
