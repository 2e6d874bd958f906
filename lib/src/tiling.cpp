// ioattn::Tiling: residency of each schedule, the I/O-optimal tiling for a memory size, and the
// tuned tiling for this CPU.

#include "io_cost_util.hpp"

#include <ioattn/error.hpp>
#include <ioattn/tiling.hpp>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>

namespace ioattn {

using detail::ceil_div;

namespace {

std::int64_t isqrt(std::int64_t x) {
    auto r = static_cast<std::int64_t>(std::sqrt(static_cast<double>(x)));
    while (r * r > x)
        --r;
    while ((r + 1) * (r + 1) <= x)
        ++r;
    return r;
}

/// Fused forward residency, r = min(Br, n_q), c = min(Bc, n_k), rp = r lane-padded (see
/// forward_fused.cpp): the task's scratch, Q_i^T (d x rp), S^T (c x rp), O_i^T (d_v x rp) and
/// m, l, alpha (rp each), plus the rows it streams at a time: Q_i while packing (r d), K_j and
/// V_j (c (d + d_v)), O_i and L_i while writing (r (d_v + 1)).
/// The sparse kernels (sparse/src/kernels/tile/forward_fused.cpp) also hold a gathered copy of K_c
/// and V_c (c (d + d_v)) and walk indices: each row's cursor and key run (lo, hi and its position:
/// 4 r), the chunk's keys (c), and one line of each row's column indices (r kLanePad).
std::int64_t
fused_forward_resident(const Problem& p, std::int64_t rows, std::int64_t cols, Kernels st) {
    const std::int64_t r = std::min(rows, p.n_q);
    const std::int64_t c = std::min(cols, p.n_k);
    const std::int64_t rp = lane_padded(r);
    const std::int64_t dense =
        rp * (p.d + c + p.d_v + 3) + std::max({r * p.d, c * (p.d + p.d_v), r * (p.d_v + 1)});
    if (st == Kernels::dense)
        return dense;
    return dense + c * (p.d + p.d_v) + kIndexWords * (4 * r + c) + r * kLanePad;
}

/// Materialized forward residency with feature chunks of width w: the larger of phase 1 (S
/// tile, Q and K chunks, stats) and phase 2 (O chunk, S tile, V chunk, stats).
std::int64_t materialized_forward_resident(const Problem& p, std::int64_t b, std::int64_t w) {
    const std::int64_t r = std::min(b, p.n_q);
    const std::int64_t c = std::min(b, p.n_k);
    const std::int64_t kd = std::min(w, p.d);
    const std::int64_t kv = std::min(w, p.d_v);
    const std::int64_t phase1 = r * c + r * kd + c * kd + 2 * r;
    const std::int64_t phase2 = r * kv + r * c + c * kv + 2 * r;
    return std::max(phase1, phase2);
}

/// Fused backward residency, R = tiling.rows resident keys, C = tiling.cols streamed queries
/// (see backward_fused.cpp), rp, cp, dw = R, C, d lane-padded: the largest of pass 0 (O_i,
/// dO_i, D_i), pass A and pass R (a dQ row block and one dw-wide partial). Pass A holds its
/// scratch, K_j^T and V_j^T packed (d x rp, d_v x rp), the S/P and dP/dS tiles (cp x rp each),
/// the dK_j^T and dV_j^T accumulators (d x rp, d_v x rp), K_j row-major (rp x dw) and per-lane
/// L, D and ones (max(rp, cp, dw) each), plus what streams at a time: K_j, V_j while packing and
/// dK_j, dV_j while writing (R (d + d_v)), or a query block's Q_i, dO_i, L_i, D_i and its dw-wide
/// dQ partial (C (d + d_v + 2 + dw)).
/// The sparse kernels (sparse/src/kernels/tile/backward_fused.cpp) lay out score tiles of
/// lane_padded(max(C, R)) lanes and also hold a C x dw dQ tile, the gathered Q and dO rows
/// (C (d + d_v)) and the indices they walk: each key row's cursor and query run (4 R),
/// the chunk's queries (C), and one line of each key row's column indices (R kLanePad); their
/// pass R holds 2 r d (a dQ row block and one partial row block).
std::int64_t
fused_backward_resident(const Problem& p, std::int64_t res, std::int64_t str, Kernels st) {
    const std::int64_t ra = std::min(res, p.n_k), ca = std::min(str, p.n_q);
    const std::int64_t rb = std::min(res, p.n_q);
    const std::int64_t rp = lane_padded(ra), dw = lane_padded(p.d);
    const std::int64_t pass0 = rb * (2 * p.d_v + 1);
    const std::int64_t stream = std::max(ra * (p.d + p.d_v), ca * (p.d + p.d_v + 2 + dw));
    if (st == Kernels::sparse) {
        const std::int64_t cp = lane_padded(std::max(ca, ra));
        const std::int64_t scratch = 2 * (p.d + p.d_v) * rp + 2 * cp * rp + (rp + ca) * dw +
                                     ca * (p.d + p.d_v) + 3 * std::max(cp, dw);
        const std::int64_t index = kIndexWords * (4 * ra + ca) + ra * kLanePad;
        return std::max({pass0, scratch + stream + index, 2 * rb * p.d});
    }
    const std::int64_t cp = lane_padded(ca);
    const std::int64_t scratch =
        2 * (p.d + p.d_v) * rp + 2 * cp * rp + rp * dw + 3 * std::max({rp, cp, dw});
    return std::max({pass0, scratch + stream, rb * (p.d + dw)});
}

/// Materialized backward residency (see backward_materialized.cpp), feature chunks of width
/// w, the largest phase: P (L_i resident), dV = P^T dO, dS = P o (dO V^T - D) (D_i resident),
/// dQ = dS K, dK = dS^T Q. r is the tallest row tile with a visible key (under causal masking
/// with n_q > n_k the full row tiles may see nothing); every row tile, visible or not, writes
/// its dQ chunks (rf x kd). The sparse kernels keep dO_i over a row tile's dS tiles when
/// d_v <= w (sparse/src/kernels/materialized/backward_materialized.cpp), beside both S tiles.
std::int64_t
materialized_backward_resident(const Problem& p, std::int64_t b, std::int64_t w, Kernels st) {
    const std::int64_t rf = std::min(b, p.n_q);
    const std::int64_t last0 = (p.n_q - 1) / b * b; // first row of the last row tile
    const std::int64_t r = last0 == 0 || p.visible_keys(last0 - 1) > 0 ? rf : p.n_q - last0;
    const std::int64_t c = std::min(b, p.n_k);
    const std::int64_t kd = std::min(w, p.d);
    const std::int64_t kv = std::min(w, p.d_v);
    const std::int64_t held = st == Kernels::sparse && p.d_v <= w ? r * kv : 0; // dO_i kept
    const std::int64_t d_s = r + std::max({2 * r * kv, r * c + r * kv + c * kv, held + 2 * r * c});
    return std::max({r + r * c + r * kd + c * kd, // P
                     c * kv + r * c + r * kv,     // dV
                     d_s,                         // dS
                     rf * kd,                     // dQ (zeros)
                     r * kd + r * c + c * kd});   // dQ, dK
}

std::int64_t resident(const Problem& p,
                      Schedule s,
                      Pass pass,
                      std::int64_t rows,
                      std::int64_t cols,
                      Kernels st = Kernels::dense,
                      std::int64_t depth = 0) {
    if (s == Schedule::fused)
        return pass == Pass::forward ? fused_forward_resident(p, rows, cols, st)
                                     : fused_backward_resident(p, rows, cols, st);
    const std::int64_t w = depth > 0 ? depth : rows;
    return pass == Pass::forward ? materialized_forward_resident(p, rows, w)
                                 : materialized_backward_resident(p, rows, w, st);
}

/// The largest x in [1, n] with fits(x) (residency grows with x), or 0 if fits(1) is false.
template <typename Fits>
std::int64_t largest_fitting(std::int64_t n, const Fits& fits) {
    std::int64_t lo = 0, hi = n;
    while (lo < hi) {
        const std::int64_t mid = hi - (hi - lo) / 2;
        if (fits(mid))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

std::optional<Tiling>
fused_backward_for_memory(const MemoryModel& m, const Problem& p, Kernels st) {
    // I/O falls with the resident block R; take the largest R with C = 1, then the largest C.
    const std::int64_t n = std::max(p.n_q, p.n_k);
    const auto fits = [&](std::int64_t r, std::int64_t c) {
        return fused_backward_resident(p, r, c, st) <= m.fast_words;
    };
    const std::int64_t rows = largest_fitting(n, [&](std::int64_t r) { return fits(r, 1); });
    if (rows < 1)
        return std::nullopt;
    const std::int64_t cols = largest_fitting(n, [&](std::int64_t c) { return fits(rows, c); });
    return Tiling{Schedule::fused, rows, cols};
}

std::optional<Tiling> fused_for_memory(const MemoryModel& m, const Problem& p, Kernels st) {
    // I/O depends on Br only (through ceil(n_q/Br)); take the largest Br with Bc = 1, then the
    // smallest Br with the same number of row blocks, and give the freed words to Bc.
    const auto fits = [&](std::int64_t r, std::int64_t c) {
        return fused_forward_resident(p, r, c, st) <= m.fast_words;
    };
    std::int64_t rows = largest_fitting(p.n_q, [&](std::int64_t r) { return fits(r, 1); });
    if (rows < 1)
        return std::nullopt;
    rows = ceil_div(p.n_q, ceil_div(p.n_q, rows));
    const std::int64_t cols = largest_fitting(p.n_k, [&](std::int64_t c) { return fits(rows, c); });
    return Tiling{Schedule::fused, rows, cols};
}

std::optional<Tiling>
materialized_for_memory(const MemoryModel& m, const Problem& p, Pass pass, Kernels kernels) {
    // b = floor(sqrt(M/4)), rounded down to whole 16-word lines from 16 on: a tile row of b
    // words then fills whole lines of the stored scores, whose rows are line-aligned, so a real
    // cache moves the words counted: at M = 2048 (b = 16, not 22) a simulated LRU cache of 2M
    // moves 1.07x the counted words forward, 1.02x backward (bench/cache_validate.py --check).
    std::int64_t b = isqrt(m.fast_words / 4);
    if (b >= kLanePad)
        b = b / kLanePad * kLanePad;
    if (b < 1)
        return std::nullopt;
    Tiling t{Schedule::materialized, b, b};
    if (resident(p, Schedule::materialized, pass, b, b, kernels) > m.fast_words)
        return std::nullopt;
    // The forward, and the sparse kernels' backward, give the words 4 b^2 leaves over (b is
    // rounded down) to whole feature rows when they fit: Q_i (and in the backward dO_i) is
    // then read once per row block and every pass over the stored scores is one chunk. Only
    // possible for M > d^2, where fused is the schedule of choice; it keeps the materialized
    // schedule's count what a cache of M words moves (d = 64, M = 8192: LRU at 4M moved 0.75x
    // the dense forward's count with chunks of b = 32, section 8).
    const std::int64_t full = std::max(p.d, p.d_v);
    if ((pass == Pass::forward || kernels == Kernels::sparse) && full > b &&
        resident(p, Schedule::materialized, pass, b, b, kernels, full) <= m.fast_words)
        t.depth = full;
    return t;
}

} // namespace

std::string_view to_string(Schedule s) {
    switch (s) {
    case Schedule::reference:
        return "reference";
    case Schedule::fused:
        return "fused";
    case Schedule::materialized:
        return "materialized";
    }
    return "?";
}

std::string_view to_string(Pass p) {
    return p == Pass::forward ? "forward" : "backward";
}

std::string_view to_string(Select s) {
    return s == Select::theory ? "theory" : "cost";
}

Schedule parse_schedule(std::string_view text) {
    for (Schedule s : {Schedule::reference, Schedule::fused, Schedule::materialized})
        if (text == to_string(s))
            return s;
    throw InvalidArgument("ioattn::parse_schedule: unknown schedule '" + std::string(text) +
                          "' (expected reference, fused or materialized)");
}

std::optional<Tiling> Tiling::try_for_memory(Schedule schedule,
                                             const MemoryModel& memory,
                                             const Problem& problem,
                                             Pass pass,
                                             Kernels kernels) {
    const Problem p = problem.resolved("ioattn::Tiling::for_memory");
    memory.validate("ioattn::Tiling::for_memory");
    switch (schedule) {
    case Schedule::fused:
        return pass == Pass::forward ? fused_for_memory(memory, p, kernels)
                                     : fused_backward_for_memory(memory, p, kernels);
    case Schedule::materialized:
        return materialized_for_memory(memory, p, pass, kernels);
    case Schedule::reference:
        break;
    }
    return Tiling{Schedule::reference, p.n_q, p.n_k};
}

Tiling Tiling::for_memory(Schedule schedule,
                          const MemoryModel& memory,
                          const Problem& problem,
                          Pass pass,
                          Kernels kernels) {
    if (auto t = try_for_memory(schedule, memory, problem, pass, kernels))
        return *t;
    const Problem p = problem.resolved("ioattn::Tiling::for_memory");
    throw CapacityError("ioattn::Tiling::for_memory: M = " + std::to_string(memory.fast_words) +
                        " words is too small for any " + std::string(to_string(schedule)) +
                        " tiling with d = " + std::to_string(p.d) +
                        ", d_v = " + std::to_string(p.d_v));
}

Tiling Tiling::tuned(Schedule schedule,
                     const MemoryModel& memory,
                     const Problem& problem,
                     Pass pass,
                     Kernels kernels) {
    const Problem p = problem.resolved("ioattn::Tiling::tuned");
    Tiling t = for_memory(schedule, memory, p, pass, kernels);
    if (schedule == Schedule::fused) {
        // Br = 192, Bc = 96: multiples of the micro-kernels' 6-key / 6-row blocking and of 16
        // lanes, so no remainder kernels run; Q_i^T, O_i and the 96 x 192 score tile stay in L2
        // and B=1, H=8, N=4096 still gives 176 tasks. Backward R = 64, C = 128: one 64-lane slab
        // of resident rows keeps the transposed accumulators and packed operands small. Other
        // tilings of 64-256 rows and keys run within the noise (ioattn run --N 4096 --d 64
        // --heads 8 [--pass backward] --schedule fused --threads 2 --repeat 5; `ioattn bench
        // --suite dense` re-measures).
        const bool fwd = pass == Pass::forward;
        const Tiling hw{Schedule::fused,
                        std::min<std::int64_t>(fwd ? 192 : 64, p.n_q),
                        std::min<std::int64_t>(fwd ? 96 : 128, p.n_k)};
        if (hw.resident_words(p, pass, kernels) <= memory.fast_words)
            t = hw;
    } else if (schedule == Schedule::materialized) {
        // Square tiles of 64: a 64 x 64 score tile plus two 64-wide operand chunks in L1/L2.
        const Tiling hw{Schedule::materialized, 64, 64};
        if (hw.resident_words(p, pass, kernels) <= memory.fast_words)
            t = hw;
    }
    return t;
}

std::int64_t Tiling::resident_words(const Problem& problem, Pass pass, Kernels kernels) const {
    const Problem p = problem.resolved("ioattn::Tiling::resident_words");
    if (schedule != Schedule::reference)
        return resident(p, schedule, pass, rows, cols, kernels, depth);
    return p.n_q * p.n_k + (p.n_q + 2 * p.n_k) * p.d;
}

void Tiling::validate(std::string_view where,
                      const MemoryModel& memory,
                      const Problem& problem,
                      Pass pass,
                      Kernels kernels) const {
    const std::string w(where);
    if (rows < 1 || cols < 1)
        throw InvalidArgument(w + ": tiling " + std::to_string(rows) + " x " +
                              std::to_string(cols) + " (expected sizes >= 1)");
    if (schedule == Schedule::materialized && rows != cols)
        throw InvalidArgument(w + ": materialized tiling " + std::to_string(rows) + " x " +
                              std::to_string(cols) + " is not square");
    if (depth < 0 || (depth > 0 && (schedule != Schedule::materialized ||
                                    (pass == Pass::backward && kernels == Kernels::dense))))
        throw InvalidArgument(w + ": tiling depth " + std::to_string(depth) +
                              " (expected 0, or >= 1 for the materialized schedule, not the dense "
                              "backward)");
    memory.validate(w.c_str());
    const std::int64_t need = resident_words(problem, pass, kernels);
    if (need > memory.fast_words)
        throw CapacityError(w + ": " + std::string(to_string(schedule)) + " tiling " +
                            std::to_string(rows) + " x " + std::to_string(cols) + " holds " +
                            std::to_string(need) +
                            " words > M = " + std::to_string(memory.fast_words));
}

std::ostream& operator<<(std::ostream& os, const Tiling& t) {
    os << to_string(t.schedule) << ' ' << t.rows << 'x' << t.cols;
    if (t.depth > 0)
        os << " depth " << t.depth;
    return os;
}

namespace {

/// The smallest M of one schedule, by doubling then bisection; 0 if none up to 2^50.
std::int64_t smallest_of(Schedule schedule, const Problem& p, Pass pass, Kernels k) {
    const auto fits = [&](std::int64_t m) {
        return Tiling::try_for_memory(schedule, MemoryModel{m}, p, pass, k).has_value();
    };
    std::int64_t hi = 1;
    while (!fits(hi)) {
        if (hi > (std::int64_t{1} << 50))
            return 0;
        hi *= 2;
    }
    std::int64_t lo = hi / 2; // does not fit (or 0)
    while (hi - lo > 1) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        (fits(mid) ? hi : lo) = mid;
    }
    return hi;
}

} // namespace

std::int64_t smallest_memory(const Problem& problem,
                             Pass pass,
                             std::optional<Schedule> schedule,
                             Kernels kernels) {
    const Problem p = problem.resolved("ioattn::smallest_memory");
    if (schedule)
        return *schedule == Schedule::reference ? 1 : smallest_of(*schedule, p, pass, kernels);
    const std::int64_t f = smallest_of(Schedule::fused, p, pass, kernels);
    const std::int64_t m = smallest_of(Schedule::materialized, p, pass, kernels);
    return f == 0 || m == 0 ? std::max(f, m) : std::min(f, m);
}

std::int64_t backward_dq_groups(const Problem& problem, std::int64_t key_blocks) {
    constexpr std::int64_t kTasks = 16, kMaxGroups = 8;
    const std::int64_t kv = std::max<std::int64_t>(1, problem.batch * problem.kv_heads);
    const std::int64_t g = std::min((kTasks + kv - 1) / kv, kMaxGroups);
    return std::clamp<std::int64_t>(std::min(g, key_blocks), 1, kMaxGroups);
}

} // namespace ioattn
