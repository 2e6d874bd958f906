// ioattn::decode, the merge: the chunks' partial softmax states combined in chunk order
// Per (sequence b, kv head g) with c_b chunks, for each of the R rows of the group:
//   c_b = 0 (an empty sequence): O = 0, L = -inf                              write R (d_v + 1)
//   c_b > 1: read the c_b partial states (O_c unnormalized, m_c, l_c; base 2) c_b R (d_v + 2)
//     m = max_c m_c; w_c = 2^(m_c - m); O = sum_c w_c O_c / sum_c w_c l_c
//     L = (m + log2 sum_c w_c l_c) ln 2                                      write R (d_v + 1)
//   (c_b = 1: the chunk wrote O and L itself.)
// Resident: one row's running state and one partial, 2 (d_v + 2) words.
// I/O: the partial terms of io_cost_decode. The sums run in chunk order, so the result does not
// depend on how the chunk phase was scheduled. A few hundred words per chunk against the chunk's
// C (d + d_v) cached words: compiled once, not per ISA target.
// Tests: tests/decode/decode_test.cpp

#include "decode/decode_detail.hpp"

#include <ioattn/decode.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ioattn::sparse::detail {

namespace {

/// Row r of (b, g) from its partial states (chunks c = 0 .. n - 1, task slots first + c).
template <typename Scalar>
void merge_row(const Scalar* partials,
               std::int64_t first,
               std::int64_t n,
               std::int64_t part_words,
               std::int64_t r,
               std::int64_t d_v,
               Scalar* out,
               Scalar* lse) {
    constexpr Scalar kNegInf = -std::numeric_limits<Scalar>::infinity();
    const auto state = [&](std::int64_t c) {
        return partials + (first + c) * part_words + r * (d_v + 2);
    };
    Scalar m = kNegInf;
    for (std::int64_t c = 0; c < n; ++c)
        m = std::max(m, state(c)[d_v]); // NaN states reach O through w_c O_c below
    const Scalar m_safe = m == kNegInf ? Scalar(0) : m;
    std::fill(out, out + d_v, Scalar(0));
    Scalar l = 0;
    for (std::int64_t c = 0; c < n; ++c) {
        const Scalar* s = state(c);
        const Scalar w = s[d_v] == m_safe ? Scalar(1) : std::exp2(s[d_v] - m_safe);
        l += w * s[d_v + 1];
        for (std::int64_t x = 0; x < d_v; ++x)
            out[x] += w * s[x];
    }
    if (l == 0) { // no chunk saw a key: O = 0
        std::fill(out, out + d_v, Scalar(0));
        *lse = kNegInf;
        return;
    }
    const Scalar inv = Scalar(1) / l;
    for (std::int64_t x = 0; x < d_v; ++x)
        out[x] *= inv;
    *lse = (m_safe + std::log2(l)) * Scalar(0.6931471805599453);
}

} // namespace

template <typename Scalar, typename Counter>
void decode_merge(const TensorView<Scalar>& o,
                  const TensorView<Scalar>& lse,
                  const DecodePlan& plan,
                  const Scalar* partials,
                  Counter& counter) {
    const DecodeShape& sh = plan.shape;
    const std::int64_t kv_heads = sh.kv_heads, group = sh.heads / kv_heads, n_new = sh.n_new;
    const std::int64_t r_all = plan.group_rows(), d_v = sh.d_v;
    const std::int64_t part_words = decode_partial_words(plan);
    const std::int64_t footprint = decode_merge_footprint(plan);
    parallel_for_counted(sh.batch * kv_heads, counter, [&](std::int64_t t, int, auto& io) {
        const std::int64_t b = t / kv_heads, g = t % kv_heads, n = plan.chunks(b);
        if (n == 1)
            return;
        io.acquire(footprint);
        const std::int64_t first = decode_task(plan, b, g, 0);
        for (std::int64_t c = 0; c < n; ++c)
            io.read({Operand::stats, first + c, 0, r_all, 0, d_v + 2});
        if constexpr (std::remove_reference_t<decltype(io)>::kComputes)
            for (std::int64_t r = 0; r < r_all; ++r) {
                const std::int64_t h = g * group + r / n_new, i = r % n_new;
                merge_row(partials, first, n, part_words, r, d_v, o.row(b, h, i), lse.row(b, h, i));
            }
        for (std::int64_t j = 0; j < group; ++j) {
            io.write({Operand::o, b * sh.heads + g * group + j, 0, n_new, 0, d_v});
            io.write({Operand::lse, b * sh.heads + g * group + j, 0, n_new, 0, 1});
        }
        io.release(footprint);
    });
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void decode_merge<Scalar, Counter>(const TensorView<Scalar>&,                         \
                                                const TensorView<Scalar>&,                         \
                                                const DecodePlan&,                                 \
                                                const Scalar*,                                     \
                                                Counter&);
IOATTN_FOR_EACH_SCALAR_COUNTER(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse::detail
