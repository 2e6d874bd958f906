#pragma once
// Private helpers of the ring passes: the rectangles a causal mask cuts a block pair into (each
// fully visible or causal with the kernels' bottom-right alignment), the pieces the calling
// thread polls MPI between, views of row ranges, K/V block buffers, and the entry validation
// both passes share.

#include "channel.hpp"

#include <ioattn/dist/ring.hpp>
#include <ioattn/dist/sharding.hpp>
#include <ioattn/sparse/support.hpp>

#include <array>
#include <cstdint>
#include <vector>

/// X(T, C) for every pass type the distributed library compiles: float and double, and bf16
/// (storage; fp32 arithmetic), each timed (NullCounter) and counted (IoCounter).
#define IOATTN_DIST_FOR_EACH_PASS_TYPE(X)                                                          \
    X(float, NullCounter)                                                                          \
    X(float, IoCounter)                                                                            \
    X(double, NullCounter)                                                                         \
    X(double, IoCounter)                                                                           \
    X(bf16, NullCounter)                                                                           \
    X(bf16, IoCounter)

namespace ioattn::dist::detail {

/// Query rows [q0, q1) against keys [k0, k1) of a block pair: every pair visible, or causal
/// with offset (k1 - k0) - (q1 - q0) (the kernels' bottom-right alignment).
struct Rect {
    std::int64_t q0 = 0;
    std::int64_t q1 = 0;
    std::int64_t k0 = 0;
    std::int64_t k1 = 0;
    bool causal = false;
};

/// At most two rectangles covering exactly the visible pairs of query rows [0, m) against keys
/// [0, n), where query i sees key j iff j <= i + t (causal) or always. Rows that see no key get
/// no rectangle; with a causal mask, rows [i0, i1) that see a prefix of at most n keys form a
/// causal rectangle with keys [0, i1 + t), and the rows after them, which see all n, a full one
/// (so a diagonal block is one causal call).
struct Rects {
    std::array<Rect, 2> rect{};
    int count = 0;
};

Rects rectangles(std::int64_t m, std::int64_t n, std::int64_t t, bool causal);

/// Rows per piece of kernel work over `other` rows of the opposite side: about `flops` of
/// work, a multiple of tiling.rows, at least tiling.rows. A function of the shapes only, so the
/// results do not depend on timing or the thread count.
std::int64_t
piece_rows(const Problem& problem, const Tiling& tiling, std::int64_t other, double flops);

/// Rows [begin, begin + count) of a view.
template <typename T>
TensorView<T> rows_of(const TensorView<T>& v, std::int64_t begin, std::int64_t count) {
    TensorView<T> r = v;
    r.data = v.data + begin * v.stride_row;
    r.rows = count;
    r.extent = v.extent - begin * v.stride_row;
    return r;
}

/// A K/V block of `rows` rows packed in one buffer: K [batch][kv_heads][rows][d], then V
/// [batch][kv_heads][rows][d_v] (one message); also the layout of the dK, dV sums.
template <typename Scalar>
struct KvBlock {
    TensorView<Scalar> k;
    TensorView<Scalar> v;

    static KvBlock over(Scalar* data, const Problem& p, std::int64_t rows) {
        const std::int64_t k_words = p.batch * p.kv_heads * rows * p.d;
        return {TensorView<Scalar>::packed(data, p.batch, p.kv_heads, rows, p.d),
                TensorView<Scalar>::packed(data + k_words, p.batch, p.kv_heads, rows, p.d_v)};
    }
};

/// Copies a view into one of the same shape (parallel over rows), converting each element:
/// float and double as they are, bf16 -> float exactly, float -> bf16 rounded to nearest even.
template <typename From, typename To>
void copy_view(const TensorView<const From>& from, const TensorView<To>& to);

/// to += from, element-wise over views of the same shape (parallel over rows).
template <typename Scalar>
void add_view(const TensorView<const Scalar>& from, const TensorView<Scalar>& to);

/// Sets every element of a view to `value`.
template <typename Scalar>
void fill_view(const TensorView<Scalar>& to, Scalar value);

/// Log-sum-exp merge of a partial (O_p, L_p) into the running (O, L) of the same rows:
/// L' = log(e^L + e^L_p), O' = e^(L - L') O + e^(L_p - L') O_p (in double). L = -inf (nothing
/// yet) takes the partial as it is.
template <typename Scalar>
void merge_partial(const TensorView<const Scalar>& o_part,
                   const TensorView<const Scalar>& lse_part,
                   const TensorView<Scalar>& o,
                   const TensorView<Scalar>& lse);

/// The validated shape of one distributed pass on this rank.
struct PassShape {
    Problem problem; ///< global, resolved
    Sharding queries;
    Sharding keys;
    int rank = 0;
};

/// Validates a distributed pass collectively (see ring.hpp): MPI state, the problem, the
/// shardings, the tiling against the local block problem, the views (d_o, d_q, d_k, d_v only
/// when `backward`), message sizes, and that every rank passed the same problem, tiling and
/// options. With a `support` (the sparse exchange): no causal flag, the support's shape, and the
/// same support on every rank (its size and a hash of its structure).
template <typename Scalar>
PassShape validate_pass(MPI_Comm comm,
                        const ShardForwardArgs<Scalar>& args,
                        const ShardBackwardArgs<Scalar>* backward,
                        const sparse::Support* support,
                        const Tiling& tiling,
                        const MemoryModel& memory,
                        const PassOptions& options,
                        const char* where);

/// Slots of a ring pass's K/V rotation in its Channel.
inline constexpr int kRotateReceive = 0;
inline constexpr int kRotateSend = 1;

/// Posts step `step` of the K/V rotation (none on the last step): receive the block of rank
/// r - step - 1 from r - 1 into `next`, send `current` (the block of r - step) to r + 1. W words
/// per key row. Wait with channel.wait(kRotateReceive) and (kRotateSend).
template <typename Scalar>
void post_rotation(
    Channel& channel, const PassShape& s, int step, Scalar* current, Scalar* next, int tag) {
    const int ranks = s.keys.ranks();
    if (step >= ranks - 1)
        return;
    const std::int64_t w = kv_row_words(s.problem);
    const int incoming = (s.rank - step - 1 + 2 * ranks) % ranks;
    const int held = (s.rank - step + ranks) % ranks;
    channel.receive(kRotateReceive, next, s.keys.rows(incoming) * w, channel.prev(), tag);
    channel.send(kRotateSend, current, s.keys.rows(held) * w, channel.next(), tag);
}

/// The local problem of rows_q query rows against rows_k key rows (no mask).
Problem local_problem(const Problem& global, std::int64_t rows_q, std::int64_t rows_k);

} // namespace ioattn::dist::detail
