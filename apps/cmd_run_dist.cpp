// ioattn run --dist ring|zigzag|sparse: one problem sharded over the MPI ranks (run_dist.hpp).
// Times the pass (--repeat r: median of the slowest rank's time), times the same messages with
// no compute (communication_only) for the share of communication not hidden, sums every rank's
// counted words against the closed forms (--count-io: the per-rank table with the sharding's
// lower bound), and --check compares with a single-process run on rank 0.

#include "commands.hpp"
#include "output.hpp"
#include "run_dist.hpp"
#include "run_dist_check.hpp"
#include "run_dist_data.hpp"
#include "run_dist_report.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/dist/comm_cost.hpp>
#include <ioattn/dist/ring.hpp>
#include <ioattn/dist/sparse_exchange.hpp>
#include <ioattn/error.hpp>
#include <ioattn/io_cost.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <mpi.h>

namespace ioattn::app {

namespace {

constexpr const char* kRunDistWhere = "run";

/// Initialises MPI (MPI_THREAD_FUNNELED) unless the caller did; finalises what it initialised.
class MpiSession {
public:
    MpiSession() {
        int initialized = 0;
        MPI_Initialized(&initialized);
        if (initialized == 0) {
            int provided = 0;
            MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
            owned_ = true;
        }
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
    }

    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    ~MpiSession() {
        if (owned_)
            MPI_Finalize();
    }

    [[nodiscard]] int rank() const { return rank_; }

    [[nodiscard]] int ranks() const { return ranks_; }

private:
    bool owned_ = false;
    int rank_ = 0;
    int ranks_ = 1;
};

/// Everything the run needs, resolved from the options alike on every rank.
struct Setup {
    Problem p;
    dist::WireBytes wire; ///< bytes per word on the wire, of --dtype
    Pass pass = Pass::forward;
    dist::Layout layout = dist::Layout::contiguous;
    std::optional<sparse::Support> support;
    Schedule schedule = Schedule::fused;
    MemoryModel memory;
    Tiling tiling;     ///< of the ranks' kernels (tuned for a rank's block)
    Tiling tiling_one; ///< of the single-process run of --check
    int threads = 1;
    int ranks = 1;
    int rank = 0;
};

/// The tuned tiling of `schedule` for M on `p`; an M below every such tiling is usage, naming
/// the smallest M that fits (ioattn::smallest_memory).
Tiling
tuned_tiling(Schedule schedule, const MemoryModel& m, const Problem& p, Pass pass, Kernels k) {
    if (!Tiling::try_for_memory(schedule, m, p, pass, k))
        throw InvalidArgument(std::string(kRunDistWhere) + ": M = " + std::to_string(m.fast_words) +
                              " words is below the smallest " + std::string(to_string(schedule)) +
                              " tiling for d = " + std::to_string(p.d) + " (needs M >= " +
                              std::to_string(smallest_memory(p, pass, schedule, k)) + ")");
    return Tiling::tuned(schedule, m, p, pass, k);
}

Setup setup_of(const DistRun& r, const MpiSession& mpi) {
    Setup s;
    s.p = problem_of(r.shared, kRunDistWhere);
    s.pass = pass_of(r.shared, kRunDistWhere);
    s.wire = r.shared.dtype == "bf16"     ? dist::wire_bytes_of<bf16>()
             : r.shared.dtype == "double" ? dist::wire_bytes_of<double>()
                                          : dist::wire_bytes_of<float>();
    s.ranks = mpi.ranks();
    s.rank = mpi.rank();
    s.layout = r.dist == "zigzag" ? dist::Layout::zigzag : dist::Layout::contiguous;
    if (r.dist == "sparse") {
        if (s.p.causal)
            throw UsageError(
                std::string(kRunDistWhere) +
                ": --causal with --dist sparse: use the 'causal' pattern (or '&causal')");
        s.support = sparse::parse_pattern(r.shared.pattern, s.p.n_q, s.p.n_k, r.shared.seed);
    } else if (r.shared.pattern != "dense") {
        throw UsageError(std::string(kRunDistWhere) + ": --dist " + r.dist +
                         " runs dense attention; --pattern " + r.shared.pattern +
                         " runs with --dist sparse");
    }
    const auto schedule = schedule_of(r.shared);
    if (schedule == Schedule::reference)
        throw UsageError(
            std::string(kRunDistWhere) +
            ": --schedule reference with --dist (expected fused, materialized or auto: fused)");
    s.schedule = schedule.value_or(Schedule::fused);
    s.memory = memory_of(r.shared, kRunDistWhere);
    const dist::Sharding queries(s.layout, s.p.n_q, s.ranks);
    const dist::Sharding keys(s.layout, s.p.n_k, s.ranks);
    Problem block = s.p;
    block.n_q = queries.max_rows();
    block.n_k = s.support ? s.p.n_k : keys.max_rows();
    block.causal = false;
    const Kernels kernels = s.support ? Kernels::sparse : Kernels::dense;
    s.tiling = tuned_tiling(s.schedule, s.memory, block, s.pass, kernels);
    s.tiling_one = tuned_tiling(s.schedule, s.memory, s.p, s.pass, kernels);
    s.threads = with_threads(r.shared.threads, [] { return max_concurrency(); });
    return s;
}

template <typename Scalar>
dist::PassStats
pass_once(const Setup& s, DistData<Scalar>& d, Pass pass, int threads, const dist::PassOptions& o) {
    NullCounter c;
    return with_threads(threads, [&] {
        if (s.support)
            return pass == Pass::backward
                       ? dist::sparse_backward(
                             MPI_COMM_WORLD, d.backward(), *s.support, s.tiling, s.memory, c, o)
                       : dist::sparse_forward(
                             MPI_COMM_WORLD, d.forward(), *s.support, s.tiling, s.memory, c, o);
        return pass == Pass::backward
                   ? dist::ring_backward(MPI_COMM_WORLD, d.backward(), s.tiling, s.memory, c, o)
                   : dist::ring_forward(MPI_COMM_WORLD, d.forward(), s.tiling, s.memory, c, o);
    });
}

double slowest(double x) {
    double m = 0;
    MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    const std::size_t n = x.size();
    return n % 2 == 1 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/// Timed passes: the median over runs of the slowest rank's time and of the slowest wait.
struct Timing {
    double seconds = 0;
    double wait_seconds = 0;
    dist::PassStats last; ///< this rank's last run
};

template <typename Scalar>
Timing
timed(const Setup& s, DistData<Scalar>& d, int repeat, int threads, const dist::PassOptions& o) {
    if (repeat > 1)
        (void)pass_once(s, d, s.pass, threads, o); // warm-up
    std::vector<double> t, w;
    Timing out;
    for (int i = 0; i < repeat; ++i) {
        out.last = pass_once(s, d, s.pass, threads, o);
        t.push_back(slowest(out.last.seconds));
        w.push_back(slowest(out.last.wait_seconds));
    }
    out.seconds = median(t);
    out.wait_seconds = median(w);
    return out;
}

/// Every rank's counted words on rank 0 (empty elsewhere).
std::vector<dist::CommReport> gather_counts(const dist::CommReport& mine, int ranks) {
    constexpr int kFields = 6;
    const std::int64_t x[kFields] = {mine.sent_words,
                                     mine.received_words,
                                     mine.sent_messages,
                                     mine.received_messages,
                                     mine.sent_bytes,
                                     mine.received_bytes};
    std::vector<std::int64_t> all(static_cast<std::size_t>(kFields * ranks));
    MPI_Gather(x, kFields, MPI_INT64_T, all.data(), kFields, MPI_INT64_T, 0, MPI_COMM_WORLD);
    std::vector<dist::CommReport> r;
    for (int i = 0; i < ranks; ++i) {
        const auto* a = all.data() + kFields * i;
        r.push_back({a[0], a[1], a[2], a[3], a[4], a[5]});
    }
    return r;
}

nlohmann::json
comm_json(const Setup& s, const std::vector<dist::CommReport>& counted, bool per_rank) {
    const dist::Sharding queries(s.layout, s.p.n_q, s.ranks);
    const dist::Sharding keys(s.layout, s.p.n_k, s.ranks);
    nlohmann::json rows = nlohmann::json::array();
    bool all_match = true;
    std::int64_t most = 0;
    std::int64_t most_bytes = 0;
    for (int r = 0; r < s.ranks; ++r) {
        const bool backward = s.pass == Pass::backward;
        const dist::CommReport closed =
            s.support
                ? (backward
                       ? dist::comm_cost_sparse_backward(s.p, *s.support, queries, keys, r, s.wire)
                       : dist::comm_cost_sparse_forward(s.p, *s.support, queries, keys, r, s.wire))
                : (backward ? dist::comm_cost_ring_backward(s.p, keys, r, s.wire)
                            : dist::comm_cost_ring_forward(s.p, keys, r, s.wire));
        const std::int64_t bound = s.support
                                       ? dist::comm_lower_bound(s.p, *s.support, queries, keys, r)
                                       : dist::comm_lower_bound(s.p, queries, keys, r);
        const dist::CommReport& c = counted[static_cast<std::size_t>(r)];
        all_match = all_match && c == closed;
        most = std::max(most, c.received_words);
        most_bytes = std::max(most_bytes, c.received_bytes);
        rows.push_back({{"rank", r},
                        {"sent_words", c.sent_words},
                        {"received_words", c.received_words},
                        {"sent_bytes", c.sent_bytes},
                        {"received_bytes", c.received_bytes},
                        {"closed_form_received_bytes", closed.received_bytes},
                        {"sent_messages", c.sent_messages},
                        {"received_messages", c.received_messages},
                        {"closed_form_received", closed.received_words},
                        {"matches_closed_form", c == closed},
                        {"lower_bound", bound},
                        {"ratio_to_bound",
                         bound > 0 ? nlohmann::json(static_cast<double>(c.received_words) /
                                                    static_cast<double>(bound))
                                   : nlohmann::json(nullptr)}});
    }
    nlohmann::json j = {{"received_words_max", most},
                        {"received_bytes_max", most_bytes},
                        {"matches_closed_form", all_match}};
    j["per_rank"] = per_rank ? rows : nlohmann::json(nullptr);
    return j;
}

nlohmann::json problem_json(const Setup& s, const DistRun& r) {
    const Problem& p = s.p;
    return {{"batch", p.batch},
            {"heads", p.heads},
            {"kv_heads", p.kv_heads},
            {"n_q", p.n_q},
            {"n_k", p.n_k},
            {"d", p.d},
            {"d_v", p.d_v},
            {"causal", p.causal},
            {"scale", p.scale},
            {"pass", std::string(to_string(s.pass))},
            {"pattern", r.shared.pattern},
            {"dtype", r.shared.dtype},
            {"dist", r.dist},
            {"layout", std::string(dist::to_string(s.layout))},
            {"ranks", s.ranks},
            {"threads", s.threads},
            {"schedule", std::string(to_string(s.schedule))},
            {"M", s.memory.fast_words},
            {"seed", r.shared.seed},
            {"repeat", r.repeat},
            {"tiling",
             {{"schedule", std::string(to_string(s.tiling.schedule))},
              {"rows", s.tiling.rows},
              {"cols", s.tiling.cols}}}};
}

template <typename Scalar>
nlohmann::json run_typed(const DistRun& r, const Setup& s) {
    DistData<Scalar> d(s.p, s.layout, s.ranks, s.rank, r.shared.seed);
    if (s.pass == Pass::backward) // O and L of the distributed forward
        (void)pass_once(s, d, Pass::forward, r.shared.threads, {});
    const Timing run = timed(s, d, r.repeat, r.shared.threads, {});
    const std::vector<dist::CommReport> counted = gather_counts(run.last.comm, s.ranks);
    nlohmann::json check = nullptr;
    if (r.check)
        check = check_distributed(MPI_COMM_WORLD,
                                  d,
                                  s.pass,
                                  s.support ? &*s.support : nullptr,
                                  s.tiling_one,
                                  s.memory,
                                  r.shared.threads);
    // rank 0 ran the single-process and reference pipelines alone: the other ranks must not
    // start the timed messages before it, or their wait for it would count as message time
    MPI_Barrier(MPI_COMM_WORLD);
    dist::PassOptions alone; // the same messages with no compute (overwrites d's outputs)
    alone.communication_only = true;
    const Timing comm = timed(s, d, r.repeat, r.shared.threads, alone);
    if (s.rank != 0)
        return nullptr;
    const double flops = s.support ? 4.0 * static_cast<double>(s.support->z_qk()) *
                                         static_cast<double>(s.p.d * s.p.batch_heads()) *
                                         (s.pass == Pass::backward ? 2.5 : 1.0)
                                   : flop_count_convention(s.p, s.pass);
    nlohmann::json j = problem_json(s, r);
    j["isa"] = std::string(to_string(active_isa())); // as the single-process run reports it
    if (r.shared.cache_bytes != kUnset)
        j["cache_bytes"] = r.shared.cache_bytes;
    if (s.support)
        j["z_qk"] = s.support->z_qk();
    j["seconds"] = run.seconds;
    j["gflops"] = flops / run.seconds * 1e-9;
    j["comm"] = comm_json(s, counted, r.count_io);
    j["comm"]["wait_seconds"] = run.wait_seconds;
    j["comm"]["communication_only_seconds"] = comm.seconds;
    j["comm"]["share_not_hidden"] =
        comm.seconds > 0 ? std::min(1.0, run.wait_seconds / comm.seconds) : 0.0;
    j["comm"]["share_of_time_waiting"] = run.wait_seconds / run.seconds;
    j["io"] = nullptr;
    j["check"] = check;
    return j;
}

} // namespace

void add_dist_option(CLI::App& cmd, std::string& dist) {
    cmd.add_option(
           "--dist",
           dist,
           "Shard the sequence over the MPI ranks (run under mpirun): ring (dense or --causal, "
           "contiguous shards), zigzag (the ring with zigzag shards: balanced causal work), sparse "
           "(--pattern SPEC, structure-driven exchange)")
        ->check(CLI::IsMember({"ring", "zigzag", "sparse"}));
}

/// Resolves the options on every rank. They all fail alike on bad usage: rank 0 writes the one
/// line then, and no rank leaves before it has (a rank that exits first makes mpirun end the
/// job, which can kill rank 0 before it prints).
/// The program's own copy of the message goes nowhere; its exit status is unchanged.
Setup agreed_setup(const DistRun& r, const MpiSession& mpi) {
    try {
        return setup_of(r, mpi);
    } catch (const std::exception& e) {
        if (mpi.rank() == 0) {
            const std::string what = e.what();
            std::cerr << "ioattn: " << what.substr(0, what.find('\n')) << '\n' << std::flush;
        }
        std::cerr.rdbuf(nullptr);
        MPI_Barrier(MPI_COMM_WORLD);
        throw;
    }
}

void run_distributed(const DistRun& r) {
    const MpiSession mpi;
    try {
        const Setup s = agreed_setup(r, mpi);
        const nlohmann::json j = r.shared.dtype == "double" ? run_typed<double>(r, s)
                                 : r.shared.dtype == "bf16" ? run_typed<bf16>(r, s)
                                                            : run_typed<float>(r, s);
        if (mpi.rank() != 0)
            return;
        if (r.shared.json)
            std::cout << j.dump(2) << '\n';
        else
            print_dist_text(j, r);
        if (!j["comm"]["matches_closed_form"].get<bool>())
            throw CheckFailed(std::string(kRunDistWhere) +
                              ": counted words or bytes differ from the closed form");
        if (!j["check"].is_null() && !j["check"]["passed"].get<bool>() &&
            j["check"].contains("tolerance"))
            throw CheckFailed(std::string(kRunDistWhere) + ": --check failed: error " +
                              sig(j["check"]["max_abs_error"].get<double>()) +
                              " above the bf16 tolerance " +
                              sig(j["check"]["tolerance"].get<double>()));
        if (!j["check"].is_null() && !j["check"]["passed"].get<bool>())
            throw CheckFailed(std::string(kRunDistWhere) + ": --check failed: max_abs_error " +
                              sig(j["check"]["max_abs_error"].get<double>()) +
                              " > 2 * single-process " +
                              sig(j["check"]["single_error"].get<double>()) + " + tiny");
    } catch (...) {
        if (mpi.rank() != 0) // the same error as rank 0's: one message, from rank 0
            std::cerr.rdbuf(nullptr);
        throw;
    }
}

} // namespace ioattn::app
