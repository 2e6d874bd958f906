// Closed-form I/O of the dense schedules, the lower bounds of Saha & Ye and Li et al., and the
// selection between schedules. Every formula here mirrors the loop structure of the kernel named
// in its comment; tests hold the kernels' counted I/O equal to it.

#include "io_cost_util.hpp"

#include <ioattn/error.hpp>
#include <ioattn/io_cost.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace ioattn {

using detail::ceil_div;
using detail::require_schedule;

namespace {

/// Keys visible to some row of the row block [i0, i0 + r): the block reads K/V rows [0, end).
std::int64_t block_kv_end(const Problem& p, std::int64_t i0, std::int64_t r) {
    return p.visible_keys(i0 + r - 1);
}

/// Total over all slices: per-query-head cost times batch*heads.
IoReport scale_slices(const Problem& p, IoReport per_slice, std::int64_t peak) {
    return {per_slice.reads * p.batch_heads(), per_slice.writes * p.batch_heads(), peak};
}

} // namespace

IoReport io_cost_forward_fused(const Problem& problem, const Tiling& tiling) {
    const Problem p = problem.resolved("ioattn::io_cost_forward_fused");
    require_schedule(tiling, Schedule::fused, "ioattn::io_cost_forward_fused");
    IoReport slice;
    for (std::int64_t i0 = 0; i0 < p.n_q; i0 += tiling.rows) {
        const std::int64_t r = std::min(tiling.rows, p.n_q - i0);
        const std::int64_t kv_end = block_kv_end(p, i0, r);
        slice.reads += r * p.d + kv_end * (p.d + p.d_v); // Q_i; K_j, V_j for visible j
        slice.writes += r * p.d_v + r;                   // O_i, L_i
    }
    return scale_slices(p, slice, tiling.resident_words(p));
}

IoReport io_cost_forward_materialized(const Problem& problem, const Tiling& tiling) {
    const Problem p = problem.resolved("ioattn::io_cost_forward_materialized");
    require_schedule(tiling, Schedule::materialized, "ioattn::io_cost_forward_materialized");
    const std::int64_t b = tiling.rows, w = tiling.feature_chunk();
    const std::int64_t v_chunks = ceil_div(p.d_v, w);
    const std::int64_t kd = std::min(w, p.d), kv = std::min(w, p.d_v);
    IoReport slice;
    std::int64_t peak = 0;
    for (std::int64_t i0 = 0; i0 < p.n_q; i0 += b) {
        const std::int64_t r = std::min(b, p.n_q - i0);
        const std::int64_t kv_end = block_kv_end(p, i0, r);
        // resident: stats 2r, plus phase 1 (S tile, Q and K chunks) and phase 2 (O chunk, and
        // S tile and V chunk when a tile is visible); the first tile is the widest
        const std::int64_t c = kv_end > 0 ? std::min(b, p.n_k) : 0;
        peak = std::max(
            {peak, 2 * r + r * c + (c > 0 ? (r + c) * kd : 0), 2 * r + r * kv + r * c + c * kv});
        const std::int64_t tiles = ceil_div(kv_end, b);       // visible column tiles
        const std::int64_t cols = std::min(p.n_k, tiles * b); // their total width
        // phase 1: Q_i chunks once per tile (once per row block when d <= w), K_j chunks,
        // write S_ij
        slice.reads += (p.d <= w ? std::min<std::int64_t>(tiles, 1) : tiles) * r * p.d + cols * p.d;
        slice.writes += r * cols;
        // phase 2: per d_v chunk, read S_ij and the V_j chunk
        slice.reads += v_chunks * r * cols + cols * p.d_v;
        slice.writes += r * p.d_v + r; // O_i, L_i
    }
    return scale_slices(p, slice, peak);
}

IoReport io_cost_forward(const Problem& problem, const Tiling& tiling) {
    switch (tiling.schedule) {
    case Schedule::fused:
        return io_cost_forward_fused(problem, tiling);
    case Schedule::materialized:
        return io_cost_forward_materialized(problem, tiling);
    case Schedule::reference:
        break;
    }
    throw InvalidArgument("ioattn::io_cost_forward: the reference schedule has no I/O model");
}

double flop_count_forward(const Problem& problem) {
    const Problem p = problem.resolved("ioattn::flop_count_forward");
    return 2.0 * static_cast<double>(p.allowed_pairs()) * static_cast<double>(p.d + p.d_v) *
           static_cast<double>(p.batch_heads());
}

double flop_count_convention(const Problem& problem, Pass pass) {
    const Problem p = problem.resolved("ioattn::flop_count_convention");
    double f = 2.0 * static_cast<double>(p.batch_heads()) * static_cast<double>(p.n_q) *
               static_cast<double>(p.n_k) * static_cast<double>(p.d + p.d_v);
    if (p.causal)
        f /= 2.0;
    return pass == Pass::backward ? 2.5 * f : f;
}

double epoch_entry_limit(std::int64_t fast_words, std::int64_t d) {
    const double m = static_cast<double>(fast_words);
    const double dd = static_cast<double>(d);
    return std::max(8.0 * m * m / (dd * dd), 8.0 * m);
}

Bound forward_bound(const Problem& problem, const MemoryModel& memory) {
    const Problem p = problem.resolved("ioattn::forward_bound");
    memory.validate("ioattn::forward_bound");
    const double m = static_cast<double>(memory.fast_words);
    const double d = static_cast<double>(p.d);
    const double pairs = static_cast<double>(p.allowed_pairs());
    const double bh = static_cast<double>(p.batch_heads());
    const double kv = static_cast<double>(p.batch * p.kv_heads);
    Bound b;
    b.regime = m >= d * d ? "large-cache" : "small-cache";
    b.compulsory = bh * static_cast<double>(p.n_q * (p.d + p.d_v + 1)) +
                   kv * static_cast<double>(p.n_k * (p.d + p.d_v));
    b.leading = bh * std::min(pairs * d * d / m, pairs * d / std::sqrt(m));
    const double entries = bh * pairs;
    b.explicit_bound =
        m * std::max(0.0, std::ceil(entries / epoch_entry_limit(memory.fast_words, p.d)) - 1.0);
    return b;
}

Bound backward_bound(const Problem& problem, const MemoryModel& memory) {
    const Problem p = problem.resolved("ioattn::backward_bound");
    Bound b = forward_bound(p, memory);
    const double m = static_cast<double>(memory.fast_words);
    const double n = static_cast<double>(p.n_q);
    const double d = static_cast<double>(p.d);
    const double pairs = static_cast<double>(p.allowed_pairs());
    const double bh = static_cast<double>(p.batch_heads());
    const double kv = static_cast<double>(p.batch * p.kv_heads);
    // read Q, O, dO, L; write dQ (per query head); read K, V and write dK, dV (per kv head)
    b.compulsory = bh * static_cast<double>(p.n_q * (2 * p.d + 2 * p.d_v + 1)) +
                   kv * 2.0 * static_cast<double>(p.n_k * (p.d + p.d_v));
    b.theorem =
        bh * std::min((pairs * d * d + n * d * d * d) / m, (pairs * d + n * d * d) / std::sqrt(m));
    return b;
}

Bound bound(const Problem& problem, const MemoryModel& memory, Pass pass) {
    return pass == Pass::forward ? forward_bound(problem, memory) : backward_bound(problem, memory);
}

Schedule
select_schedule(const Problem& problem, const MemoryModel& memory, Select select, Pass pass) {
    const Problem p = problem.resolved("ioattn::select_schedule");
    const auto fused = Tiling::try_for_memory(Schedule::fused, memory, p, pass);
    const auto mat = Tiling::try_for_memory(Schedule::materialized, memory, p, pass);
    if (!fused && !mat)
        throw CapacityError("ioattn::select_schedule: M = " + std::to_string(memory.fast_words) +
                            " words is too small for any tiling with d = " + std::to_string(p.d));
    if (!fused)
        return Schedule::materialized;
    if (!mat)
        return Schedule::fused;
    if (select == Select::theory)
        return memory.fast_words >= p.d * p.d ? Schedule::fused : Schedule::materialized;
    const auto cost = [&](const Tiling& t) { return io_cost(p, t, pass).total(); };
    return cost(*fused) <= cost(*mat) ? Schedule::fused : Schedule::materialized;
}

std::int64_t
measured_crossover(const Problem& problem, Pass pass, std::int64_t lo, std::int64_t hi) {
    const Problem p = problem.resolved("ioattn::measured_crossover");
    if (lo < 1 || hi < lo)
        throw InvalidArgument("ioattn::measured_crossover: range [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "] (expected 1 <= lo <= hi)");
    const auto fused_wins = [&](std::int64_t m) {
        return select_schedule(p, MemoryModel{m}, Select::cost, pass) == Schedule::fused &&
               Tiling::try_for_memory(Schedule::fused, MemoryModel{m}, p, pass).has_value();
    };
    std::int64_t prev = lo;
    if (fused_wins(lo))
        return lo;
    for (double x = static_cast<double>(lo);; x *= 1.0905) { // 2^(1/8) steps
        const std::int64_t m = std::min(hi, std::max(prev + 1, static_cast<std::int64_t>(x)));
        if (fused_wins(m)) {
            std::int64_t a = prev; // loses
            std::int64_t b = m;    // wins
            while (b - a > 1) {
                const std::int64_t mid = a + (b - a) / 2;
                (fused_wins(mid) ? b : a) = mid;
            }
            return b;
        }
        if (m >= hi)
            return 0;
        prev = m;
    }
}

} // namespace ioattn
