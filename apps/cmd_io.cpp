// ioattn io: the counted I/O of each dense schedule across a sweep of M (powers of two from
// --M-range lo:hi) for one shape, against both lower bounds, with the schedule each selection
// rule picks and the measured crossover next to d^2 (issue 2, "I/O accounting"; COSMA's
// miniapp/cosma_statistics.cpp). Counts are the closed forms io_cost_forward_*; when the shape
// is small enough each is also walked by a dry run of the kernel and the two must agree. With
// a sparse --pattern, each variant of the sparse fused schedule instead (io_sparse.cpp).

#include "commands.hpp"
#include "io_sparse.hpp"
#include "options.hpp"
#include "output.hpp"

#include <ioattn/dense.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ioattn::app {

namespace {

constexpr const char* kWhere = "io";
constexpr double kDryRunSteps = 2e7; ///< largest walk (tiles visited) done by default

struct IoOptions {
    SharedOptions shared;
    std::string range;
    std::string plot;
    bool dry_run = true;
};

struct Point {
    std::optional<Tiling> tiling;
    IoReport cost;
    std::string dry = "-"; ///< "=" agrees, "!=" differs, "-" skipped or no tiling
};

struct Row {
    std::int64_t m = 0;
    Bound bound;
    Point fused, mat;
    std::string cost_choice = "-", theory_choice = "-";
};

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

Point point_of(Schedule s, const Problem& p, const MemoryModel& m, bool dry_run, Pass pass) {
    Point pt;
    pt.tiling = Tiling::try_for_memory(s, m, p, pass);
    if (!pt.tiling)
        return pt;
    pt.cost = io_cost(p, *pt.tiling, pass);
    if (dry_run && steps_of(p, *pt.tiling) <= kDryRunSteps) {
        const IoReport dry = pass == Pass::forward ? dense::dry_run_forward(p, *pt.tiling, m)
                                                   : dense::dry_run_backward(p, *pt.tiling, m);
        pt.dry = dry == pt.cost ? "=" : "!=";
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

nlohmann::json point_json(const Point& pt, const Bound& b) {
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
            {"ratio_to_bound", static_cast<double>(pt.cost.total()) / b.asymptotic()},
            {"ratio_to_explicit",
             b.explicit_bound > 0
                 ? nlohmann::json(static_cast<double>(pt.cost.total()) / b.explicit_bound)
                 : nlohmann::json(nullptr)}};
}

std::string total_or_dash(const Point& pt) {
    return pt.tiling ? std::to_string(pt.cost.total()) : "-";
}

std::string ratio_or_dash(const Point& pt, const Bound& b) {
    return pt.tiling ? fixed(static_cast<double>(pt.cost.total()) / b.asymptotic(), 3) : "-";
}

std::string tile_or_dash(const Point& pt) {
    if (!pt.tiling)
        return "-";
    if (pt.tiling->schedule == Schedule::materialized)
        return std::to_string(pt.tiling->rows);
    return std::to_string(pt.tiling->rows) + "x" + std::to_string(pt.tiling->cols);
}

// --- the SVG plot: log-log, words against M ---------------------------------------------------

struct Series {
    std::string name, color, dash;
    std::vector<std::pair<double, double>> xy;
};

void write_svg(const std::string& path,
               const std::string& title,
               const std::vector<Series>& series,
               const std::vector<std::pair<double, std::string>>& marks) {
    double x0 = 1e300, x1 = 0, y0 = 1e300, y1 = 0;
    for (const auto& s : series)
        for (const auto& [x, y] : s.xy) {
            x0 = std::min(x0, x);
            x1 = std::max(x1, x);
            y0 = std::min(y0, y);
            y1 = std::max(y1, y);
        }
    if (!(x1 > 0) || !(y1 > 0))
        throw Error(std::string(kWhere) + ": nothing to plot");
    const double lx0 = std::floor(std::log2(x0)), lx1 = std::max(std::ceil(std::log2(x1)), lx0 + 1);
    const double ly0 = std::floor(std::log10(y0)),
                 ly1 = std::max(std::ceil(std::log10(y1)), ly0 + 1);
    const double w = 760, h = 480, left = 80, right = 180, top = 40, bottom = 50;
    const auto px = [&](double x) {
        return left + (std::log2(x) - lx0) / (lx1 - lx0) * (w - left - right);
    };
    const auto py = [&](double y) {
        return h - bottom - (std::log10(y) - ly0) / (ly1 - ly0) * (h - top - bottom);
    };
    std::ofstream out(path);
    if (!out)
        throw Error(std::string(kWhere) + ": cannot write --plot " + path);
    out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
        << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
           "fill=\"white\"/>\n";
    out << "<text x=\"" << left << "\" y=\"24\" font-size=\"14\">" << title << "</text>\n";
    for (double e = lx0; e <= lx1; e += 1) {
        const double x = px(std::exp2(e));
        out << "<line x1=\"" << x << "\" y1=\"" << top << "\" x2=\"" << x << "\" y2=\""
            << h - bottom << "\" stroke=\"#eee\"/><text x=\"" << x << "\" y=\"" << h - bottom + 16
            << "\" text-anchor=\"middle\">2^" << e << "</text>\n";
    }
    for (double e = ly0; e <= ly1; e += 1) {
        const double y = py(std::pow(10.0, e));
        out << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << w - right << "\" y2=\""
            << y << "\" stroke=\"#eee\"/><text x=\"" << left - 6 << "\" y=\"" << y + 4
            << "\" text-anchor=\"end\">1e" << e << "</text>\n";
    }
    out << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << w - left - right
        << "\" height=\"" << h - top - bottom << "\" fill=\"none\" stroke=\"black\"/>\n";
    out << "<text x=\"" << (left + w - right) / 2 << "\" y=\"" << h - 12
        << "\" text-anchor=\"middle\">M (words)</text>\n<text x=\"16\" y=\""
        << (top + h - bottom) / 2 << "\" transform=\"rotate(-90 16 " << (top + h - bottom) / 2
        << ")\" text-anchor=\"middle\">I/O (words)</text>\n";
    for (const auto& [x, label] : marks) {
        if (x < std::exp2(lx0) || x > std::exp2(lx1))
            continue;
        out << "<line x1=\"" << px(x) << "\" y1=\"" << top << "\" x2=\"" << px(x) << "\" y2=\""
            << h - bottom << "\" stroke=\"#2a2\" stroke-dasharray=\"2,3\"/><text x=\"" << px(x) + 3
            << "\" y=\"" << top + 12 << "\" fill=\"#2a2\">" << label << "</text>\n";
    }
    double ly = top + 10;
    for (const auto& s : series) {
        out << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\""
            << (s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"") << " points=\"";
        for (const auto& [x, y] : s.xy)
            out << px(x) << ',' << py(y) << ' ';
        out << "\"/>\n<line x1=\"" << w - right + 10 << "\" y1=\"" << ly << "\" x2=\""
            << w - right + 40 << "\" y2=\"" << ly << "\" stroke=\"" << s.color
            << "\" stroke-width=\"2\""
            << (s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"") << "/><text x=\""
            << w - right + 46 << "\" y=\"" << ly + 4 << "\">" << s.name << "</text>\n";
        ly += 20;
    }
    out << "</svg>\n";
}

void run(const IoOptions& o) {
    const Problem p = problem_of(o.shared, kWhere);
    const Pass pass = pass_of(o.shared, kWhere);
    std::int64_t lo = 4 * p.d;
    std::int64_t hi = std::max(p.n_q, p.n_k) * p.d;
    if (!o.range.empty())
        std::tie(lo, hi) = parse_range(o.range, "--M-range");
    hi = std::max(hi, lo);
    if (o.shared.pattern != "dense") { // each variant of the sparse fused schedule
        if (!o.plot.empty() || p.causal)
            throw UsageError(
                std::string(kWhere) +
                ": --pattern takes neither --plot nor --causal (use the 'causal' pattern)");
        run_sparse_io(o.shared, p, pass, lo, hi, o.dry_run);
        return;
    }
    std::vector<Row> rows;
    for (std::int64_t m = lo; m <= hi; m *= 2) {
        const MemoryModel mem{m};
        Row r;
        r.m = m;
        r.bound = bound(p, mem, pass);
        r.fused = point_of(Schedule::fused, p, mem, o.dry_run, pass);
        r.mat = point_of(Schedule::materialized, p, mem, o.dry_run, pass);
        r.cost_choice = choice(p, mem, Select::cost, pass);
        r.theory_choice = choice(p, mem, Select::theory, pass);
        rows.push_back(r);
        if (m > hi / 2)
            break;
    }
    const std::int64_t d2 = p.d * p.d;
    const std::int64_t crossover = measured_crossover(p, pass, lo, hi);
    bool disagree = false;
    for (const Row& r : rows)
        disagree = disagree || r.fused.dry == "!=" || r.mat.dry == "!=";

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
        j["d_squared"] = d2;
        j["crossover"] = crossover == 0 ? nlohmann::json(nullptr) : nlohmann::json(crossover);
        j["rows"] = nlohmann::json::array();
        for (const Row& r : rows)
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
        Table t({"M",
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
                 "theory picks"});
        for (const Row& r : rows)
            t.add({std::to_string(r.m),
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
                   r.theory_choice});
        if (o.shared.csv) {
            t.print_csv(std::cout);
        } else {
            std::cout << "ioattn io: " << to_string(pass) << ", B=" << p.batch << " H=" << p.heads
                      << " (kv " << p.kv_heads << ") n_q=" << p.n_q << " n_k=" << p.n_k
                      << " d=" << p.d << " d_v=" << p.d_v << (p.causal ? " causal" : "")
                      << "; I/O in words\n";
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
        }
    }
    if (!o.plot.empty()) {
        Series fused{"fused", "#1f5fbf", "", {}}, mat{"materialized", "#c03030", "", {}};
        Series bound{"bound max(compulsory, leading)", "black", "6,4", {}};
        Series expl{"explicit bound", "#888", "2,3", {}};
        for (const Row& r : rows) {
            const auto x = static_cast<double>(r.m);
            if (r.fused.tiling)
                fused.xy.emplace_back(x, static_cast<double>(r.fused.cost.total()));
            if (r.mat.tiling)
                mat.xy.emplace_back(x, static_cast<double>(r.mat.cost.total()));
            bound.xy.emplace_back(x, r.bound.asymptotic());
            if (r.bound.explicit_bound > 0)
                expl.xy.emplace_back(x, r.bound.explicit_bound);
        }
        std::vector<std::pair<double, std::string>> marks{{static_cast<double>(d2), "d^2"}};
        if (crossover != 0)
            marks.emplace_back(static_cast<double>(crossover), "crossover");
        write_svg(o.plot,
                  std::string(to_string(pass)) + " I/O, n_q=" + std::to_string(p.n_q) +
                      " n_k=" + std::to_string(p.n_k) + " d=" + std::to_string(p.d) +
                      " B*H=" + std::to_string(p.batch_heads()),
                  {fused, mat, bound, expl},
                  marks);
        std::cerr << "ioattn io: wrote " << o.plot << '\n';
    }
    if (disagree)
        throw CheckFailed(std::string(kWhere) + ": a dry run differs from its io_cost closed form");
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
    cmd->add_option("--plot", o->plot, "Also write a log-log SVG plot of the sweep to FILE.svg");
    cmd->add_flag("!--no-dry-run",
                  o->dry_run,
                  "Skip the dry runs (by default each schedule is walked when it visits at most "
                  "2e7 tiles, and must equal its closed form)");
    cmd->callback([o] { run(*o); });
}
