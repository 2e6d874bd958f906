#pragma once
// A decode problem for the tests: Q, a contiguous cache of `capacity` rows per (sequence, kv
// head) filled with seeded values (the rows past each length hold NaN: never read), the same
// cache laid out paged behind a shuffled block table, and the oracle of each sequence:
// ioattn::decode_reference (ioattn::attention over its cached rows with the causal mask,
// bottom-right aligned, and the window as causal-window:W-1) on rows gathered here from the
// contiguous arrays, not through the decode views.

#include "random.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/decode.hpp>
#include <ioattn/fp16.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace ioattn::test {

template <typename Scalar, typename Cache = Scalar>
struct DecodeCase {
    std::int64_t batch, heads, kv_heads, n_new, d, d_v, capacity;
    std::vector<std::int64_t> lens;
    std::vector<Scalar> q;           ///< [B][H][n_new][d]
    std::vector<Cache> k, v;         ///< [B][H_kv][capacity][d or d_v]
    std::vector<Scalar> o, lse;      ///< outputs
    std::int64_t block_size = 0;     ///< paged layout (build_paged)
    std::vector<Cache> pk, pv;       ///< [num_blocks][H_kv][block_size][d]
    std::vector<std::int64_t> table; ///< [B][max_blocks]
    std::int64_t num_blocks = 0, max_blocks = 0;
    std::int64_t window = 0; ///< DecodeArgs::window of args() and the oracle's mask
    std::string pattern;     ///< DecodeArgs::pattern of args() and the oracle's
    std::uint64_t pattern_seed = 0;

    DecodeCase(std::int64_t b,
               std::int64_t h,
               std::int64_t hkv,
               std::int64_t nn,
               std::int64_t dd,
               std::int64_t ddv,
               std::int64_t cap,
               std::vector<std::int64_t> l,
               std::uint64_t seed)
        : batch(b)
        , heads(h)
        , kv_heads(hkv)
        , n_new(nn)
        , d(dd)
        , d_v(ddv)
        , capacity(cap)
        , lens(std::move(l)) {
        Rng rng(seed);
        q.resize(static_cast<std::size_t>(b * h * nn * dd));
        rng.fill(q);
        const auto nan = std::numeric_limits<float>::quiet_NaN();
        k.assign(static_cast<std::size_t>(b * hkv * cap * dd), Cache(nan));
        v.assign(static_cast<std::size_t>(b * hkv * cap * ddv), Cache(nan));
        for (std::int64_t s = 0; s < b; ++s)
            for (std::int64_t g = 0; g < hkv; ++g)
                for (std::int64_t p = 0; p < lens[static_cast<std::size_t>(s)]; ++p) {
                    for (std::int64_t x = 0; x < dd; ++x)
                        k[idx(s, g, p, x, dd)] = Cache(static_cast<float>(rng.uniform(-1, 1)));
                    for (std::int64_t x = 0; x < ddv; ++x)
                        v[idx(s, g, p, x, ddv)] = Cache(static_cast<float>(rng.uniform(-1, 1)));
                }
        o.assign(static_cast<std::size_t>(b * h * nn * ddv), Scalar(7));
        lse.assign(static_cast<std::size_t>(b * h * nn), Scalar(7));
    }

    std::size_t
    idx(std::int64_t s, std::int64_t g, std::int64_t p, std::int64_t x, std::int64_t w) const {
        return static_cast<std::size_t>(((s * kv_heads + g) * capacity + p) * w + x);
    }

    /// The paged layout: each sequence's blocks at shuffled physical indices (plus two unused
    /// blocks of NaN), the table's unused entries -1.
    void build_paged(std::int64_t bs, std::uint64_t seed) {
        block_size = bs;
        max_blocks = (capacity + bs - 1) / bs;
        std::vector<std::int64_t> need(static_cast<std::size_t>(batch));
        num_blocks = 2;
        for (std::int64_t s = 0; s < batch; ++s) {
            need[static_cast<std::size_t>(s)] = (lens[static_cast<std::size_t>(s)] + bs - 1) / bs;
            num_blocks += need[static_cast<std::size_t>(s)];
        }
        std::vector<std::int64_t> perm(static_cast<std::size_t>(num_blocks));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed));
        const auto nan = std::numeric_limits<float>::quiet_NaN();
        pk.assign(static_cast<std::size_t>(num_blocks * kv_heads * bs * d), Cache(nan));
        pv.assign(static_cast<std::size_t>(num_blocks * kv_heads * bs * d_v), Cache(nan));
        table.assign(static_cast<std::size_t>(batch * max_blocks), -1);
        std::size_t next = 0;
        for (std::int64_t s = 0; s < batch; ++s)
            for (std::int64_t j = 0; j < need[static_cast<std::size_t>(s)]; ++j) {
                const std::int64_t blk = perm[next++];
                table[static_cast<std::size_t>(s * max_blocks + j)] = blk;
                for (std::int64_t g = 0; g < kv_heads; ++g)
                    for (std::int64_t r = 0; r < bs; ++r) {
                        const std::int64_t p = j * bs + r;
                        if (p >= lens[static_cast<std::size_t>(s)])
                            continue;
                        for (std::int64_t x = 0; x < d; ++x)
                            pk[static_cast<std::size_t>(((blk * kv_heads + g) * bs + r) * d + x)] =
                                k[idx(s, g, p, x, d)];
                        for (std::int64_t x = 0; x < d_v; ++x)
                            pv[static_cast<std::size_t>(((blk * kv_heads + g) * bs + r) * d_v +
                                                        x)] = v[idx(s, g, p, x, d_v)];
                    }
            }
    }

    DecodeArgs<Scalar, Cache> args(bool paged = false) {
        DecodeArgs<Scalar, Cache> a;
        a.q = TensorView<const Scalar>::packed(q.data(), batch, heads, n_new, d);
        if (paged) {
            a.k = TensorView<const Cache>::packed(pk.data(), num_blocks, kv_heads, block_size, d);
            a.v = TensorView<const Cache>::packed(pv.data(), num_blocks, kv_heads, block_size, d_v);
            a.block_table = {table.data(), batch, max_blocks, max_blocks};
        } else {
            a.k = TensorView<const Cache>::packed(k.data(), batch, kv_heads, capacity, d);
            a.v = TensorView<const Cache>::packed(v.data(), batch, kv_heads, capacity, d_v);
        }
        a.kv_lens = lens.data();
        a.window = window;
        a.pattern = pattern;
        a.pattern_seed = pattern_seed;
        a.o = TensorView<Scalar>::packed(o.data(), batch, heads, n_new, d_v);
        a.lse = TensorView<Scalar>::packed(lse.data(), batch, heads, n_new, 1);
        return a;
    }

    /// The oracle of sequence s: ioattn::decode_reference (the fused forward of
    /// ioattn::attention) over its cached rows gathered from the contiguous arrays, in the
    /// working type, the cache widened; O [H][n_new][d_v] then L [H][n_new].
    std::pair<std::vector<Scalar>, std::vector<Scalar>> oracle(std::int64_t s) const {
        const std::int64_t len = lens[static_cast<std::size_t>(s)];
        std::vector<Scalar> kk(static_cast<std::size_t>(kv_heads * len * d));
        std::vector<Scalar> vv(static_cast<std::size_t>(kv_heads * len * d_v));
        for (std::int64_t g = 0; g < kv_heads; ++g)
            for (std::int64_t j = 0; j < len; ++j) {
                for (std::int64_t x = 0; x < d; ++x)
                    kk[static_cast<std::size_t>((g * len + j) * d + x)] =
                        widen(k[idx(s, g, j, x, d)]);
                for (std::int64_t x = 0; x < d_v; ++x)
                    vv[static_cast<std::size_t>((g * len + j) * d_v + x)] =
                        widen(v[idx(s, g, j, x, d_v)]);
            }
        DecodeShape shape;
        shape.batch = batch;
        shape.heads = heads;
        shape.kv_heads = kv_heads;
        shape.n_new = n_new;
        shape.d = d;
        shape.d_v = d_v;
        shape.kv_lens = lens;
        shape.window = window;
        shape.pattern = pattern;
        shape.pattern_seed = pattern_seed;
        return decode_reference<Scalar>(
            shape, s, q.data() + s * heads * n_new * d, kk.data(), vv.data());
    }

    static Scalar widen(Cache c) {
        if constexpr (std::is_same_v<Cache, bf16> || std::is_same_v<Cache, fp16>)
            return static_cast<Scalar>(static_cast<float>(c));
        else
            return c;
    }
};

/// The problem of h over a cache of the working type holding h's cached values widened (the
/// values the kernels compute with), its Q, window and pattern the same.
template <typename Scalar, typename Cache>
DecodeCase<Scalar> widened(const DecodeCase<Scalar, Cache>& h) {
    DecodeCase<Scalar> f(h.batch, h.heads, h.kv_heads, h.n_new, h.d, h.d_v, h.capacity, h.lens, 0);
    f.q = h.q;
    f.window = h.window;
    f.pattern = h.pattern;
    f.pattern_seed = h.pattern_seed;
    for (std::size_t e = 0; e < f.k.size(); ++e)
        f.k[e] = DecodeCase<Scalar, Cache>::widen(h.k[e]);
    for (std::size_t e = 0; e < f.v.size(); ++e)
        f.v[e] = DecodeCase<Scalar, Cache>::widen(h.v[e]);
    return f;
}

} // namespace ioattn::test
