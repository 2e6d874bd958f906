// ioattn::io_cost_decode, decode_lower_bound, flop_count_decode: the decode schedule's exact I/O
// (docs/design.md section 15), its compulsory traffic and its arithmetic, from the plan alone.
// Per (sequence b, kv head) with R = group_rows(), v_b = visible_rows(b) (len_b without a
// window or pattern; under a pattern, the rows some new token sees), c_b = ceil(v_b / C):
//   reads  = c_b R d + v_b (d + d_v) + [c_b > 1] c_b R (d_v + 2)
//   writes = R (d_v + 1) + [c_b > 1] c_b R (d_v + 2)
//   peak   = the chunk task's resident words if any sequence has a chunk, the merge's if any
//            has none or several (decode/decode_detail.hpp)
// Lower bound: v_b (d + d_v) + [v_b > 0] R d reads and R (d_v + 1) writes.

#include "decode/decode_detail.hpp"

#include <ioattn/decode.hpp>

#include <algorithm>
#include <cstdint>

namespace ioattn {

IoReport io_cost_decode(const DecodePlan& plan) {
    const DecodeShape& s = plan.shape;
    const std::int64_t r = plan.group_rows(), d = s.d, d_v = s.d_v;
    IoReport io;
    bool chunked = false, merged = false;
    for (std::int64_t b = 0; b < s.batch; ++b) {
        const std::int64_t rows = plan.visible_rows(b), c = plan.chunks(b);
        io.reads += s.kv_heads * (c * r * d + rows * (d + d_v));
        io.writes += s.kv_heads * r * (d_v + 1);
        if (c > 1) {
            io.reads += s.kv_heads * c * r * (d_v + 2);
            io.writes += s.kv_heads * c * r * (d_v + 2);
        }
        chunked = chunked || c > 0;
        merged = merged || c != 1;
    }
    if (chunked)
        io.peak = sparse::detail::decode_chunk_footprint(plan);
    if (merged)
        io.peak = std::max(io.peak, sparse::detail::decode_merge_footprint(plan));
    return io;
}

IoReport decode_lower_bound(const DecodePlan& plan) {
    const DecodeShape& s = plan.shape;
    const std::int64_t r = plan.group_rows();
    IoReport io;
    for (std::int64_t b = 0; b < s.batch; ++b) {
        const std::int64_t rows = plan.visible_rows(b);
        io.reads += s.kv_heads * (rows * (s.d + s.d_v) + (rows > 0 ? r * s.d : 0));
        io.writes += s.kv_heads * r * (s.d_v + 1);
    }
    return io;
}

double flop_count_decode(const DecodePlan& plan) {
    const DecodeShape& s = plan.shape;
    double pairs = 0;
    if (!plan.rows.empty()) { // a pattern: each token's own rows
        for (const DecodeRows& r : plan.rows)
            pairs += static_cast<double>(r.index.size()) * static_cast<double>(s.heads);
        return 2.0 * pairs * static_cast<double>(s.d + s.d_v);
    }
    for (std::int64_t b = 0; b < s.batch; ++b) {
        const std::int64_t len = s.kv_lens[static_cast<std::size_t>(b)];
        if (len == 0)
            continue;
        for (std::int64_t t = 0; t < s.n_new; ++t) { // token t sees len - n_new + t + 1 rows
            const std::int64_t seen = len - s.n_new + t + 1;
            pairs += static_cast<double>(s.window > 0 ? std::min(seen, s.window) : seen) *
                     static_cast<double>(s.heads);
        }
    }
    return 2.0 * pairs * static_cast<double>(s.d + s.d_v);
}

} // namespace ioattn
