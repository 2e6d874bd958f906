// ioattn::sparse::pattern_{bigbird,block,random}: the seeded pattern builders.
// Randomness comes from detail::RowRng streams keyed by (seed, pattern salt, row or row
// block), so a row's keys never depend on other rows, the thread count or the standard
// library's distributions.
//   random:  per row, gaps between kept keys are geometric (skip = floor(log U / log(1-p))),
//            which is exactly independent Bernoulli(p) per pair: O(n_q + Z_QK), chunks of rows
//            in parallel (build_chunks_expected). The keys come kGapBatch at a time from the
//            active ISA target's geometric_keys (geometric_gaps.cpp): the formula's floors and
//            their sums, as vectors.
//   block:   per row block, one Bernoulli(p) per column block; rows copy the kept ranges,
//            written in place in parallel (build_sized).
//   bigbird: window + global per row, then r distinct keys from the rest by Floyd's
//            sampling of ranks mapped into the complement: O(Z_QK + n_q r log r), chunks of
//            rows in parallel.
// Tests: tests/sparse/pattern_random_test.cpp

#include "patterns/fast_floors.hpp"
#include "patterns/parallel_rows.hpp"

#define IOATTN_TARGET_DECLARATIONS "patterns/geometric_gaps.hpp"
#include <ioattn/kernels/declare_targets.inc>
#include <ioattn/sparse/pattern.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>

namespace ioattn::sparse {

namespace {

constexpr std::uint64_t kSaltRandom = 0x72616e646f6dULL; // "random"
constexpr std::uint64_t kSaltBlock = 0x626c6f636bULL;    // "block"
constexpr std::uint64_t kSaltBigbird = 0x6269676269ULL;  // "bigbi"

void check_density(std::string_view where, double density) {
    if (!(density >= 0.0 && density <= 1.0))
        detail::fail(where, "DENSITY = ", density, " (expected in [0, 1])");
}

using detail::check_at_least;

} // namespace

namespace detail {

GeometricGaps geometric_gaps_kernel() {
    IOATTN_DISPATCH_ACTIVE(geometric_gaps);
}

GeometricKeys geometric_keys_kernel() {
    IOATTN_DISPATCH_ACTIVE(geometric_keys);
}

} // namespace detail

Support pattern_random(std::int64_t n_q, std::int64_t n_k, double density, std::uint64_t seed) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_random";
    detail::check_shape(kWhere, n_q, n_k);
    check_density(kWhere, density);
    const double log_keep = std::log1p(-density); // log(1 - p) < 0 for 0 < p < 1
    const double inverse = 1.0 / log_keep;
    const auto next_keys = detail::geometric_keys_kernel();
    const auto row = [&](std::int64_t i, std::vector<std::int64_t>& cols) {
        if (density >= 1.0) {
            detail::append_range(cols, 0, n_k - 1, n_k);
            return;
        }
        if (density <= 0.0)
            return;
        detail::RowRng rng(seed, kSaltRandom, i);
        // scratch the kernel writes before it is read (u in full, keys up to the count it
        // returns): value-initialised each batch (two `rep stos`), it was a quarter of the
        // rows' own time in random:0.02's build
        std::array<double, detail::kGapBatch> u;
        std::array<std::int64_t, detail::kGapBatch> keys;
        for (std::int64_t j = -1;;) {
            // skip ~ Geometric(p): P(skip = s) = (1-p)^s p, kGapBatch at a time, as keys
            const std::int64_t n =
                next_keys(&rng, u.data(), log_keep, inverse, j, n_k, keys.data());
            cols.insert(cols.end(), keys.begin(), keys.begin() + n);
            if (n < std::ssize(keys))
                return;
            j = keys.back();
        }
    };
    return detail::build_chunks_expected(
        kWhere, n_q, n_k, [&] { return row; }, density * static_cast<double>(n_k));
}

Support pattern_block(
    std::int64_t n_q, std::int64_t n_k, std::int64_t b, double density, std::uint64_t seed) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_block";
    detail::check_shape(kWhere, n_q, n_k);
    check_at_least(kWhere, "B", b, 1);
    check_density(kWhere, density);
    b = std::min(b, std::max({n_q, n_k, std::int64_t{1}})); // larger blocks: the same 1 x 1 grid
    const std::int64_t col_blocks = (n_k + b - 1) / b;
    // --- the kept column blocks of each row block, drawn in parallel, and the keys they hold ---
    const std::int64_t row_blocks = (n_q + b - 1) / b;
    std::vector<std::vector<std::int64_t>> kept(static_cast<std::size_t>(row_blocks));
    std::vector<std::int64_t> kept_keys(kept.size(), 0);
    parallel_for_tiles(row_blocks, [&](std::int64_t rb, int) {
        detail::RowRng rng(seed, kSaltBlock, rb);
        auto& k = kept[static_cast<std::size_t>(rb)];
        for (std::int64_t c = 0; c < col_blocks; ++c)
            if (rng.uniform() < density) {
                k.push_back(c);
                kept_keys[static_cast<std::size_t>(rb)] += std::min(b, n_k - c * b);
            }
    });
    Support s = detail::build_sized(
        kWhere,
        n_q,
        n_k,
        [&](std::int64_t i) { return kept_keys[static_cast<std::size_t>(i / b)]; },
        detail::stateless([&](std::int64_t i, std::int64_t* out) {
            for (const std::int64_t c : kept[static_cast<std::size_t>(i / b)])
                out = detail::write_range(out, c * b, std::min(c * b + b, n_k) - 1);
        }));
    // a row block's rows see the same keys, a key block's keys the same rows
    s.keep_runs(detail::BuiltRows{}, RowRuns{b, 0}, RowRuns{b, 0});
    return s;
}

Support pattern_bigbird(std::int64_t n_q,
                        std::int64_t n_k,
                        std::int64_t w,
                        std::int64_t g,
                        std::int64_t r,
                        std::uint64_t seed) {
    constexpr std::string_view kWhere = "ioattn::sparse::pattern_bigbird";
    detail::check_shape(kWhere, n_q, n_k);
    check_at_least(kWhere, "W", w, 0);
    check_at_least(kWhere, "G", g, 0);
    check_at_least(kWhere, "R", r, 0);
    w = std::min(w, n_q + n_k);
    g = std::min(g, n_q + n_k);

    // --- a row's window + global keys: [0, g) and [max(p - w, g), p + w] within [0, n_k), or
    // every key for a global row ---
    struct Base {
        std::int64_t global_end, lo, hi; // keys [0, global_end) and [lo, hi]
        std::int64_t size;
    };

    const auto base_of = [&](std::int64_t i) {
        const std::int64_t p = i + n_k - n_q;
        if (p >= 0 && p < g)
            return Base{n_k, 0, -1, n_k};
        const std::int64_t global_end = std::min(g, n_k), lo = std::max(p - w, g), hi = p + w;
        return Base{global_end, lo, hi, global_end + detail::range_size(lo, hi, n_k)};
    };
    // --- and r random keys among the n_k - size others, unless they are all of them: each row's
    // size known before it is drawn, so rows are written in place (detail::build_sized) ---
    const auto size = [&](std::int64_t i) {
        const Base base = base_of(i);
        return r >= n_k - base.size ? n_k : base.size + r;
    };
    const auto make_fill = [&] {
        return [&, extra = std::vector<std::int64_t>()](std::int64_t i, std::int64_t* out) mutable {
            const Base base = base_of(i);
            const std::int64_t avail = n_k - base.size;
            if (r >= avail) {
                detail::write_range(out, 0, n_k - 1);
                return;
            }
            detail::RowRng rng(seed, kSaltBigbird, i);
            detail::floyd_sample(rng, avail, r, extra);
            // rank t of the complement -> key: past the global keys, then past the window's
            const std::int64_t lo = std::max<std::int64_t>(base.lo, 0);
            const std::int64_t hi = std::min(base.hi, n_k - 1);
            for (std::int64_t& t : extra) {
                t += base.global_end;
                if (hi >= lo && t >= lo)
                    t += hi - lo + 1;
            }
            std::size_t e = 0; // the random keys below each part, then the part
            const auto below = [&](std::int64_t key) {
                for (; e < extra.size() && extra[e] < key; ++e)
                    *out++ = extra[e];
            };
            out = detail::write_range(out, 0, base.global_end - 1);
            below(lo);
            out = detail::write_range(out, lo, hi);
            below(n_k);
        };
    };
    return detail::build_sized(kWhere, n_q, n_k, size, make_fill);
}

} // namespace ioattn::sparse
