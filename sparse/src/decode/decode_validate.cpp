// ioattn::decode, the checks of its views: shapes, strides, extents, outputs overlapping inputs,
// lengths against the capacity or the block table, and block indices against num_blocks. One
// pass over the lengths and the used part of the block table, before anything runs.

#include "decode/decode_detail.hpp"
#include "fail.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/decode.hpp>
#include <ioattn/error.hpp>
#include <ioattn/fp16.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/view_checks.hpp>

#include <cstdint>
#include <string>

namespace ioattn::sparse::detail {

namespace {

using ioattn::detail::check_view_layout;
using ioattn::detail::check_view_shape;
using ioattn::detail::view_dims;
using ioattn::detail::views_overlap;

template <typename Scalar, typename Cache>
void check_disjoint(std::string_view where, const DecodeArgs<Scalar, Cache>& a) {
    const auto check = [&](const char* out_name, const auto& out) {
        if (views_overlap(out, a.q))
            fail(where, "output ", out_name, " overlaps q");
        if (views_overlap(out, a.k))
            fail(where, "output ", out_name, " overlaps k_cache");
        if (views_overlap(out, a.v))
            fail(where, "output ", out_name, " overlaps v_cache");
    };
    check("o", a.o);
    check("lse", a.lse);
    if (views_overlap(a.o, a.lse))
        fail(where, "outputs o and lse overlap");
}

/// The block table's shape and, for each sequence, that it lists enough blocks and that each
/// listed block of the sequence exists.
template <typename Scalar, typename Cache>
void check_table(std::string_view where, const DecodeArgs<Scalar, Cache>& a, std::int64_t batch) {
    const BlockTable& t = a.block_table;
    const std::int64_t bs = a.k.rows, num_blocks = a.k.batch;
    if (t.rows != batch || t.cols < 0 || t.stride < t.cols)
        fail(where,
             "block_table is [",
             t.rows,
             "][",
             t.cols,
             "] with row stride ",
             t.stride,
             ", expected ",
             batch,
             " rows and a stride >= its columns");
    if (bs < 1)
        fail(where, "paged cache block_size = ", bs, " (expected >= 1)");
    for (std::int64_t b = 0; b < batch; ++b) {
        const std::int64_t len = a.kv_lens[b];
        const std::int64_t need = (len + bs - 1) / bs;
        if (need > t.cols)
            fail(where,
                 "kv_lens[",
                 b,
                 "] = ",
                 len,
                 " needs ",
                 need,
                 " blocks of ",
                 bs,
                 " but the block table has ",
                 t.cols,
                 " per sequence");
        for (std::int64_t j = 0; j < need; ++j) {
            const std::int64_t blk = t.data[b * t.stride + j];
            if (blk < 0 || blk >= num_blocks)
                fail(where,
                     "block_table[",
                     b,
                     "][",
                     j,
                     "] = ",
                     blk,
                     " is outside [0, ",
                     num_blocks,
                     ")");
        }
    }
}

} // namespace

template <typename Scalar, typename Cache>
DecodeShape
validate_decode(const DecodeArgs<Scalar, Cache>& a, std::string_view where, bool shape_only) {
    check_view_layout(where, "q", a.q, shape_only, true); // null data: only if empty
    check_view_layout(where, "k_cache", a.k, shape_only, true);
    check_view_layout(where, "v_cache", a.v, shape_only, true);
    check_view_layout(where, "o", a.o, shape_only, true);
    check_view_layout(where, "lse", a.lse, shape_only, true);
    DecodeShape s;
    s.batch = a.q.batch;
    s.heads = a.q.heads;
    s.n_new = a.q.rows;
    s.d = a.q.cols;
    s.kv_heads = a.k.heads;
    s.d_v = a.v.cols;
    s.window = a.window;
    s.pattern = std::string(a.pattern);
    s.pattern_seed = a.pattern_seed;
    s.word_bytes_cache = static_cast<std::int64_t>(sizeof(Cache));
    if (s.batch < 1 || s.heads < 1 || s.n_new < 1 || s.d < 1)
        fail(where,
             "q has shape ",
             view_dims(s.batch, s.heads, s.n_new, s.d),
             " (expected every size >= 1)");
    if (s.kv_heads < 1 || s.heads % s.kv_heads != 0)
        fail(where, "heads = ", s.heads, " is not a multiple of kv_heads = ", s.kv_heads);
    if (s.d_v < 1)
        fail(where, "v_cache has d_v = ", s.d_v, " (expected >= 1)");
    check_view_shape(where, "k_cache", a.k, a.k.batch, s.kv_heads, a.k.rows, s.d);
    check_view_shape(where, "v_cache", a.v, a.k.batch, s.kv_heads, a.k.rows, s.d_v);
    check_view_shape(where, "o", a.o, s.batch, s.heads, s.n_new, s.d_v);
    check_view_shape(where, "lse", a.lse, s.batch, s.heads, s.n_new, 1);
    check_disjoint(where, a);
    if (a.kv_lens == nullptr)
        fail(where, "kv_lens is null");
    s.kv_lens.assign(a.kv_lens, a.kv_lens + s.batch);
    if (a.paged()) {
        for (std::int64_t b = 0; b < s.batch; ++b)
            if (a.kv_lens[b] < 0)
                fail(where, "kv_lens[", b, "] = ", a.kv_lens[b], " (expected >= 0)");
        check_table(where, a, s.batch);
    } else {
        if (a.k.batch != s.batch)
            fail(where, "k_cache has ", a.k.batch, " sequences but q has ", s.batch);
        for (std::int64_t b = 0; b < s.batch; ++b)
            if (a.kv_lens[b] < 0 || a.kv_lens[b] > a.k.rows)
                fail(where,
                     "kv_lens[",
                     b,
                     "] = ",
                     a.kv_lens[b],
                     " is outside [0, capacity = ",
                     a.k.rows,
                     "]");
    }
    return s;
}

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template DecodeShape validate_decode<Scalar, Scalar>(                                          \
        const DecodeArgs<Scalar, Scalar>&, std::string_view, bool);                                \
    template DecodeShape validate_decode<Scalar, bf16>(                                            \
        const DecodeArgs<Scalar, bf16>&, std::string_view, bool);                                  \
    template DecodeShape validate_decode<Scalar, fp16>(                                            \
        const DecodeArgs<Scalar, fp16>&, std::string_view, bool);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::sparse::detail
