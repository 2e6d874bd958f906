// ioattn io: the counted I/O of each dense schedule across a sweep of M (powers of two from
// --M-range lo:hi) for one shape, against both lower bounds, with the schedule each selection rule
// picks and the measured crossover next to d^2 (after COSMA's miniapp/cosma_statistics.cpp). Counts
// are the closed forms io_cost_forward_*; when the shape is small enough each is also walked by a
// dry run of the kernel and the two must agree. With a sparse --pattern, each variant of the sparse
// fused schedule instead (io_sparse.cpp).

#include "commands.hpp"
#include "io_sparse.hpp"
#include "io_sweep.hpp"
#include "options.hpp"
#include "output.hpp"

#include <ioattn/dense.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ioattn::app {

namespace {

constexpr const char* kIoWhere = "io";

struct IoOptions {
    SharedOptions shared;
    std::string range;
    std::string plot;
    bool dry_run = true;
};

nlohmann::json point_json(const SweepPoint& pt, const Bound& b) {
    if (!pt.tiling)
        return nullptr;
    return {{"rows", pt.tiling->rows},
            {"cols", pt.tiling->cols},
            {"reads", pt.cost.reads},
            {"writes", pt.cost.writes},
            {"total", pt.cost.total()},
            {"peak_resident", pt.cost.peak},
            {"dry_run",
             pt.dry == "="    ? "agrees"
             : pt.dry == "!=" ? "differs"
                              : "skipped"},
            {"bytes", pt.bytes >= 0 ? nlohmann::json(pt.bytes) : nlohmann::json(nullptr)},
            {"ratio_to_bound", static_cast<double>(pt.cost.total()) / b.asymptotic()},
            {"ratio_to_explicit",
             b.explicit_bound > 0
                 ? nlohmann::json(static_cast<double>(pt.cost.total()) / b.explicit_bound)
                 : nlohmann::json(nullptr)}};
}

std::string total_or_dash(const SweepPoint& pt) {
    return pt.tiling ? std::to_string(pt.cost.total()) : "-";
}

std::string ratio_or_dash(const SweepPoint& pt, const Bound& b) {
    return pt.tiling ? fixed(static_cast<double>(pt.cost.total()) / b.asymptotic(), 3) : "-";
}

std::string tile_or_dash(const SweepPoint& pt) {
    if (!pt.tiling)
        return "-";
    if (pt.tiling->schedule == Schedule::materialized)
        return std::to_string(pt.tiling->rows);
    return std::to_string(pt.tiling->rows) + "x" + std::to_string(pt.tiling->cols);
}

/// The io objective's smallest ratio to the bound over the sweep.
double best_ratio(const std::vector<SweepRow>& rows) {
    double best = 0;
    for (const SweepRow& r : rows) {
        const double w = fewest_or_nan(r);
        if (!std::isnan(w) && (best == 0 || w / r.bound.asymptotic() < best))
            best = w / r.bound.asymptotic();
    }
    return best;
}

void run(const IoOptions& o) {
    const Problem p = problem_of(o.shared, kIoWhere);
    const Pass pass = pass_of(o.shared, kIoWhere);
    std::int64_t lo = 4 * p.d;
    std::int64_t hi = std::max(p.n_q, p.n_k) * p.d;
    if (!o.range.empty())
        std::tie(lo, hi) = parse_range(o.range, "--M-range");
    hi = std::max(hi, lo);
    if (!o.plot.empty())
        (void)plot_files(o.plot, kIoWhere); // a bad name fails before the sweep
    if (o.shared.pattern != "dense") {      // each variant of the sparse fused schedule
        if (p.causal)
            throw UsageError(std::string(kIoWhere) +
                             ": --pattern does not take --causal (use the 'causal' pattern)");
        run_sparse_io(o.shared, p, pass, lo, hi, o.dry_run, o.plot);
        return;
    }
    const ElementBytes sizes{word_bytes(o.shared), fast_word_bytes(o.shared)};
    const std::vector<SweepRow> rows = io_sweep(p, pass, lo, hi, o.dry_run, sizes);
    const std::int64_t d2 = p.d * p.d;
    const std::int64_t crossover = measured_crossover(p, pass, lo, hi);
    const bool disagree = any_dry_run_differs(rows);

    if (o.shared.json) {
        nlohmann::json j;
        j["pass"] = std::string(to_string(pass));
        j["problem"] = {{"batch", p.batch},
                        {"heads", p.heads},
                        {"kv_heads", p.kv_heads},
                        {"n_q", p.n_q},
                        {"n_k", p.n_k},
                        {"d", p.d},
                        {"d_v", p.d_v},
                        {"causal", p.causal}};
        j["objective"] = "io";
        j["dtype"] = o.shared.dtype;
        j["element_bytes"] = {{"operands", sizes.operand}, {"other", sizes.word}};
        j["best_ratio_to_bound"] = best_ratio(rows);
        j["d_squared"] = d2;
        j["crossover"] = crossover == 0 ? nlohmann::json(nullptr) : nlohmann::json(crossover);
        j["rows"] = nlohmann::json::array();
        for (const SweepRow& r : rows)
            j["rows"].push_back(
                {{"M", r.m},
                 {"bound",
                  {{"regime", std::string(r.bound.regime)},
                   {"compulsory", r.bound.compulsory},
                   {"leading", r.bound.leading},
                   {"asymptotic", r.bound.asymptotic()},
                   {"explicit", r.bound.explicit_bound}}},
                 {"fused", point_json(r.fused, r.bound)},
                 {"materialized", point_json(r.mat, r.bound)},
                 {"choice", {{"cost", r.cost_choice}, {"theory", r.theory_choice}}}});
        std::cout << j.dump(2) << '\n';
    } else {
        // bytes differ from 4 x words only when the element sizes do (bf16, double)
        const bool bytes = o.shared.dtype != "float";
        const auto bytes_or_dash = [](const SweepPoint& pt) {
            return pt.bytes >= 0 ? std::to_string(pt.bytes) : std::string("-");
        };
        std::vector<std::string> head = {"M",
                                         "M/d^2",
                                         "regime",
                                         "fused BrxBc",
                                         "fused io",
                                         "fused dry",
                                         "mat b",
                                         "mat io",
                                         "mat dry",
                                         "bound",
                                         "explicit",
                                         "fused/bound",
                                         "mat/bound",
                                         "cost picks",
                                         "theory picks"};
        if (bytes)
            head.insert(head.begin() + 9, {"fused bytes", "mat bytes"});
        Table t(head);
        for (const SweepRow& r : rows) {
            std::vector<std::string> cells = {
                std::to_string(r.m),
                sig(static_cast<double>(r.m) / static_cast<double>(d2)),
                std::string(r.bound.regime),
                tile_or_dash(r.fused),
                total_or_dash(r.fused),
                r.fused.dry,
                tile_or_dash(r.mat),
                total_or_dash(r.mat),
                r.mat.dry,
                fixed(r.bound.asymptotic(), 0),
                fixed(r.bound.explicit_bound, 0),
                ratio_or_dash(r.fused, r.bound),
                ratio_or_dash(r.mat, r.bound),
                r.cost_choice,
                r.theory_choice};
            if (bytes)
                cells.insert(cells.begin() + 9, {bytes_or_dash(r.fused), bytes_or_dash(r.mat)});
            t.add(cells);
        }
        if (o.shared.csv) {
            t.print_csv(std::cout);
        } else {
            std::cout << "ioattn io: " << to_string(pass) << ", B=" << p.batch << " H=" << p.heads
                      << " (kv " << p.kv_heads << ") n_q=" << p.n_q << " n_k=" << p.n_k
                      << " d=" << p.d << " d_v=" << p.d_v << (p.causal ? " causal" : "")
                      << "; I/O in words"
                      << (bytes ? "; bytes: the dry run's, " + o.shared.dtype + " operands at " +
                                      std::to_string(sizes.operand) + " bytes, L, statistics " +
                                      "and stored scores at " + std::to_string(sizes.word)
                                : std::string())
                      << "\n";
            t.print(std::cout);
            std::cout << "bound = max(compulsory, min(N^2 d^2/M, N^2 d/sqrt(M))) (Saha & Ye Thm "
                         "3.1/3.7); explicit = M (ceil(N^2/B_max) - 1) (Thm 4.8); dry: '=' the "
                         "dry run of the kernel equals io_cost, '-' skipped\n";
            std::cout << "measured crossover (fused cost <= materialized cost from here on): "
                      << (crossover == 0
                              ? std::string("none in range")
                              : "M = " + std::to_string(crossover) + " words = " +
                                    fixed(static_cast<double>(crossover) / static_cast<double>(d2),
                                          3) +
                                    " d^2")
                      << "; d^2 = " << d2 << '\n';
            std::cout << "objective io: the fewer words of the two schedules' I/O-optimal tilings "
                         "at each M; best io/bound "
                      << fixed(best_ratio(rows), 3) << '\n';
        }
    }
    if (!o.plot.empty()) {
        const PlotFiles files = plot_files(o.plot, kIoWhere);
        render(io_sweep_plot(p, pass, rows, crossover), files, kIoWhere);
        std::cerr << "ioattn io: wrote " << files.svg << " (data " << files.csv << ", script "
                  << files.script << ")\n";
    }
    if (disagree)
        throw CheckFailed(std::string(kIoWhere) +
                          ": a dry run differs from its io_cost closed form");
}

} // namespace

} // namespace ioattn::app

void register_io(CLI::App& app) {
    using namespace ioattn::app;
    auto o = std::make_shared<IoOptions>();
    auto* cmd = app.add_subcommand(
        "io", "Counted I/O of each schedule over a sweep of M, against the lower bounds");
    add_problem_options(*cmd, o->shared);
    add_output_options(*cmd, o->shared);
    cmd->add_option(
        "--M-range", o->range, "Sweep M over lo, 2 lo, 4 lo, ... <= hi words (default 4d:N*d)");
    cmd->add_option("--plot",
                    o->plot,
                    "Also plot the sweep log-log with gnuplot: FILE.svg, with its data FILE.csv "
                    "and script FILE.gp beside it");
    cmd->add_flag("!--no-dry-run",
                  o->dry_run,
                  "Skip the dry runs (by default each schedule is walked when it visits at most "
                  "2e7 tiles, and must equal its closed form)");
    cmd->callback([o] { run(*o); });
}
