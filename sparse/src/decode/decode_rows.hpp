#pragma once
// The cached rows a decode chunk task reads (decode/decode_chunks.cpp), compiled for the ISA
// target of the including translation unit. A sequence's visible rows v = 0, 1, ... are the
// cached positions some new token sees, in order:
//   Positions:     visible row v as a position: first_row(b) + v (every sequence without a
//                  pattern: one range) or the pattern's list (DecodeRows::positions)
//   tile_rows:     pointers to the cached rows of visible rows [v0, v0 + n) of (b, g),
//                  contiguous or paged (block table[b][p / block_size], row p % block_size)
//   AheadRows:     their cache lines, asked for a row at a time during the tile before
//   token_masks:   bit i of token t's mask: t sees visible row v0 + i (a tile is <= 64 rows)

#include <ioattn/decode.hpp>
#include <ioattn/kernels/prefetch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>

namespace ioattn::sparse::detail {
inline namespace IOATTN_ISA {

/// Sequence b's visible rows as cached positions.
struct Positions {
    std::int64_t first = 0;           ///< position of visible row 0 when `at` is null
    const std::int64_t* at = nullptr; ///< the pattern's positions, or null: a range

    [[nodiscard]] std::int64_t operator()(std::int64_t v) const {
        return at != nullptr ? at[v] : first + v;
    }

    static Positions of(const DecodePlan& plan, std::int64_t b) {
        if (plan.rows.empty())
            return {plan.first_row(b), nullptr};
        return {0, plan.rows[static_cast<std::size_t>(b)].positions.data()};
    }
};

/// Position p0, p0 + 1, ... of sequence b in a paged cache of blocks of bs rows: the block's
/// table entry and the row inside it, one division per tile instead of one per row.
struct PagedCursor {
    const std::int64_t* table; ///< row b of the block table (null: contiguous)
    std::int64_t bs, index, row;

    template <typename Scalar, typename Cache>
    PagedCursor(const DecodeArgs<Scalar, Cache>& a,
                std::int64_t b,
                std::int64_t p0,
                std::int64_t rows)
        : table(a.paged() ? a.block_table.data + b * a.block_table.stride : nullptr)
        , bs(rows)
        , index(table != nullptr ? p0 / rows : 0)
        , row(table != nullptr ? p0 % rows : 0) {}

    [[nodiscard]] std::int64_t block() const { return table[index]; }

    void next() {
        if (++row == bs) {
            row = 0;
            ++index;
        }
    }
};

/// f(t, K row, V row) for the cached rows of visible rows [v0, v0 + n) of (b, g), in order.
template <typename Scalar, typename Cache, typename F>
void for_tile_rows(const DecodeArgs<Scalar, Cache>& a,
                   std::int64_t b,
                   std::int64_t g,
                   const Positions& pos,
                   std::int64_t v0,
                   std::int64_t n,
                   F&& f) {
    if (pos.at == nullptr) { // consecutive positions: the cursor steps through the blocks
        const std::int64_t p0 = pos(v0);
        PagedCursor cur(a, b, p0, a.k.rows);
        for (std::int64_t t = 0; t < n; ++t) {
            if (a.paged())
                f(t, a.k.row(cur.block(), g, cur.row), a.v.row(cur.block(), g, cur.row));
            else
                f(t, a.k.row(b, g, p0 + t), a.v.row(b, g, p0 + t));
            cur.next();
        }
        return;
    }
    const std::int64_t* table = a.paged() ? a.block_table.data + b * a.block_table.stride : nullptr;
    const std::int64_t bs = a.k.rows;
    for (std::int64_t t = 0; t < n; ++t) {
        const std::int64_t p = pos.at[v0 + t];
        if (table != nullptr) {
            const std::int64_t block = table[p / bs], row = p % bs;
            f(t, a.k.row(block, g, row), a.v.row(block, g, row));
        } else
            f(t, a.k.row(b, g, p), a.v.row(b, g, p));
    }
}

/// Pointers to the K and V rows of visible rows [v0, v0 + n) of (b, g), read in place (a bf16
/// row is widened as the kernels load it).
template <typename Scalar, typename Cache>
void tile_rows(const DecodeArgs<Scalar, Cache>& a,
               std::int64_t b,
               std::int64_t g,
               const Positions& pos,
               std::int64_t v0,
               std::int64_t n,
               const Cache** krows,
               const Cache** vrows) {
    for_tile_rows(a, b, g, pos, v0, n, [&](std::int64_t t, const Cache* k, const Cache* v) {
        krows[t] = k;
        vrows[t] = v;
    });
}

/// The K and V rows of a tile ahead, whose cache lines are asked for a row at a time between
/// the arithmetic of the tile before (upto), so that the reads stay in flight while it
/// computes, and the rest at its end (finish). The tile kernel walks a few rows at a time a
/// vector column at a time, which the hardware's stream prefetchers follow late (no prefetch:
/// 0.48x the read bandwidth against 0.78x); every line of a tile asked for at once stalls on
/// the full miss queue and leaves the tile's arithmetic with few reads in flight (bf16 0.58x
/// against 0.70x a row at a time: decode_chunks.cpp, chunk_body). The lines go into L2
/// (prefetcht1): L1's miss buffers carried about 10 GB/s per core at a slow phase's memory
/// latency, L2 keeps more in flight (B = 1 fp32 0.73x the time, paged 16 0.65x:
/// docs/performance.md section 12).
template <typename Cache>
class AheadRows {
public:
    AheadRows(const Cache* const* k,
              const Cache* const* v,
              std::int64_t n,
              std::int64_t k_words,
              std::int64_t v_words)
        : k_(k)
        , v_(v)
        , n_(n)
        , k_bytes_(k_words * static_cast<std::int64_t>(sizeof(Cache)))
        , v_bytes_(v_words * static_cast<std::int64_t>(sizeof(Cache))) {}

    /// Asks for the lines of rows [done, min(rows, n)).
    void upto(std::int64_t rows) {
        constexpr std::int64_t kLine = 64;
        for (const std::int64_t end = std::min(rows, n_); done_ < end; ++done_) {
            const auto* kc = reinterpret_cast<const char*>(k_[done_]);
            const auto* vc = reinterpret_cast<const char*>(v_[done_]);
            for (std::int64_t x = 0; x < k_bytes_; x += kLine)
                kernels::prefetch_line_l2(kc + x);
            for (std::int64_t x = 0; x < v_bytes_; x += kLine)
                kernels::prefetch_line_l2(vc + x);
        }
    }

    void finish() { upto(n_); }

private:
    const Cache* const* k_;
    const Cache* const* v_;
    std::int64_t n_, k_bytes_, v_bytes_;
    std::int64_t done_ = 0;
};

/// Bits [lo, hi) of a 64-bit mask (0 <= lo <= hi <= 64).
inline std::uint64_t bit_range(std::int64_t lo, std::int64_t hi) {
    const auto below = [](std::int64_t k) {
        return k >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << k) - 1;
    };
    return below(hi) & ~below(lo);
}

/// Which visible rows of a tile each new token of sequence b sees: masks[t] bit i for visible
/// row v0 + i (n <= 64 rows). Token t, at position p = len - n_new + t, sees (p - W, p] (all
/// <= p without a window); under a pattern, its own visible rows (DecodeRows::index), walked
/// from cursor[t], which a chunk starts at its first row and each tile leaves past its rows.
class TokenMasks {
public:
    TokenMasks(const DecodePlan& plan, std::int64_t b, std::int64_t v_first)
        : plan_(plan)
        , b_(b)
        , rows_(plan.rows.empty() ? nullptr : &plan.rows[static_cast<std::size_t>(b)]) {
        if (rows_ == nullptr)
            return;
        for (std::int64_t t = 0; t < plan.shape.n_new; ++t) {
            const auto* lo = rows_->index.data() + rows_->indptr[static_cast<std::size_t>(t)];
            const auto* hi = rows_->index.data() + rows_->indptr[static_cast<std::size_t>(t) + 1];
            cursor_[static_cast<std::size_t>(t)] =
                std::lower_bound(lo, hi, v_first) - lo + rows_->indptr[static_cast<std::size_t>(t)];
        }
    }

    /// masks[t] for the tile of visible rows [v0, v0 + n) (tiles in increasing v0).
    void tile(const Positions& pos, std::int64_t v0, std::int64_t n, std::uint64_t* masks) {
        const DecodeShape& sh = plan_.shape;
        const std::int64_t len = sh.kv_lens[static_cast<std::size_t>(b_)];
        for (std::int64_t t = 0; t < sh.n_new; ++t) {
            if (rows_ == nullptr) { // one range of positions: (p - W, p] over [p0, p0 + n)
                const std::int64_t p0 = pos(v0), last = len - sh.n_new + t;
                const std::int64_t first = sh.window > 0 ? last - sh.window + 1 : 0;
                masks[t] = bit_range(std::clamp<std::int64_t>(first - p0, 0, n),
                                     std::clamp<std::int64_t>(last - p0 + 1, 0, n));
                continue;
            }
            std::uint64_t m = 0;
            auto& at = cursor_[static_cast<std::size_t>(t)];
            const std::int64_t end = rows_->indptr[static_cast<std::size_t>(t) + 1];
            for (; at < end && rows_->index[static_cast<std::size_t>(at)] < v0 + n; ++at)
                m |= std::uint64_t{1} << (rows_->index[static_cast<std::size_t>(at)] - v0);
            masks[t] = m;
        }
    }

private:
    const DecodePlan& plan_;
    std::int64_t b_;
    const DecodeRows* rows_;
    std::array<std::int64_t, kDecodeMaxNew> cursor_{};
};

} // namespace IOATTN_ISA
} // namespace ioattn::sparse::detail
