// ioattn::decode_reference: one sequence's decode step computed by ioattn::attention (the fused
// forward) over its cached rows, packed: the oracle the decode schedule is checked against
// (the tests, `ioattn decode --check`). Token t of the n_new new tokens sits at position
// p = len - n_new + t and sees the cached positions j <= p, and with a window of W keys only
// j > p - W: the attention grammar's causal-window:W-1 on an n_new x len problem; under a
// pattern beyond windows, the support decode_pattern_rows builds.
// Tests: tests/decode/decode_test.cpp

#include "decode/decode_detail.hpp"
#include "fail.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/decode.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace ioattn {

template <typename T>
std::pair<std::vector<T>, std::vector<T>> decode_reference(
    const DecodeShape& shape, std::int64_t b, const T* q, const T* k, const T* v, int threads) {
    constexpr const char* kWhere = "ioattn::decode_reference";
    if (b < 0 || b >= static_cast<std::int64_t>(shape.kv_lens.size()))
        sparse::detail::fail(kWhere, "sequence ", b, " of ", shape.kv_lens.size());
    const std::int64_t len = shape.kv_lens[static_cast<std::size_t>(b)];
    const std::int64_t d_v = shape.d_v > 0 ? shape.d_v : shape.d;
    std::vector<T> o(static_cast<std::size_t>(shape.heads * shape.n_new * d_v), T(0));
    std::vector<T> lse(static_cast<std::size_t>(shape.heads * shape.n_new),
                       -std::numeric_limits<T>::infinity());
    if (len == 0)
        return {std::move(o), std::move(lse)};
    Problem p;
    p.heads = shape.heads;
    p.kv_heads = shape.kv_heads;
    p.n_q = shape.n_new;
    p.n_k = len;
    p.d = shape.d;
    p.d_v = d_v;
    p.causal = true; // bottom-right aligned: query t sees j <= len - n_new + t
    auto a = ForwardArgs<T>::packed(p, q, k, v, o.data(), lse.data());
    AttentionOptions opts;
    opts.schedule = Schedule::fused;
    opts.threads = threads;
    opts.where = kWhere;
    Structure<T> st;
    sparse::Support support;
    DecodeShape s = shape;
    sparse::detail::resolve_window_spec(s, kWhere);
    if (!s.pattern.empty()) {
        support = decode_pattern_rows(s.pattern, s.n_new, len, s.pattern_seed, kWhere);
        st.support = &support;
        a.problem.causal = false;
    } else if (s.window > 0) {
        support = sparse::pattern_causal_window(s.n_new, len, s.window - 1);
        st.support = &support;
        a.problem.causal = false;
    }
    attention(a, st, opts);
    return {std::move(o), std::move(lse)};
}

#define IOATTN_INSTANTIATE(T)                                                                      \
    template std::pair<std::vector<T>, std::vector<T>> decode_reference<T>(                        \
        const DecodeShape&, std::int64_t, const T*, const T*, const T*, int);
IOATTN_INSTANTIATE(float)
IOATTN_INSTANTIATE(double)
#undef IOATTN_INSTANTIATE

} // namespace ioattn
