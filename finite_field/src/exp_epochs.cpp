// ioattn::ff::experiment_epochs: epoch check of every recorded schedule: dense and sparse,
// forward and backward, fused and materialized, sparse kernels with dense and sparse inputs
// Field: F_p, p = config.prime(), for the protocol replay (dense inputs: Q random, K
//   Vandermonde; sparse inputs: random nonzero values on the stored patterns).
// Instances: N in {16, 64, 256, 1024} plus config N (<= N), d in {2, 8, 32, 64} plus config d
//   (<= min(d, N)), M = config M or, per schedule, its smallest M with a tiling (at least
//   max(4d, 64): below 64 words a tile is 3 x 3 or smaller, a trace of ~N^2 d blocks),
//   doubling, < N d, plus N d; every schedule kind
//   of record.hpp (points where the schedule has no tiling are skipped); the sparse kinds over
//   every pattern family (record.hpp) or the one config pattern, wherever it fits N. Each
//   instance dry-runs its schedule (Tiling::try_for_memory) with a recorded trace.
// Check per instance: every allowed entry of S completes once; for every epoch t of M I/Os and
//   inner dimension w, |I_t(w)| <= B(M, w) and r_R^w, r_C^w <= 2M (epochs.cpp derives the
//   sparse-input budget; dense inputs: w = d, B_max); on the busiest epoch and the middle one
//   the replay of Thm 4.4's protocol with the recorded start state holds (start state within
//   the acquired words, message <= 2M, I_t recomputed).
// Controls that must fail: a real trace whose completions are all moved into one epoch (the
//   budget must break) and the same trace without its acquire / release events (the replay
//   must find reads outside any scope).
// Reported: max |I_t(w)| / B(M, w) and max message / 2M, in total and per schedule (rows).
// Ops: one dry run (recorded into a trace buffer reused across instances, TraceBuffers), one
//   stats pass and two replays (O(trace)) per instance.
// Tests: tests/finite_field/experiments_test.cpp, tests/finite_field/epochs_test.cpp

#include "experiments_impl.hpp"
#include "record.hpp"

#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/epochs.hpp>
#include <ioattn/io_cost.hpp>
#include <ioattn/tiling.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <sstream>
#include <string>

namespace ioattn::ff {

namespace {

struct EpochInstance {
    detail::ScheduleKind kind;
    std::string spec; // the support (sparse kinds)
    std::int64_t n = 0;
    std::int64_t d = 0;
    std::int64_t m = 0;
    std::int64_t row = 0; // the schedule kind's line in Result::rows
    std::uint64_t seed = 0;
};

// Q or K for the replay: random nonzero values on a stored pattern, else `dense`.
Matrix
operand(const std::optional<RowPattern>& pat, Matrix dense, const Prime& p, std::uint64_t seed) {
    if (!pat)
        return dense;
    Matrix out(dense.rows(), dense.cols());
    std::mt19937_64 rng(seed);
    for (std::int64_t r = 0; r < pat->rows(); ++r)
        for (std::int64_t e = pat->offsets[static_cast<std::size_t>(r)];
             e < pat->offsets[static_cast<std::size_t>(r + 1)];
             ++e)
            out(r, pat->cols[static_cast<std::size_t>(e)]) =
                1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(p.p - 1));
    return out;
}

std::string where(const EpochInstance& in, const Tiling& t) {
    std::ostringstream w;
    w << "epochs " << detail::label(in.kind) << (in.spec.empty() ? "" : " pattern " + in.spec)
      << " N=" << in.n << " d=" << in.d << " M=" << in.m << " tiling " << t << ":";
    return w.str();
}

// The checks of one instance on its recorded run (nullopt: no tiling fit, a failure).
detail::Outcome check_one(const EpochInstance& in,
                          const std::optional<detail::Recorded>& rec,
                          const Prime& p,
                          bool repeated_points) {
    detail::Outcome o;
    o.row = in.row;
    if (!rec) { // enumeration only lists points with a tiling
        o.ok = false;
        o.failure =
            "epochs " + detail::label(in.kind) + ": no tiling fits M=" + std::to_string(in.m);
        return o;
    }
    const EpochShape shape = rec->shape();
    const EpochStats s = epoch_stats(rec->trace, shape, in.m);
    o.epoch_ratio = s.max_ratio;
    std::ostringstream why;
    if (!s.within_budget)
        why << " |I_t(w)| > B(M, w): epoch " << s.busiest << " w=" << s.worst_w << " ratio "
            << s.max_ratio;
    if (s.max_rank_rows > 2 * in.m || s.max_rank_cols > 2 * in.m)
        why << " r_R=" << s.max_rank_rows << " r_C=" << s.max_rank_cols << " > 2M";
    if (!s.complete_once)
        why << " some allowed score entry is completed twice or never";
    if (s.max_entries > 0) {
        const Matrix q = operand(rec->q, random_matrix(in.n, in.d, p, in.seed), p, in.seed + 1);
        const Matrix k =
            operand(rec->k, vandermonde(in.n, in.d, p, repeated_points), p, in.seed + 2);
        for (std::int64_t t : std::set<std::int64_t>{s.busiest, s.epochs / 2}) {
            const ProtocolReplay r = replay_epoch(rec->trace, shape, q, k, in.m, t, p);
            const double ratio = static_cast<double>(r.message) / static_cast<double>(2 * in.m);
            o.message_ratio =
                std::isnan(o.message_ratio) ? ratio : std::max(o.message_ratio, ratio);
            if (!r.holds)
                why << " replay of epoch " << t << ": " << r.detail;
        }
    }
    if (!why.str().empty()) {
        o.ok = false;
        o.failure = where(in, rec->tiling) + why.str();
    }
    return o;
}

// Records the instance's run into a reused buffer and checks it.
detail::Outcome run_one(const EpochInstance& in,
                        const Prime& p,
                        bool repeated_points,
                        detail::TraceBuffers& buffers) {
    auto rec =
        in.kind.sparse
            ? detail::record_sparse(in.kind, in.spec, in.n, in.d, in.m, in.seed, buffers.take())
            : detail::record_dense(in.kind, in.n, in.d, in.m, buffers.take());
    detail::Outcome o = check_one(in, rec, p, repeated_points);
    if (rec)
        buffers.give(std::move(rec->trace));
    return o;
}

// The controls: a dense fused forward trace at its smallest M with every completion moved into
// one epoch, and the same trace with its acquire and release events dropped. Passes when both
// checks fail; N = 128, d = 32 keep N^2 above B_max at the smallest fused M (checked), and the
// replay uses its own p > N (a given --p may be below 128).
detail::Outcome run_controls(std::int64_t row) {
    const Prime p = Prime::for_size(1000003, 128);
    constexpr std::int64_t kN = 128, kD = 32;
    const detail::ScheduleKind fused{Pass::forward, Schedule::fused, false, false};
    const std::int64_t m = ioattn::smallest_memory(
        detail::square_problem(kN, kD), fused.pass, fused.schedule, fused.kernels());
    const auto rec = detail::record_dense(fused, kN, kD, m);
    detail::Outcome o;
    o.row = row;
    if (!rec || static_cast<double>(kN * kN) <= ioattn::epoch_entry_limit(m, kD)) {
        o.ok = false;
        o.failure = "epoch control: no fused forward tiling at N=128 d=32 whose B_max is below "
                    "N^2 (smallest M " +
                    std::to_string(m) + ")";
        return o;
    }
    std::vector<TraceEvent> inflated; // the completions first, then every move
    std::vector<TraceEvent> moves;
    std::vector<TraceEvent> unscoped;
    for (const TraceEvent& ev : rec->trace) {
        (ev.kind == TraceEvent::Kind::complete ? inflated : moves).push_back(ev);
        if (ev.kind != TraceEvent::Kind::acquire && ev.kind != TraceEvent::Kind::release)
            unscoped.push_back(ev);
    }
    inflated.insert(inflated.end(), moves.begin(), moves.end());
    const EpochStats s = epoch_stats(inflated, kN, kN, kD, m);
    const Matrix q = random_matrix(kN, kD, p, 5);
    const Matrix k = vandermonde(kN, kD, p);
    const ProtocolReplay r = replay_epoch(unscoped, q, k, m, 1, p);
    if (s.within_budget || r.holds) {
        o.ok = false;
        o.failure = std::string("epoch control passed unexpectedly: ") +
                    (s.within_budget ? "an epoch completing all " + std::to_string(kN * kN) +
                                           " entries stayed within budget"
                                     : "a trace without acquire/release replayed");
    }
    return o;
}

std::vector<std::int64_t>
sweep(std::int64_t top, std::initializer_list<std::int64_t> grid, std::int64_t cap) {
    std::set<std::int64_t> out{std::min(top, cap)};
    for (std::int64_t v : grid)
        if (v <= std::min(top, cap))
            out.insert(v);
    return {out.begin(), out.end()};
}

// The M of one schedule at N x d: the given M if the schedule has a tiling for it; else the
// sweep from the schedule's smallest M (at least max(4d, 64): below that a tile is 3 x 3 or
// smaller, a trace of ~N^2 d blocks), doubling while < N d, plus N d when it fits. Empty: no
// tiling (the point is skipped).
std::vector<std::int64_t>
memories(const detail::ScheduleKind& kind, std::int64_t n, std::int64_t d, std::int64_t given) {
    const std::int64_t smallest = ioattn::smallest_memory(
        detail::square_problem(n, d), kind.pass, kind.schedule, kind.kernels());
    if (given > 0)
        return smallest > 0 && given >= smallest ? std::vector<std::int64_t>{given}
                                                 : std::vector<std::int64_t>{};
    if (smallest == 0)
        return {};
    const std::int64_t first = std::max({smallest, 4 * d, std::int64_t{64}});
    std::vector<std::int64_t> ms{first};
    for (std::int64_t m = std::max<std::int64_t>(4 * d, 64); m < n * d; m *= 2)
        if (m > first)
            ms.push_back(m);
    if (n * d > first)
        ms.push_back(n * d);
    return ms;
}

} // namespace

Result experiment_epochs(const Config& given) {
    const Config config = given.sized_for("epochs");
    config.validate("ioattn::ff::experiment_epochs");
    const detail::Stopwatch clock;
    const Prime p = Prime::for_size(config.prime(), config.n, config.negative_control);
    const std::vector<detail::ScheduleKind> kinds = detail::schedule_kinds();
    Result result;
    result.name = "epochs";
    for (const auto& kind : kinds)
        result.rows.push_back({detail::label(kind)});
    result.rows.push_back({"controls (must fail)"});
    std::vector<EpochInstance> inst;
    detail::TraceBuffers buffers;
    std::int64_t skipped = 0; // (shape, schedule, M) with no tiling that fits M
    const std::vector<std::int64_t> ns = sweep(config.n, {16, 64, 256, 1024}, config.n);
    for (auto it = ns.rbegin(); it != ns.rend(); ++it) { // the largest first: balanced tasks
        const std::int64_t n = *it;
        const std::vector<std::string> specs = config.pattern.empty() ? detail::pattern_families(n)
                                               : detail::pattern_fits(config.pattern, n)
                                                   ? std::vector<std::string>{config.pattern}
                                                   : std::vector<std::string>{};
        for (std::int64_t d : sweep(config.d, {2, 8, 32, 64}, n)) {
            for (std::size_t r = 0; r < kinds.size(); ++r) {
                const auto& kind = kinds[r];
                const std::vector<std::int64_t> ms = memories(kind, n, d, config.m);
                skipped += ms.empty() ? 1 : 0;
                for (std::int64_t m : ms)
                    for (const std::string& spec :
                         kind.sparse ? specs : std::vector<std::string>{""})
                        inst.push_back({kind,
                                        spec,
                                        n,
                                        d,
                                        m,
                                        static_cast<std::int64_t>(r),
                                        derive_seed(config.seed, 70, inst.size())});
            }
        }
    }
    detail::tally(result,
                  detail::run_instances(
                      config, static_cast<std::int64_t>(inst.size()) + 1, [&](std::int64_t i) {
                          if (i == static_cast<std::int64_t>(inst.size()))
                              return run_controls(static_cast<std::int64_t>(kinds.size()));
                          return run_one(inst[static_cast<std::size_t>(i)],
                                         p,
                                         config.negative_control,
                                         buffers);
                      }));
    result.note =
        std::to_string(kinds.size()) + " schedules, N<=" + std::to_string(config.n) +
        " d<=" + std::to_string(config.d) +
        (config.m > 0 ? ", M=" + std::to_string(config.m)
                      : std::string(", M from each schedule's smallest (>= max(4d,64)) to Nd")) +
        (config.pattern.empty() ? ", every pattern family" : ", pattern " + config.pattern) +
        ", p=" + std::to_string(p.p) + ", " + std::to_string(skipped) +
        " (shape, schedule) points skipped (no tiling fits), 2 controls";
    result.seconds = clock.seconds();
    return result;
}

} // namespace ioattn::ff
