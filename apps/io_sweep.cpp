// The dense I/O sweep and its plot (see io_sweep.hpp).

#include "io_sweep.hpp"

#include <ioattn/dense.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace ioattn::app {

namespace {

constexpr double kDryRunSteps = 2e7; ///< largest walk (tiles visited) done by default

double steps_of(const Problem& p, const Tiling& t) {
    const auto cd = [](std::int64_t a, std::int64_t b) {
        const std::int64_t blocks = (a + b - 1) / b; // ceil(a / b)
        return static_cast<double>(blocks);
    };
    const double bh = static_cast<double>(p.batch_heads());
    if (t.schedule == Schedule::fused)
        return bh * cd(p.n_q, t.rows) * cd(p.n_k, t.cols);
    return bh * cd(p.n_q, t.rows) * cd(p.n_k, t.rows) * (cd(p.d, t.rows) + cd(p.d_v, t.rows) + 1);
}

SweepPoint point_of(Schedule s,
                    const Problem& p,
                    const MemoryModel& m,
                    bool dry_run,
                    Pass pass,
                    ElementBytes sizes) {
    SweepPoint pt;
    pt.tiling = Tiling::try_for_memory(s, m, p, pass);
    if (!pt.tiling)
        return pt;
    pt.cost = io_cost(p, *pt.tiling, pass);
    if (dry_run && steps_of(p, *pt.tiling) <= kDryRunSteps) {
        // the walk of every scalar type is the same: its streams give the bytes at `sizes`
        DryRunCounter counter(m.fast_words);
        if (pass == Pass::forward)
            dense::forward(ForwardArgs<float>::shape_only(p), *pt.tiling, m, counter);
        else
            dense::backward(BackwardArgs<float>::shape_only(p), *pt.tiling, m, counter);
        pt.dry = counter.report() == pt.cost ? "=" : "!=";
        pt.bytes = counter.bytes(sizes.operand, sizes.word);
    }
    return pt;
}

std::string choice(const Problem& p, const MemoryModel& m, Select s, Pass pass) {
    try {
        return std::string(to_string(select_schedule(p, m, s, pass)));
    } catch (const CapacityError&) {
        return "-";
    }
}

double total_or_nan(const SweepPoint& pt) {
    return pt.tiling ? static_cast<double>(pt.cost.total()) : std::nan("");
}

} // namespace

double fewest_or_nan(const SweepRow& r) {
    const double f = total_or_nan(r.fused), m = total_or_nan(r.mat);
    return std::isnan(f) ? m : std::isnan(m) ? f : std::min(f, m);
}

std::vector<SweepRow> io_sweep(const Problem& problem,
                               Pass pass,
                               std::int64_t lo,
                               std::int64_t hi,
                               bool dry_run,
                               ElementBytes sizes) {
    std::vector<SweepRow> rows;
    for (std::int64_t m = lo;; m *= 2) {
        const MemoryModel mem{m};
        SweepRow r;
        r.m = m;
        r.bound = bound(problem, mem, pass);
        r.fused = point_of(Schedule::fused, problem, mem, dry_run, pass, sizes);
        r.mat = point_of(Schedule::materialized, problem, mem, dry_run, pass, sizes);
        r.cost_choice = choice(problem, mem, Select::cost, pass);
        r.theory_choice = choice(problem, mem, Select::theory, pass);
        rows.push_back(r);
        if (m > hi / 2)
            break;
    }
    return rows;
}

bool any_dry_run_differs(const std::vector<SweepRow>& rows) {
    for (const SweepRow& r : rows)
        if (r.fused.dry == "!=" || r.mat.dry == "!=")
            return true;
    return false;
}

LinePlot io_sweep_plot(const Problem& problem,
                       Pass pass,
                       const std::vector<SweepRow>& rows,
                       std::int64_t crossover) {
    LinePlot plot;
    plot.title = std::string(to_string(pass)) +
                 " I/O against fast memory M: n_q=" + std::to_string(problem.n_q) +
                 " n_k=" + std::to_string(problem.n_k) + " d=" + std::to_string(problem.d) +
                 " B*H=" + std::to_string(problem.batch_heads()) +
                 (problem.causal ? " causal" : "") + " (ioattn io)";
    plot.x_label = "M (words)";
    plot.y_label = "I/O (words)";
    plot.series = {{"fused", "#1f5fbf", 1},
                   {"materialized", "#c03030", 1},
                   {"objective io (fewest words)", "#2a9d3a", 2},
                   {"bound max(compulsory, leading)", "#000000", 2},
                   {"explicit bound (Thm 4.8)", "#808080", 3}};
    plot.y.resize(plot.series.size());
    for (const SweepRow& r : rows) {
        plot.x.push_back(static_cast<double>(r.m));
        plot.y[0].push_back(total_or_nan(r.fused));
        plot.y[1].push_back(total_or_nan(r.mat));
        plot.y[2].push_back(fewest_or_nan(r));
        plot.y[3].push_back(r.bound.asymptotic());
        plot.y[4].push_back(r.bound.explicit_bound);
    }
    const std::int64_t d2 = problem.d * problem.d;
    plot.x_marks.push_back({static_cast<double>(d2), "d^2 = " + std::to_string(d2)});
    if (crossover != 0)
        plot.x_marks.push_back(
            {static_cast<double>(crossover), "crossover " + std::to_string(crossover)});
    return plot;
}

} // namespace ioattn::app
