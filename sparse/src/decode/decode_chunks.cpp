// ioattn::decode, the chunk phase: split-KV decode over a contiguous or paged cache
// Per (sequence b, kv head g): the R = (heads / kv_heads) n_new query rows of the group are
// one block that meets each cached row once. The v_b visible cached rows (the positions some
// new token sees: from first_row(b), all len_b without a window; under a pattern, the plan's
// DecodeRows) are cut into c_b = ceil(v_b / C) chunks of C keys (C = plan.chunk, fixed by the
// plan, never by the threads).
//   parallel for each (b, g, chunk [c0, c1)) (paged: the heads of a chunk in a row):
//     read the group's Q rows, scaled by scale log2(e)                      R d
//     for each tile of kDecodeTile cached rows (positions p; paged: block table[b][p / bs]):
//       read K rows; S = Q K^T, one transposing reduction per row            T d
//       m' = max(m, S); P = 2^(S - m'); l = 2^(m - m') l + sum P (base 2)
//       read V rows; O = 2^(m - m') O + P V, V read once per 4 rows          T d_v
//       (token t at p = len_b - n_new + t sees (p - W, p], all <= p without a window W, or
//        its own rows of the pattern: a 64-bit mask per token and tile; the keys outside are
//        masked from the softmax and never reach O: decode/decode_rows.hpp)
//       (between the products, the next tile's K and V lines are asked for a row at a time:
//        half during S, half during P V, so the reads stay in flight while the tile computes)
//     c_b = 1: write O / l, L = (m + log2 l) ln 2                            R (d_v + 1)
//     c_b > 1: write the partial state (O, m, l) at the task's slot          R (d_v + 2)
//   decode_merge (decode/decode_merge.cpp) combines the partials in chunk order.
// Resident: R d + T (d + d_v) + R d_v + 2R + R T words (decode_chunk_footprint).
// I/O = io_cost_decode: per (b, g), c_b R d + v_b (d + d_v) + the writes above.
// Flops: 2 (d + d_v) per allowed (row, cached row) pair. Every visible cached word is read
// once per kv head: the compulsory traffic, so the phase runs at the memory's read bandwidth
// when the arithmetic (2 flops per word per row of the group) keeps up. Cached rows are read in
// place; bf16 words are widened as they are loaded. The avx512bf16 region's copy (a bf16 cache
// and float queries only) is what decode.cpp runs when every query word is a bf16 value (a bf16
// model's): S = Q K^T then multiplies the words as stored with vdpbf16ps (products exact, fp32
// sums in pairs of words) and scales the scores after; P V still widens. 1.16x (0.91-1.18) the
// widened path's speed with the cache in L3 (`IOATTN_ISA=avx512` against the default, `ioattn
// decode --kv-len 2048 --dtype bf16 --threads 1 --repeat 300`, 5 alternated rounds, Zen 4).
// Tests: tests/decode/decode_test.cpp, decode_window_test.cpp, decode_pattern_test.cpp,
// decode_bf16_test.cpp

#include "decode/decode_detail.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/decode.hpp>
#include <ioattn/fp16.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

// The rest of this file is compiled once per instruction set (kernels/target_begin.hpp).
#include <ioattn/kernels/target_begin.hpp>
// The kernels it uses, compiled for that instruction set:
#include "decode/decode_ops.hpp"
#include "decode/decode_rows.hpp"

#include <ioattn/kernels/prefetch.hpp>

#define IOATTN_TARGET_NS IOATTN_ISA
#include "decode/decode_kernels.hpp"
#undef IOATTN_TARGET_NS

namespace ioattn::sparse::IOATTN_ISA {

namespace {

using detail::accumulate;
using detail::tile_softmax;
using kernels::Simd;
using kernels::Vec;

constexpr int kTile = static_cast<int>(kDecodeTile);
constexpr int kRowBlock = 4; // rows sharing each loaded V vector

#if defined(IOATTN_TARGET_AVX512BF16)
constexpr bool kBf16Region = true;
#else
constexpr bool kBf16Region = false;
#endif

/// Whether S = Q K^T runs on bf16 words with vdpbf16ps (block_scores_bf16): the avx512bf16
/// target's copy, which decode.cpp runs for a bf16 cache when every query word is a bf16
/// value (decode_q_in_bf16). Every other copy widens the cache's words (block_scores).
template <typename Scalar, typename Cache>
constexpr bool bf16_products() {
    return kBf16Region && std::is_same_v<Scalar, float> && std::is_same_v<Cache, bf16>;
}

/// Per-worker scratch of a chunk task.
template <typename Scalar>
struct Scratch {
    Scalar* q;     ///< R x d, scaled
    Scalar* o;     ///< R x d_v
    Scalar* m;     ///< R
    Scalar* l;     ///< R
    Scalar* s;     ///< R x kTile scores, then probabilities
    Scalar* alpha; ///< R

    /// The bf16 rows of Q in q's words (bf16_products: R x d, unscaled).
    [[nodiscard]] bf16* q_bf16() const { return reinterpret_cast<bf16*>(q); }

    static std::int64_t words(std::int64_t r, std::int64_t d, std::int64_t d_v) {
        return r * d + r * d_v + 4 * r + r * kTile + 6 * 16;
    }

    Scratch(Scalar* base, std::int64_t r, std::int64_t d, std::int64_t d_v) {
        const auto pad = [](std::int64_t w) { return (w + 15) / 16 * 16; };
        q = base;
        o = q + pad(r * d);
        m = o + pad(r * d_v);
        l = m + pad(r);
        s = l + pad(r);
        alpha = s + pad(r * kTile);
    }
};

/// `f` with NR = min(kRowBlock, rows - r0) as a template argument.
template <typename F>
void with_rows(std::int64_t n, F&& f) {
    switch (n) {
    case 1:
        f(std::integral_constant<int, 1>{});
        break;
    case 2:
        f(std::integral_constant<int, 2>{});
        break;
    case 3:
        f(std::integral_constant<int, 3>{});
        break;
    default:
        f(std::integral_constant<int, kRowBlock>{});
        break;
    }
}

/// s[r kTile + t] = the score of row r and key t for NR rows and the n keys of the tile, KB
/// keys at a time: scores(kj) gives a block's lanes r KB + t (block_scores).
template <typename Scalar, int NR, int KB, typename Cache, typename Scores, typename OnKeys>
void block_row_scores(
    const Cache* const* k, std::int64_t n, Scalar* s, Scores&& scores, OnKeys&& on_keys) {
    constexpr int kL = Simd<Scalar>::kLanes;
    for (std::int64_t j = 0; j < n; j += KB) {
        on_keys(j);
        const Cache* pad[static_cast<std::size_t>(KB)];
        const Cache* const* kj = k + j;
        if (j + KB > n) { // the tile's last keys: the rest of the block repeats key 0
            for (int t = 0; t < KB; ++t)
                pad[t] = k[j + t < n ? j + t : 0];
            kj = pad;
        }
        const Vec<Scalar> v = scores(kj);
#if IOATTN_ISA_LEVEL == 3
        if constexpr (std::is_same_v<Scalar, float> &&
                      KB == 4) { // row r: 128-bit lane r (maskz: no undefined source)
            const __m512 w = kernels::as<__m512>(v);
            _mm_storeu_ps(s + j, _mm512_maskz_extractf32x4_ps(0xF, w, 0));
            if constexpr (NR > 1)
                _mm_storeu_ps(s + kTile + j, _mm512_maskz_extractf32x4_ps(0xF, w, 1));
            if constexpr (NR > 2)
                _mm_storeu_ps(s + 2 * kTile + j, _mm512_maskz_extractf32x4_ps(0xF, w, 2));
            if constexpr (NR > 3)
                _mm_storeu_ps(s + 3 * kTile + j, _mm512_maskz_extractf32x4_ps(0xF, w, 3));
            continue;
        }
#endif
        alignas(64) Scalar lanes[static_cast<std::size_t>(kL)];
        kernels::store(lanes, v);
        for (int r = 0; r < NR; ++r)
            std::copy(lanes + r * KB, lanes + (r + 1) * KB, s + r * kTile + j);
    }
}

/// s[r kTile + t] = q[r] . k[t] for every row r < rows of the group and key t < n of the tile:
/// blocks of RB rows against KB keys, every K vector loaded once per block of rows. Keys a row
/// does not see are computed too and masked by the softmax step. q: the scaled working-type
/// rows (block_scores); under the avx512bf16 target also the unscaled rows in bf16, whose
/// products (block_scores_bf16) are then scaled by `scale`.
template <typename Scalar, typename Q, typename Cache, typename OnKeys>
void tile_scores(const Q* q,
                 std::int64_t rows,
                 const Cache* const* k,
                 std::int64_t n,
                 std::int64_t d,
                 [[maybe_unused]] Scalar scale,
                 Scalar* s,
                 OnKeys&& on_keys) {
    constexpr int kL = Simd<Scalar>::kLanes;
    constexpr int RB = kL < 4 ? kL : 4;
    constexpr int KB = kL / RB;
    static_assert(kTile % KB == 0);
    const auto block = [&](auto nr, std::int64_t r0) {
        constexpr int NR = decltype(nr)::value;
        block_row_scores<Scalar, NR, KB>(
            k,
            n,
            s + r0 * kTile,
            [&](const Cache* const* kj) {
#if defined(IOATTN_TARGET_AVX512BF16)
                if constexpr (std::is_same_v<Q, bf16>)
                    return detail::block_scores_bf16<NR>(q + r0 * d, kj, d) * scale;
                else
#endif
                    return detail::block_scores<Scalar, NR>(q + r0 * d, kj, d);
            },
            on_keys);
    };
    std::int64_t r0 = 0;
    for (; r0 + RB <= rows; r0 += RB)
        block(std::integral_constant<int, RB>{}, r0);
    for (; r0 < rows; ++r0)
        block(std::integral_constant<int, 1>{}, r0);
}

/// O = alpha O + P V over the tile's n keys for every row of the group: blocks of kRowBlock
/// rows when every token sees every key (on_key(t) between the keys), else each row over the
/// runs of keys its token sees (masks), the others never touched: a hidden row's non-finite V
/// never reaches it.
template <typename Scalar, typename Cache, typename OnKey>
void tile_pv(const DecodePlan& plan,
             const Scratch<Scalar>& sc,
             const Cache* const* vrows,
             std::int64_t n,
             const std::uint64_t* masks,
             OnKey&& on_key) {
    const std::int64_t r_all = plan.group_rows(), n_new = plan.shape.n_new, d_v = plan.shape.d_v;
    const std::uint64_t all = detail::bit_range(0, n);
    bool edge = false;
    for (std::int64_t t = 0; t < n_new; ++t)
        edge = edge || masks[t] != all;
    if (!edge) {
        for (std::int64_t r0 = 0; r0 < r_all; r0 += kRowBlock)
            with_rows(r_all - r0, [&](auto nr) {
                accumulate<Scalar, decltype(nr)::value, kTile>(
                    sc.s + r0 * kTile, vrows, n, d_v, sc.alpha + r0, sc.o + r0 * d_v, d_v, on_key);
            });
        return;
    }
    const Scalar one = 1;
    for (std::int64_t r = 0; r < r_all; ++r) {
        std::uint64_t m = masks[r % n_new];
        const Scalar* alpha = sc.alpha + r;
        do {
            const std::int64_t lo = m == 0 ? 0 : std::countr_zero(m);
            const std::int64_t hi = m == 0 ? 0 : lo + std::countr_one(m >> lo);
            accumulate<Scalar, 1, kTile>(
                sc.s + r * kTile + lo, vrows + lo, hi - lo, d_v, alpha, sc.o + r * d_v, d_v);
            alpha = &one;
            m &= ~detail::bit_range(lo, hi);
        } while (m != 0);
    }
}

/// A chunk task: sequence b, KV head g, its chunk c of visible rows [c0, c1), and the slot of
/// its partials.
struct ChunkTask {
    std::int64_t b, g, c, c0, c1, task;
};

/// The task of loop step `step`. Paged: the KV heads of a chunk in a row, so that the two
/// cores read neighbouring pieces of the same blocks (paged 16: 0.74x the read bandwidth
/// against 0.61x for the chunks of a head in a row, `ioattn bench --suite decode`, 9 alternated
/// runs, Zen 5); contiguous: the chunks of a head in a row, one stream on through them.
ChunkTask locate(const DecodePlan& plan, bool paged, std::int64_t step) {
    const auto& first = plan.first_chunk;
    const std::int64_t kv_heads = plan.shape.kv_heads;
    const auto it =
        std::upper_bound(first.begin(), first.end(), step, [&](std::int64_t t, std::int64_t f) {
            return t < f * kv_heads;
        });
    ChunkTask out{};
    out.b = static_cast<std::int64_t>(it - first.begin()) - 1;
    const std::int64_t local = step - first[static_cast<std::size_t>(out.b)] * kv_heads;
    const std::int64_t chunks = plan.chunks(out.b);
    out.g = paged ? local % kv_heads : local / chunks;
    out.c = paged ? local / kv_heads : local % chunks;
    out.task = first[static_cast<std::size_t>(out.b)] * kv_heads + out.g * chunks + out.c;
    out.c0 = out.c * plan.chunk;
    out.c1 = std::min(plan.visible_rows(out.b), out.c0 + plan.chunk);
    return out;
}

/// Visible rows [c0, c1) of (b, g), a chunk: the online softmax over its tiles into sc.o,
/// sc.m, sc.l. Each tile: S = Q K^T for every row of the group, then per row the softmax step
/// over the keys its token sees (its mask) and O = alpha O + P V over them.
template <typename Scalar, typename Cache>
void chunk_body(const DecodeArgs<Scalar, Cache>& a,
                const DecodePlan& plan,
                const ChunkTask& here,
                const Scratch<Scalar>& sc) {
    const std::int64_t b = here.b, g = here.g, c0 = here.c0, c1 = here.c1;
    const DecodeShape& sh = plan.shape;
    const std::int64_t group = sh.heads / sh.kv_heads, n_new = sh.n_new;
    const std::int64_t r_all = plan.group_rows(), d = sh.d, d_v = sh.d_v;
    constexpr Scalar kNegInf = -std::numeric_limits<Scalar>::infinity();
    // --- Q rows of the group, scaled into base 2 (bf16 products: scaled after, below) ---
    const auto scale = static_cast<Scalar>(plan.scale * 1.4426950408889634);
    for (std::int64_t r = 0; r < r_all; ++r) {
        const Scalar* qr = a.q.row(b, g * group + r / n_new, r % n_new);
        for (std::int64_t x = 0; x < d; ++x)
            if constexpr (bf16_products<Scalar, Cache>())
                sc.q_bf16()[r * d + x] = bf16(qr[x]); // exact: decode_q_in_bf16
            else
                sc.q[r * d + x] = qr[x] * scale;
        std::fill(sc.o + r * d_v, sc.o + (r + 1) * d_v, Scalar(0));
        sc.m[r] = kNegInf;
        sc.l[r] = 0;
    }
    const detail::Positions pos = detail::Positions::of(plan, b);
    detail::TokenMasks seen(plan, b, c0);
    std::uint64_t masks[kDecodeMaxNew];
    // the K and V rows of the tile and of the next one, whose lines it asks for a row at a time
    // between its arithmetic (AheadRows), so the reads stay in flight while it computes, and on
    // which the next tile computes: bf16 0.70x the read bandwidth against 0.58x for a tile's
    // lines asked for at once 128 rows ahead, fp32 0.82x against 0.78x, paged 16 0.62x against
    // 0.56x (`ioattn bench --suite decode`, 9 alternated runs, Zen 5); 48 or 96 rows ahead
    // measured as the next tile's 64
    const Cache* rows[2][2][kTile];
    int cur = 0;
    const std::int64_t n0 = std::min<std::int64_t>(kTile, c1 - c0);
    detail::tile_rows(a, b, g, pos, c0, n0, rows[0][0], rows[0][1]);
    detail::AheadRows<Cache>(rows[0][0], rows[0][1], n0, d, d_v).finish();
    for (std::int64_t t0 = c0; t0 < c1; t0 += kTile, cur ^= 1) {
        const std::int64_t n = std::min<std::int64_t>(kTile, c1 - t0);
        // the next tile's lines: half asked for during the scores, half during P V
        const std::int64_t n_ahead = std::clamp<std::int64_t>(c1 - t0 - kTile, 0, kTile);
        detail::tile_rows(a, b, g, pos, t0 + kTile, n_ahead, rows[cur ^ 1][0], rows[cur ^ 1][1]);
        detail::AheadRows<Cache> ahead(rows[cur ^ 1][0], rows[cur ^ 1][1], n_ahead, d, d_v);
        const auto during_scores = [&](std::int64_t j) { ahead.upto((j + 1) / 2 + 1); };
        const auto during_pv = [&](std::int64_t t) { ahead.upto(n / 2 + (t + 1) / 2 + 1); };
        seen.tile(pos, t0, n, masks);
        // --- S = Q K^T over the tile ---
        if constexpr (bf16_products<Scalar, Cache>())
            tile_scores(sc.q_bf16(), r_all, rows[cur][0], n, d, scale, sc.s, during_scores);
        else
            tile_scores(sc.q, r_all, rows[cur][0], n, d, scale, sc.s, during_scores);
        // --- per row: m' = max(m, S); P = 2^(S - m'); l = alpha l + sum P, over its keys ---
        for (std::int64_t r = 0; r < r_all; ++r)
            sc.alpha[r] =
                tile_softmax<Scalar, kTile>(sc.s + r * kTile, masks[r % n_new], sc.m[r], sc.l[r]);
        // --- O = alpha O + P V ---
        tile_pv(plan, sc, rows[cur][1], n, masks, during_pv);
        ahead.finish();
    }
}

/// O = o / l and L = (m + log2 l) ln 2 of row r of the group (O = 0, L = -inf when l = 0).
template <typename Scalar, typename Cache>
void write_output(const DecodeArgs<Scalar, Cache>& a,
                  const DecodePlan& plan,
                  std::int64_t b,
                  std::int64_t g,
                  const Scratch<Scalar>& sc) {
    const DecodeShape& sh = plan.shape;
    const std::int64_t group = sh.heads / sh.kv_heads, n_new = sh.n_new, d_v = sh.d_v;
    for (std::int64_t r = 0; r < plan.group_rows(); ++r) {
        const std::int64_t h = g * group + r / n_new, i = r % n_new;
        Scalar* out = a.o.row(b, h, i);
        const Scalar l = sc.l[r];
        const Scalar inv = l == 0 ? Scalar(0) : Scalar(1) / l; // NaN l: NaN O
        for (std::int64_t x = 0; x < d_v; ++x)
            out[x] = sc.o[r * d_v + x] * inv;
        const Scalar m = sc.m[r] == -std::numeric_limits<Scalar>::infinity() ? Scalar(0) : sc.m[r];
        *a.lse.row(b, h, i) = l == 0 ? -std::numeric_limits<Scalar>::infinity()
                                     : (m + std::log2(l)) * Scalar(0.6931471805599453);
    }
}

} // namespace

template <typename Scalar, typename Cache, typename Counter>
void decode_chunks(const DecodeArgs<Scalar, Cache>& args,
                   const DecodePlan& plan,
                   Scalar* partials,
                   Counter& counter) {
    const DecodeShape& sh = plan.shape;
    const std::int64_t r_all = plan.group_rows(), d = sh.d, d_v = sh.d_v;
    const std::int64_t group = sh.heads / sh.kv_heads, kv_heads = sh.kv_heads;
    const std::int64_t footprint = detail::decode_chunk_footprint(plan);
    const std::int64_t part_words = detail::decode_partial_words(plan);
    const std::int64_t words = Counter::kComputes ? Scratch<Scalar>::words(r_all, d, d_v) : 0;
    const kernels::Workspace<Scalar> scratch(max_concurrency(), words, false);
    parallel_for_counted(plan.tasks(), counter, [&](std::int64_t step, int w, auto& io) {
        const ChunkTask here = locate(plan, args.paged(), step);
        const std::int64_t b = here.b, g = here.g, c0 = here.c0, c1 = here.c1;
        const std::int64_t chunks = plan.chunks(b), task = here.task;
        io.acquire(footprint);
        for (std::int64_t j = 0; j < group; ++j)
            io.read({Operand::q, b * sh.heads + g * group + j, 0, sh.n_new, 0, d});
        // the chunk's cached rows, a read per run of consecutive positions
        const detail::Positions pos = detail::Positions::of(plan, b);
        for (std::int64_t v = c0; v < c1 && std::remove_reference_t<decltype(io)>::kCounts;) {
            std::int64_t e = v + 1;
            while (e < c1 && pos(e) == pos(e - 1) + 1)
                ++e;
            io.read({Operand::k, b * kv_heads + g, pos(v), e - v, 0, d});
            io.read({Operand::v, b * kv_heads + g, pos(v), e - v, 0, d_v});
            v = e;
        }
        if constexpr (std::remove_reference_t<decltype(io)>::kComputes) {
            const Scratch<Scalar> sc(scratch.slab(w), r_all, d, d_v);
            chunk_body(args, plan, here, sc);
            if (chunks == 1) {
                write_output(args, plan, b, g, sc);
            } else {
                Scalar* part = partials + task * part_words;
                for (std::int64_t r = 0; r < r_all; ++r) {
                    std::copy(sc.o + r * d_v, sc.o + (r + 1) * d_v, part + r * (d_v + 2));
                    part[r * (d_v + 2) + d_v] = sc.m[r];
                    part[r * (d_v + 2) + d_v + 1] = sc.l[r];
                }
            }
        }
        if (chunks == 1) {
            for (std::int64_t j = 0; j < group; ++j) {
                io.write({Operand::o, b * sh.heads + g * group + j, 0, sh.n_new, 0, d_v});
                io.write({Operand::lse, b * sh.heads + g * group + j, 0, sh.n_new, 0, 1});
            }
        } else {
            io.write({Operand::stats, task, 0, r_all, 0, d_v + 2});
        }
        io.release(footprint);
    });
}

#if defined(IOATTN_TARGET_AVX512BF16) // a bf16 cache and float queries only
template void decode_chunks<float, bf16, NullCounter>(const DecodeArgs<float, bf16>&,
                                                      const DecodePlan&,
                                                      float*,
                                                      NullCounter&);
#else
#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void decode_chunks<Scalar, Scalar, Counter>(                                          \
        const DecodeArgs<Scalar, Scalar>&, const DecodePlan&, Scalar*, Counter&);                  \
    template void decode_chunks<Scalar, bf16, Counter>(                                            \
        const DecodeArgs<Scalar, bf16>&, const DecodePlan&, Scalar*, Counter&);                    \
    template void decode_chunks<Scalar, fp16, Counter>(                                            \
        const DecodeArgs<Scalar, fp16>&, const DecodePlan&, Scalar*, Counter&);
IOATTN_FOR_EACH_KERNEL_TYPE(IOATTN_INSTANTIATE)
#undef IOATTN_INSTANTIATE
#endif

} // namespace ioattn::sparse::IOATTN_ISA
