// ioattn::ff::experiment_epochs: epoch check of the real dense forward schedules
// Field: F_p, p = config.prime(), for the protocol replay (Q random, K Vandermonde).
// Instances: (N, d) in N in {16, 64, 256} plus config N, d in {2, 8, 32} plus config d (d <= N),
//   schedule fused and materialized, M = config M or the sweep 4d, 8d, ... <= N d plus N d
//   (points where the schedule has no tiling are skipped). Each instance dry-runs the schedule
//   (ioattn::dense::forward_*<float, DryRunCounter>, Tiling::for_memory) with a recorded trace.
// Check per instance: every entry of S completes once; for every epoch t of M I/Os,
//   |I_t| <= B_max = max(8M^2/d^2, 8M) (integers), r_R(I_t) <= 2M, r_C(I_t) <= 2M; and on the
//   busiest epoch the replay of Thm 4.4's protocol recomputes I_t from a message of <= 2M field
//   elements. Reported: max over instances of |I_t| / B_max.
// Ops: one dry run and O(total I/O) trace walks per instance.
// Tests: tests/finite_field/experiments_test.cpp, tests/finite_field/epochs_test.cpp

#include "experiments_impl.hpp"

#include <ioattn/dense/forward.hpp>
#include <ioattn/ff/construct.hpp>
#include <ioattn/ff/epochs.hpp>
#include <ioattn/tiling.hpp>
#include <ioattn/view.hpp>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>

namespace ioattn::ff {

namespace {

struct Instance {
    std::int64_t n = 0;
    std::int64_t d = 0;
    std::int64_t m = 0;
    Schedule schedule = Schedule::fused;
    Tiling tiling;
    std::uint64_t seed = 0;
};

std::vector<TraceEvent> record(const Instance& in) {
    Problem problem;
    problem.n_q = in.n;
    problem.n_k = in.n;
    problem.d = in.d;
    ForwardArgs<float> args;
    args.problem = problem;
    args.q = TensorView<const float>::packed(nullptr, 1, 1, in.n, in.d);
    args.k = TensorView<const float>::packed(nullptr, 1, 1, in.n, in.d);
    args.v = TensorView<const float>::packed(nullptr, 1, 1, in.n, in.d);
    args.o = TensorView<float>::packed(nullptr, 1, 1, in.n, in.d);
    args.lse = TensorView<float>::packed(nullptr, 1, 1, in.n, 1);
    DryRunCounter counter(in.m, true);
    if (in.schedule == Schedule::fused)
        dense::forward_fused<float, DryRunCounter>(args, in.tiling, MemoryModel{in.m}, counter);
    else
        dense::forward_materialized<float, DryRunCounter>(
            args, in.tiling, MemoryModel{in.m}, counter);
    return counter.trace();
}

detail::Outcome run_one(const Instance& in, const Prime& p, bool repeated_points) {
    const std::vector<TraceEvent> trace = record(in);
    const EpochStats s = epoch_stats(trace, in.n, in.n, in.d, in.m);
    detail::Outcome o;
    o.epoch_ratio = s.max_ratio;
    std::ostringstream why;
    // |I_t| <= max(8M^2/d^2, 8M), exactly: |I_t| d^2 <= 8 M^2 or |I_t| <= 8M
    __extension__ using I128 = __int128; // M <= 2^40: 8 M^2 needs more than 64 bits
    const auto entries = static_cast<I128>(s.max_entries);
    if (!(entries * in.d * in.d <= 8 * static_cast<I128>(in.m) * in.m ||
          entries <= 8 * static_cast<I128>(in.m)))
        why << " |I_t|=" << s.max_entries << " > B_max=" << s.entry_limit;
    if (s.max_rank_rows > 2 * in.m || s.max_rank_cols > 2 * in.m)
        why << " r_R=" << s.max_rank_rows << " r_C=" << s.max_rank_cols << " > 2M";
    if (!s.complete_once)
        why << " some score entry is completed twice or never";
    if (s.max_entries > 0) {
        const Matrix q = random_matrix(in.n, in.d, p, in.seed);
        const Matrix k = vandermonde(in.n, in.d, p, repeated_points);
        const ProtocolReplay r = replay_epoch(trace, q, k, in.m, s.busiest, p);
        if (!r.recomputed)
            why << " replay of epoch " << r.epoch << ": " << r.detail;
        if (r.message > 2 * in.m)
            why << " replay of epoch " << r.epoch << ": message " << r.message << " > 2M";
    }
    if (!why.str().empty()) {
        std::ostringstream where;
        where << "epochs " << to_string(in.schedule) << " N=" << in.n << " d=" << in.d
              << " M=" << in.m << " tiling " << in.tiling << ":" << why.str();
        o.ok = false;
        o.failure = where.str();
    }
    return o;
}

} // namespace

Result experiment_epochs(const Config& config) {
    config.validate("ioattn::ff::experiment_epochs");
    const detail::Stopwatch clock;
    const Prime p = Prime::for_size(config.prime(), config.n, config.negative_control);
    std::set<std::int64_t> ns{config.n};
    for (std::int64_t n : {16, 64, 256})
        if (n <= config.n)
            ns.insert(n);
    std::vector<Instance> inst;
    std::int64_t skipped = 0; // (shape, schedule, M) with no tiling that fits M
    for (std::int64_t n : ns) {
        std::set<std::int64_t> ds{std::min(config.d, n)};
        for (std::int64_t d : {2, 8, 32})
            if (d <= std::min(config.d, n))
                ds.insert(d);
        for (std::int64_t d : ds) {
            std::set<std::int64_t> ms;
            if (config.m > 0) {
                ms.insert(config.m);
            } else {
                for (std::int64_t m = 4 * d; m < n * d; m *= 2)
                    ms.insert(m);
                ms.insert(n * d);
            }
            Problem problem;
            problem.n_q = n;
            problem.n_k = n;
            problem.d = d;
            for (std::int64_t m : ms)
                for (Schedule s : {Schedule::fused, Schedule::materialized})
                    if (auto t = Tiling::try_for_memory(s, MemoryModel{m}, problem))
                        inst.push_back({n, d, m, s, *t, derive_seed(config.seed, 70, inst.size())});
                    else
                        ++skipped;
        }
    }
    Result result;
    result.name = "epochs";
    detail::tally(
        result,
        detail::run_instances(config, static_cast<std::int64_t>(inst.size()), [&](std::int64_t i) {
            return run_one(inst[static_cast<std::size_t>(i)], p, config.negative_control);
        }));
    result.note =
        "dense forward fused + materialized, N<=" + std::to_string(config.n) +
        " d<=" + std::to_string(config.d) +
        (config.m > 0 ? ", M=" + std::to_string(config.m) : std::string(", M in 4d..Nd")) +
        ", p=" + std::to_string(p.p) + ", " + std::to_string(skipped) +
        " points skipped (no tiling fits M)";
    result.seconds = clock.seconds();
    return result;
}

} // namespace ioattn::ff
