// ioattn::sparse::detail::find_orders, reorder, inverse: the row and key orders of the
// permuted variant (rows and keys by residue modulo g, the gcd of i' - j over the support, then
// keys by the last row block whose tile takes them) and the reordered support (see
// structure.hpp). Tests: tests/sparse/variants_test.cpp

#include "plan/block_columns.hpp"
#include "support/block_keys.hpp"
#include "support/huge_pages.hpp"

#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <atomic>
#include <limits>
#include <numeric>
#include <utility>

namespace ioattn::sparse::detail {

/// g = gcd of i' - j over Omega (0 when Omega is empty), by parts of rows in parallel; 1 as soon
/// as any part finds it. A row's gcd is that of i' - (its first key) and the steps from each key
/// to the next, so that a row of equal steps (dilated's) takes one gcd, not a division a pair
/// (8 ms of dilated:256:4's plan at N = 16384).
std::int64_t offset_gcd(const Support& s) {
    const std::int64_t n_q = s.n_q(), shift = s.n_k() - s.n_q();
    const std::int64_t step = std::max<std::int64_t>(256, (n_q + 255) / 256);
    const std::int64_t parts = (n_q + step - 1) / step;
    std::vector<std::int64_t> part(static_cast<std::size_t>(parts), 0);
    std::atomic<bool> one{false};
    const std::int64_t declared = s.row_step(); // a row's steps, when its builder declared them
    parallel_for_tiles(parts, [&](std::int64_t t, int) {
        std::int64_t g = 0;
        for (std::int64_t i = t * step; i < std::min(n_q, (t + 1) * step); ++i) {
            if (one.load(std::memory_order_relaxed))
                return;
            const auto row = s.row(i);
            if (row.empty())
                continue;
            g = std::gcd(g, i + shift - row.front());
            if (declared > 0) {
                g = row.size() > 1 ? std::gcd(g, declared) : g;
            } else {
                for (std::size_t k = 1, last = 0; k < row.size(); ++k)
                    if (const auto d = static_cast<std::size_t>(row[k] - row[k - 1]); d != last) {
                        g = std::gcd(g, static_cast<std::int64_t>(d));
                        last = d;
                    }
            }
            if (g == 1) {
                one.store(true, std::memory_order_relaxed);
                return;
            }
        }
        part[static_cast<std::size_t>(t)] = g;
    });
    if (one.load())
        return 1;
    std::int64_t g = 0;
    for (const std::int64_t x : part)
        g = std::gcd(g, x);
    return g;
}

namespace {

/// 0, ..., n - 1 ordered by residue of (x + shift) modulo g, each class in ascending order: a
/// counting sort (the stable sort it stands for compared two residues a comparison).
std::vector<std::int64_t> by_residue(std::int64_t n, std::int64_t shift, std::int64_t g) {
    const auto residue = [&](std::int64_t x) {
        return static_cast<std::size_t>((((x + shift) % g) + g) % g);
    };
    std::vector<std::int64_t> start(static_cast<std::size_t>(g) + 1, 0);
    for (std::int64_t x = 0; x < n; ++x)
        ++start[residue(x) + 1];
    std::partial_sum(start.begin(), start.end(), start.begin());
    std::vector<std::int64_t> order(static_cast<std::size_t>(n));
    for (std::int64_t x = 0; x < n; ++x)
        order[static_cast<std::size_t>(start[residue(x)]++)] = x;
    return order;
}

} // namespace

Orders find_orders(const Support& s,
                   std::int64_t rows,
                   const CostModel& cm,
                   Residues* residues,
                   const BlockSeen* seen) {
    Orders o;
    const std::int64_t n_q = s.n_q(), n_k = s.n_k(), shift = n_k - n_q;
    // --- g = gcd of i' - j over Omega: g >= 2 means g independent residue classes ---
    Residues here;
    Residues& known = residues != nullptr ? *residues : here;
    if (known.g == 0)
        known.g = offset_gcd(s);
    const std::int64_t g = known.g;
    std::vector<std::int64_t> key_rank(static_cast<std::size_t>(n_k));
    std::iota(key_rank.begin(), key_rank.end(), std::int64_t{0});
    std::shared_ptr<const Support> reordered; // by residue
    if (g >= 2 && g < std::max(n_q, n_k)) {
        o.rows = by_residue(n_q, shift, g);
        o.keys = by_residue(n_k, 0, g);
        if (!known.reordered)
            known.reordered = std::make_shared<const Support>(reorder(s, o, g));
        reordered = known.reordered;
        key_rank = o.keys;
    }
    const Support& base = reordered ? *reordered : s;
    // --- keys by (last, first) block whose tile-worthy column they are (else any block): each
    // block's keys and their worthiness in parallel, then folded in block order ---
    constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
    std::vector<std::int64_t> last(static_cast<std::size_t>(n_k), -1), first(last.size(), kNever);
    std::vector<std::int64_t> any_last(last), any_first(first);
    const std::int64_t nb = n_blocks(base, rows);
    // each block's keys and their worthiness: price_by_fill's record of s at this height, or
    // the blocks' columns walked here
    const bool recorded = seen != nullptr && !reordered && seen->rows == rows &&
                          static_cast<std::int64_t>(seen->keys.size()) == nb;
    BlockSeen walked;
    if (!recorded) {
        walked.rows = rows;
        walked.keys.resize(static_cast<std::size_t>(nb));
        walked.floors.resize(static_cast<std::size_t>(nb));
        const kernels::Workspace<std::int64_t> counts(max_concurrency(), 3 * n_k);
        parallel_for_tiles(nb, [&](std::int64_t b, int w) {
            std::int64_t* count = counts.slab(w);
            const auto [keys, lanes] = block_columns(base, rows, b, count, cm);
            const auto u = static_cast<std::size_t>(b);
            walked.floors[u] = block_seen(base, rows, b, keys, count, lanes, cm, walked.keys[u]);
            for (const std::int64_t j : keys)
                count[static_cast<std::size_t>(j)] = 0;
        });
    }
    const BlockSeen& in = recorded ? *seen : walked;
    o.floor = std::accumulate(in.floors.begin(), in.floors.end(), 0.0); // in block order
    for (std::int64_t b = 0; b < nb; ++b)
        for (const std::int64_t x : in.keys[static_cast<std::size_t>(b)]) {
            const auto u = static_cast<std::size_t>(x >= 0 ? x : -1 - x);
            any_last[u] = b;
            any_first[u] = std::min(any_first[u], b);
            if (x >= 0) {
                last[u] = b;
                first[u] = std::min(first[u], b);
            }
        }
    std::vector<std::int64_t> order(static_cast<std::size_t>(n_k));
    std::iota(order.begin(), order.end(), std::int64_t{0});
    const auto sig = [&](std::int64_t j) {
        const auto u = static_cast<std::size_t>(j);
        if (last[u] >= 0)
            return std::pair{last[u], first[u]};
        return any_last[u] >= 0 ? std::pair{any_last[u], any_first[u]} : std::pair{kNever, kNever};
    };
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        return sig(a) < sig(b);
    });
    bool moved = false;
    for (std::int64_t b = 0; b < n_k; ++b)
        moved = moved || order[static_cast<std::size_t>(b)] != b;
    if (moved) {
        std::vector<std::int64_t> keys(static_cast<std::size_t>(n_k));
        for (std::int64_t b = 0; b < n_k; ++b) // new key b = base key order[b]
            keys[static_cast<std::size_t>(b)] =
                key_rank[static_cast<std::size_t>(order[static_cast<std::size_t>(b)])];
        o.keys = std::move(keys);
    } else {
        o.residue_only = reordered != nullptr;
    }
    return o;
}

std::vector<std::int64_t> inverse(const std::vector<std::int64_t>& order) {
    std::vector<std::int64_t> inv(order.size());
    for (std::size_t a = 0; a < order.size(); ++a)
        inv[static_cast<std::size_t>(order[a])] = static_cast<std::int64_t>(a);
    return inv;
}

Support reorder(const Support& s, const Orders& o, std::int64_t residue_g) {
    if (o.identity())
        return s;
    const std::int64_t n_q = s.n_q(), n_k = s.n_k();
    const std::vector<std::int64_t> key_new = inverse(o.keys);
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(n_q) + 1, 0);
    const auto old_row = [&](std::int64_t a) {
        return o.rows.empty() ? a : o.rows[static_cast<std::size_t>(a)];
    };
    for (std::int64_t a = 0; a < n_q; ++a)
        offsets[static_cast<std::size_t>(a) + 1] =
            offsets[static_cast<std::size_t>(a)] + s.row_nonzeros(old_row(a));
    std::vector<std::int64_t> cols = index_words(offsets.back());
    // dilated:256:4 at N = 16384: 8.4 million keys looked up, or 16384 intervals written
    const bool intervals = residue_g >= 2 && s.row_step() == residue_g && !key_new.empty();
    parallel_for_tiles(n_q, [&](std::int64_t a, int) {
        auto* out = cols.data() + offsets[static_cast<std::size_t>(a)];
        const auto row = s.row(old_row(a));
        if (intervals && !row.empty()) {
            std::iota(out, out + row.size(), key_new[static_cast<std::size_t>(row.front())]);
            return;
        }
        std::int64_t c = 0;
        for (const std::int64_t j : row)
            out[c++] = key_new.empty() ? j : key_new[static_cast<std::size_t>(j)];
        if (!std::is_sorted(out, out + c)) // a residue order keeps each row's keys in order
            std::sort(out, out + c);
    });
    return {BuiltRows{}, n_q, n_k, std::move(offsets), std::move(cols)};
}

} // namespace ioattn::sparse::detail
