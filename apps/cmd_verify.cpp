// ioattn verify: the finite-field experiments of docs/design.md section 10 (ioattn::ff). Runs one
// experiment or all of them, prints a summary table (or --json), shows progress on a terminal for
// runs longer than a second or two, and exits 1 when any check fails (the first failing instance is
// printed so it can be rerun), 2 on bad usage.

#include "commands.hpp"
#include "output.hpp"

#include <ioattn/error.hpp>
#include <ioattn/ff/experiments.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace ioattn::app {

namespace {

struct VerifyOptions {
    std::string experiment;
    ff::Config config;
    std::int64_t m = 0; ///< --M; 0: not given
    bool m_given = false;
    bool json = false;
};

/// "\r<label>: done/total" on stderr every 250 ms once a run has taken over 1.5 s, only when
/// stderr is a terminal. Stops (and clears its line) on destruction.
class ProgressLine {
public:
    ProgressLine(const ff::Progress& progress, std::string label)
        : progress_(progress)
        , label_(std::move(label)) {
        if (isatty(STDERR_FILENO) != 0)
            thread_ = std::thread([this] { run(); });
    }

    ProgressLine(const ProgressLine&) = delete;
    ProgressLine& operator=(const ProgressLine&) = delete;

    ~ProgressLine() {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable())
            thread_.join();
    }

private:
    void run() {
        using namespace std::chrono_literals;
        const auto start = std::chrono::steady_clock::now();
        bool shown = false;
        std::unique_lock<std::mutex> lock(mutex_);
        while (!cv_.wait_for(lock, 250ms, [this] { return stop_; })) {
            const double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            if (s < 1.5)
                continue;
            std::cerr << "\r" << label_ << ": " << progress_.done.load() << "/"
                      << progress_.total.load() << " instances, " << fixed(s, 0) << " s   "
                      << std::flush;
            shown = true;
        }
        if (shown)
            std::cerr << "\r\033[K" << std::flush;
    }

    const ff::Progress& progress_;
    std::string label_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
};

std::string or_dash(double x, int digits) {
    return std::isnan(x) ? std::string("-") : fixed(x, digits);
}

nlohmann::json number_or_null(double x) {
    return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x);
}

nlohmann::json rows_json(const ff::Result& r) {
    nlohmann::json rows = nlohmann::json::array();
    for (const ff::ResultRow& row : r.rows)
        rows.push_back({{"label", row.label},
                        {"instances", row.instances},
                        {"failed", row.failed},
                        {"max_epoch_ratio", number_or_null(row.max_epoch_ratio)},
                        {"max_message_ratio", number_or_null(row.max_message_ratio)},
                        {"min_slack", number_or_null(row.min_slack)}});
    return rows;
}

/// The breakdown of every result that has one (epochs: per schedule; sparse-rank: per part).
void print_rows(const std::vector<ff::Result>& results) {
    for (const ff::Result& r : results) {
        if (r.rows.empty())
            continue;
        std::cout << '\n'
                  << r.name << " by " << (r.name == "epochs" ? "schedule" : "part") << ":\n";
        Table table({"", "instances", "failed", "max |I_t|/B", "max message/2M", "min slack"});
        for (const ff::ResultRow& row : r.rows)
            table.add({row.label,
                       grouped(row.instances),
                       grouped(row.failed),
                       or_dash(row.max_epoch_ratio, 4),
                       or_dash(row.max_message_ratio, 4),
                       or_dash(row.min_slack, 3)});
        table.print(std::cout);
    }
}

/// The flags that reproduce this run.
std::string rerun_command(const VerifyOptions& o, const std::string& name) {
    const ff::Config& c = o.config;
    std::string s = "ioattn verify " + name;
    if (c.n != 0)
        s += " --N " + std::to_string(c.n);
    if (c.d != 0)
        s += " --d " + std::to_string(c.d);
    s += " --seed " + std::to_string(c.seed);
    if (c.quick)
        s += " --quick";
    if (!c.pattern.empty())
        s += " --pattern '" + c.pattern + "'";
    if (c.p != 0)
        s += " --p " + std::to_string(c.p);
    if (o.m_given)
        s += " --M " + std::to_string(o.m);
    if (c.trials != 0)
        s += " --trials " + std::to_string(c.trials);
    if (c.negative_control)
        s += " --negative-control";
    return s;
}

void run_verify(VerifyOptions& o) {
    constexpr const char* kWhere = "verify";
    if (o.m_given && o.m < 1)
        throw InvalidArgument(std::string(kWhere) + ": M = " + std::to_string(o.m) +
                              " (expected M >= 1)");
    o.config.m = o.m_given ? o.m : 0;
    // --- validate everything before the first experiment runs ---
    o.config.validate(kWhere);
    const std::vector<std::string>& names = ff::experiment_names();
    std::vector<std::string> selected;
    if (o.experiment == "all") {
        selected = names;
    } else {
        for (const std::string& n : names)
            if (n == o.experiment)
                selected.push_back(n);
        if (selected.empty()) {
            std::string known;
            for (const std::string& n : names)
                known += ", " + n;
            throw InvalidArgument(std::string(kWhere) + ": unknown experiment '" + o.experiment +
                                  "' (expected all" + known + ")");
        }
    }

    for (const std::string& name : selected) // each experiment's sizes, and the pattern there
        o.config.sized_for(name).validate(kWhere);
    std::vector<ff::Result> results;
    for (const std::string& name : selected) {
        ff::Progress progress;
        ff::Config config = o.config;
        config.progress = &progress;
        const ProgressLine line(progress, "verify " + name);
        results.push_back(ff::run_experiment(name, config));
    }

    // --- report ---
    std::int64_t failed = 0;
    const ff::Result* first = nullptr;
    for (const ff::Result& r : results)
        if (!r.ok()) {
            ++failed;
            if (first == nullptr)
                first = &r;
        }
    if (o.json) {
        nlohmann::json j;
        const auto size = [](std::int64_t v) { // 0: each experiment's default
            return v == 0 ? nlohmann::json(nullptr) : nlohmann::json(v);
        };
        j["config"] = {{"N", size(o.config.n)},
                       {"d", size(o.config.d)},
                       {"quick", o.config.quick},
                       {"pattern", o.config.pattern},
                       {"p", o.config.prime()},
                       {"M", o.config.m},
                       {"trials", o.config.trials},
                       {"seed", o.config.seed},
                       {"threads", o.config.threads},
                       {"negative_control", o.config.negative_control}};
        j["experiments"] = nlohmann::json::array();
        for (const ff::Result& r : results)
            j["experiments"].push_back({{"name", r.name},
                                        {"instances", r.instances},
                                        {"passed", r.passed},
                                        {"failed", r.failed},
                                        {"min_slack", number_or_null(r.min_slack)},
                                        {"max_tightness", number_or_null(r.max_tightness)},
                                        {"max_epoch_ratio", number_or_null(r.max_epoch_ratio)},
                                        {"max_message_ratio", number_or_null(r.max_message_ratio)},
                                        {"seconds", r.seconds},
                                        {"first_failure", r.first_failure},
                                        {"note", r.note},
                                        {"rows", rows_json(r)}});
        j["passed"] = failed == 0;
        std::cout << j.dump(2) << '\n';
    } else {
        Table table({"experiment",
                     "instances",
                     "passed",
                     "failed",
                     "min slack",
                     "max U/bound",
                     "max epoch ratio",
                     "seconds"});
        for (const ff::Result& r : results)
            table.add({r.name,
                       grouped(r.instances),
                       grouped(r.passed),
                       grouped(r.failed),
                       or_dash(r.min_slack, 3),
                       or_dash(r.max_tightness, 3),
                       or_dash(r.max_epoch_ratio, 4),
                       fixed(r.seconds, 2)});
        table.print(std::cout);
        for (const ff::Result& r : results)
            std::cout << "  " << r.name << ": " << r.note << '\n';
        print_rows(results);
        for (const ff::Result& r : results)
            if (!r.ok())
                std::cout << "FAILED " << r.name << ": " << r.first_failure
                          << "\n  rerun: " << rerun_command(o, r.name) << '\n';
        std::cout << (failed == 0 ? "all checks passed" : "CHECKS FAILED") << " (field elements; "
                  << "p = " << o.config.prime() << ", seed = " << o.config.seed << ")\n";
    }
    if (first != nullptr)
        throw CheckFailed(std::string(kWhere) + ": " + std::to_string(failed) + " of " +
                          std::to_string(results.size()) + " experiments failed; first: " +
                          first->first_failure + " (rerun: " + rerun_command(o, first->name) + ")");
}

} // namespace

} // namespace ioattn::app

void register_verify(CLI::App& app) {
    using namespace ioattn::app;
    auto o = std::make_shared<VerifyOptions>();
    auto* cmd = app.add_subcommand(
        "verify",
        "Check the communication-complexity argument behind the I/O lower bounds on concrete "
        "instances over F_p (docs/design.md section 10). Units: field elements.");
    std::string names = "all";
    for (const std::string& n : ioattn::ff::experiment_names())
        names += "|" + n;
    cmd->add_option("experiment", o->experiment, "Which experiment: " + names)->required();
    cmd->add_option(
           "--N",
           o->config.n,
           "Largest sequence length N of the sweeps (default: epochs 1024, the others 256; "
           "--quick 256 and 64)")
        ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()));
    cmd->add_option("--d",
                    o->config.d,
                    "Largest head dimension d of the sweeps (default: epochs 64, the others 32; "
                    "--quick 32 and 16)")
        ->check(CLI::Range(std::int64_t{1}, std::numeric_limits<std::int64_t>::max()));
    cmd->add_option("--pattern",
                    o->config.pattern,
                    "epochs, sparse-rank: one support spec (as ioattn run --pattern) instead of "
                    "every pattern family; it must fit N");
    cmd->add_flag("--quick", o->config.quick, "Smaller default sweeps (under 10 s, for CI)");
    cmd->add_option("--p",
                    o->config.p,
                    "Prime modulus, N < p < 2^60 (default: the next prime after max(N, 2^20); "
                    "count uses its own tiny primes, binary F_2)");
    cmd->add_option("--M",
                    o->m,
                    "epochs: one fast-memory size in words (default: sweep from each schedule's "
                    "smallest M to Nd)")
        ->each([o](const std::string&) { o->m_given = true; });
    cmd->add_option(
        "--trials", o->config.trials, "Random instances per shape (default: per experiment)");
    cmd->add_option("--seed", o->config.seed, "Seed of every random instance (default 1)");
    cmd->add_option("--threads", o->config.threads, "Worker threads (0: all cores)")
        ->check(CLI::Range(0, 1 << 16));
    cmd->add_flag("--negative-control",
                  o->config.negative_control,
                  "Accept p <= N (the points repeat; checks are then expected to fail)");
    cmd->add_flag("--json", o->json, "Machine-readable output on stdout");
    cmd->callback([o] { run_verify(*o); });
}
