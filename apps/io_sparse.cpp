// `ioattn io --pattern SPEC` (see io_sparse.hpp). Counts are the plans' closed forms
// (sparse::io_cost, ioattn::io_cost of an AttentionPlan), each variant's also walked by a dry
// run of the same plan unless --no-dry-run.

#include "io_sparse.hpp"

#include "commands.hpp"
#include "io_sweep.hpp"
#include "output.hpp"
#include "plot.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/variants.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace ioattn::app {

namespace {

constexpr std::array<sparse::Variant, 4> kVariants = {sparse::Variant::tile,
                                                      sparse::Variant::element,
                                                      sparse::Variant::split,
                                                      sparse::Variant::permuted};

struct Cell {
    std::optional<IoReport> io; ///< empty: no plan fits M
    std::string dry = "-";
    std::int64_t bytes = -1; ///< the dry run's counted bytes (ElementBytes); -1: none
};

/// A forced variant's io-objective plan (sparse::plan_fewest_words), dry-run when asked.
template <typename Scalar>
Cell variant_cell(const Problem& p,
                  const sparse::Support& s,
                  const MemoryModel& m,
                  Pass pass,
                  sparse::Variant v,
                  bool dry_run,
                  ElementBytes sizes) {
    Cell c;
    try {
        const sparse::VariantPlan plan = sparse::plan_fewest_words<Scalar>(p, s, m, pass, v);
        c.io = sparse::io_cost<Scalar>(p, s, plan);
        if (dry_run) {
            DryRunCounter counter(m.fast_words);
            if (pass == Pass::forward)
                sparse::forward(ForwardArgs<Scalar>::shape_only(p), s, plan, m, counter);
            else
                sparse::backward(BackwardArgs<Scalar>::shape_only(p), s, plan, m, counter);
            c.dry = counter.report() == *c.io ? "=" : "!=";
            c.bytes = counter.bytes(sizes.operand, sizes.word);
        }
    } catch (const CapacityError&) {
        c.io.reset();
    }
    return c;
}

/// What a plan runs: its variant, or its schedule when the variant planner does not run.
std::string plan_name(const AttentionPlan& plan) {
    return plan.variants ? std::string(sparse::to_string(plan.variants->variant))
                         : std::string(to_string(plan.schedule));
}

/// The entry point's plan of `objective` at M (schedule forced or auto), if one fits.
template <typename Scalar>
std::optional<AttentionPlan> entry_plan(const Problem& p,
                                        Pass pass,
                                        const Structure<Scalar>& st,
                                        std::int64_t m,
                                        Objective objective,
                                        std::optional<Schedule> schedule = std::nullopt) {
    AttentionOptions o;
    o.memory = MemoryModel{m};
    o.objective = objective;
    o.schedule = schedule;
    o.where = "io";
    try {
        return plan_attention<Scalar>(p, pass, st, o);
    } catch (const InvalidArgument&) { // M below the schedule's smallest tiling
        return std::nullopt;
    } catch (const CapacityError&) {
        return std::nullopt;
    }
}

nlohmann::json words_json(const std::optional<IoReport>& io) {
    if (!io)
        return nullptr;
    return {{"reads", io->reads},
            {"writes", io->writes},
            {"total", io->total()},
            {"peak_resident", io->peak}};
}

/// The findings of a sweep: the io objective's best ratio to the bound, and the measured
/// crossover (the fused variants' fewest words <= the materializing schedule's from that M on).
struct Findings {
    double best_ratio = 0;
    std::int64_t best_m = 0;
    std::int64_t crossover = 0; ///< 0: none in range
    bool fused_won = false;     ///< at the previous M
    std::int64_t z_input = 0;   ///< per (batch, head), of the pass
};

/// The curves of the sweep's plot: each variant's words, the materializing schedule's, the io
/// objective's and the bound.
constexpr std::size_t kCurves = 7;

/// One M of the sweep: its table cells, JSON row and plot points (NaN: none fits M); updates
/// the findings.
struct SparseRow {
    std::vector<std::string> cells;
    nlohmann::json json;
    std::array<double, kCurves> words{};
    bool disagree = false;
};

template <typename Scalar>
SparseRow sweep_row(const Problem& p,
                    Pass pass,
                    const Structure<Scalar>& st,
                    std::int64_t mw,
                    bool dry_run,
                    ElementBytes sizes,
                    Findings& f) {
    const sparse::Support& s = *st.support;
    const MemoryModel m{mw};
    const auto io_plan = entry_plan<Scalar>(p, pass, st, mw, Objective::io);
    const auto speed_plan = entry_plan<Scalar>(p, pass, st, mw, Objective::speed);
    const auto mat_plan =
        entry_plan<Scalar>(p, pass, st, mw, Objective::io, Schedule::materialized);
    const Bound b =
        io_plan ? io_plan->bound : sparse::forward_bound(p, s, m, sparse::dense_z_input(p));
    if (io_plan)
        f.z_input = io_plan->z_input;
    SparseRow r;
    r.json = {{"M", mw}, {"regime", std::string(b.regime)}, {"bound", b.asymptotic()}};
    r.cells = {std::to_string(mw), std::string(b.regime), fixed(b.asymptotic(), 0)};
    std::string dry = dry_run ? "=" : "-";
    std::optional<std::int64_t> fused_best;
    constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
    const auto words_or_none = [](const std::optional<IoReport>& io) {
        return io ? static_cast<double>(io->total()) : kNone;
    };
    std::size_t curve = 0;
    for (const auto v : kVariants) {
        const Cell c = variant_cell<Scalar>(p, s, m, pass, v, dry_run, sizes);
        nlohmann::json cell = words_json(c.io);
        if (c.io)
            cell["bytes"] = c.bytes >= 0 ? nlohmann::json(c.bytes) : nlohmann::json(nullptr);
        r.json[std::string(sparse::to_string(v))] = cell;
        r.cells.push_back(c.io ? grouped(c.io->total()) : "-");
        r.words[curve++] = words_or_none(c.io);
        dry = c.dry == "!=" ? "!=" : dry;
        if (c.io && (!fused_best || c.io->total() < *fused_best))
            fused_best = c.io->total();
    }
    const auto words_of = [&](const std::optional<AttentionPlan>& plan) {
        return plan ? std::optional<IoReport>(io_cost(*plan, st)) : std::nullopt;
    };
    const auto mat = words_of(mat_plan), speed_io = words_of(speed_plan), io_io = words_of(io_plan);
    r.json["materialized"] = mat ? nlohmann::json(mat->total()) : nlohmann::json(nullptr);
    r.cells.push_back(mat ? grouped(mat->total()) : "-");
    r.words[curve++] = words_or_none(mat);
    r.words[curve++] = words_or_none(io_io);
    r.words[curve] = b.asymptotic();
    // --- what each objective picks ---
    const auto pick_json = [&](const std::optional<AttentionPlan>& plan,
                               const std::optional<IoReport>& io) {
        if (!plan)
            return nlohmann::json(nullptr);
        return nlohmann::json{
            {"picks", plan_name(*plan)},
            {"rows", plan->tiling.rows},
            {"cols", plan->tiling.cols},
            {"planned_for", plan->planned_for},
            {"total", io->total()},
            {"ratio_to_bound", static_cast<double>(io->total()) / b.asymptotic()}};
    };
    r.json["speed"] = pick_json(speed_plan, speed_io);
    r.json["io"] = pick_json(io_plan, io_io);
    r.json["dry_run"] = dry == "=" ? "agrees" : dry == "!=" ? "differs" : "skipped";
    r.disagree = dry == "!=";
    r.cells.push_back(dry);
    r.cells.push_back(speed_plan ? plan_name(*speed_plan) : "-");
    r.cells.push_back(speed_io ? grouped(speed_io->total()) : "-");
    r.cells.push_back(io_plan ? plan_name(*io_plan) + " " + std::to_string(io_plan->tiling.rows) +
                                    "x" + std::to_string(io_plan->tiling.cols)
                              : "-");
    r.cells.push_back(io_io ? fixed(static_cast<double>(io_io->total()) / b.asymptotic(), 3) : "-");
    if (io_io) {
        const double ratio = static_cast<double>(io_io->total()) / b.asymptotic();
        if (f.best_m == 0 || ratio < f.best_ratio) {
            f.best_ratio = ratio;
            f.best_m = mw;
        }
    }
    // the crossover: the fused variants at most the materializing schedule from this M on
    const bool fused_wins = fused_best && (!mat || *fused_best <= mat->total());
    if (fused_wins && !f.fused_won)
        f.crossover = mw;
    if (!fused_wins)
        f.crossover = 0;
    f.fused_won = fused_wins;
    return r;
}

/// The sweep's rows as curves over M, with M* and the crossover marked.
LinePlot sparse_io_plot(const Problem& p,
                        Pass pass,
                        const std::string& pattern,
                        const std::vector<SparseRow>& rows,
                        double m_star,
                        std::int64_t crossover) {
    LinePlot plot;
    plot.title = std::string(to_string(pass)) + " I/O against fast memory M: pattern " + pattern +
                 " n_q=" + std::to_string(p.n_q) + " n_k=" + std::to_string(p.n_k) +
                 " d=" + std::to_string(p.d) + " (ioattn io)";
    plot.x_label = "M (words)";
    plot.y_label = "I/O (words)";
    plot.series = {{"tile", "#1f5fbf", 1},
                   {"element", "#e08a00", 1},
                   {"split", "#7b3fb5", 1},
                   {"permuted", "#3aa0a0", 1},
                   {"materialized", "#c03030", 1},
                   {"objective io (fewest words)", "#2a9d3a", 2},
                   {"bound max(compulsory, leading) (Li et al. Thm 4.5)", "#000000", 2}};
    plot.y.resize(plot.series.size());
    for (const SparseRow& r : rows) {
        plot.x.push_back(r.json.at("M").get<double>());
        for (std::size_t s = 0; s < kCurves; ++s)
            plot.y[s].push_back(r.words[s]);
    }
    const std::string star = "M* = Z_input^2/Z_QK = " + fixed(m_star, 0);
    if (!plot.x.empty() && m_star >= plot.x.front() && m_star <= plot.x.back())
        plot.x_marks.push_back({m_star, star});
    else // a mark outside the sweep would stretch the axis
        plot.title += ", " + star;
    if (crossover != 0)
        plot.x_marks.push_back(
            {static_cast<double>(crossover), "crossover " + std::to_string(crossover)});
    return plot;
}

template <typename Scalar>
void sweep(const SharedOptions& o,
           const Problem& p,
           Pass pass,
           std::int64_t lo,
           std::int64_t hi,
           bool dry_run,
           const std::string& plot) {
    const sparse::Support s = sparse::parse_pattern(o.pattern, p.n_q, p.n_k, o.seed);
    Structure<Scalar> st;
    st.support = &s;
    std::vector<SparseRow> rows;
    nlohmann::json json_rows = nlohmann::json::array();
    std::vector<std::string> head{"M", "regime", "bound"};
    for (const auto v : kVariants)
        head.push_back(std::string(sparse::to_string(v)) + " io");
    head.insert(head.end(),
                {"materialized io", "dry", "speed picks", "speed io", "io picks", "io/bound"});
    Table t(head);
    bool disagree = false;
    Findings f;
    for (std::int64_t mw = lo; mw <= hi; mw *= 2) {
        SparseRow r = sweep_row<Scalar>(
            p, pass, st, mw, dry_run, ElementBytes{word_bytes(o), fast_word_bytes(o)}, f);
        disagree = disagree || r.disagree;
        json_rows.push_back(r.json);
        t.add(r.cells);
        rows.push_back(std::move(r));
        if (mw > hi / 2)
            break;
    }
    const double m_star = sparse::crossover(s, f.z_input);
    if (o.json) {
        std::cout << nlohmann::json{{"pass", std::string(to_string(pass))},
                                    {"pattern", o.pattern},
                                    {"n_q", p.n_q},
                                    {"n_k", p.n_k},
                                    {"d", p.d},
                                    {"z_qk", s.z_qk()},
                                    {"z_input", f.z_input},
                                    {"objective", "io"},
                                    {"dtype", o.dtype},
                                    {"element_bytes",
                                     {{"operands", word_bytes(o)}, {"other", fast_word_bytes(o)}}},
                                    {"best_ratio_to_bound", f.best_ratio},
                                    {"best_ratio_M", f.best_m},
                                    {"crossover",
                                     f.crossover == 0 ? nlohmann::json(nullptr)
                                                      : nlohmann::json(f.crossover)},
                                    {"m_star", m_star},
                                    {"rows", json_rows}}
                         .dump(2)
                  << '\n';
    } else if (o.csv) {
        t.print_csv(std::cout);
    } else {
        std::cout << "ioattn io: " << to_string(pass) << ", pattern " << o.pattern
                  << " (Z_QK = " << grouped(s.z_qk()) << "), B*H=" << p.batch_heads()
                  << " n_q=" << p.n_q << " n_k=" << p.n_k << " d=" << p.d
                  << "; I/O in words of the fused variants (each forced) and the materializing "
                     "schedule, each planned for the fewest words (objective io)\n";
        t.print(std::cout);
        std::cout << "bound = max(compulsory, min(Z^2/M, Z sqrt(Z_QK)/sqrt(M))) (Li et al. Thm "
                     "4.5); dry: '=' every variant's dry run equals its closed form; speed "
                     "picks: the timed runs' plan (objective speed); io picks: the fewest "
                     "counted words over every variant and schedule (objective io), its tiling\n";
        std::cout << "best io/bound " << fixed(f.best_ratio, 3) << " at M = " << f.best_m
                  << "; measured crossover (fused variants <= materialized from here on): "
                  << (f.crossover == 0
                          ? std::string("none in range")
                          : "M = " + std::to_string(f.crossover) + " = " +
                                fixed(static_cast<double>(f.crossover) / m_star, 3) + " M*")
                  << "; M* = Z_input^2/Z_QK = " << fixed(m_star, 0) << '\n';
    }
    if (!plot.empty()) {
        const PlotFiles files = plot_files(plot, "io");
        render(sparse_io_plot(p, pass, o.pattern, rows, m_star, f.crossover), files, "io");
        std::cerr << "ioattn io: wrote " << files.svg << " (data " << files.csv << ", script "
                  << files.script << ")\n";
    }
    if (disagree)
        throw CheckFailed("io: a variant's dry run differs from its closed form");
}

} // namespace

void run_sparse_io(const SharedOptions& o,
                   const Problem& p,
                   Pass pass,
                   std::int64_t lo,
                   std::int64_t hi,
                   bool dry_run,
                   const std::string& plot) {
    if (o.dtype == "double")
        sweep<double>(o, p, pass, lo, hi, dry_run, plot);
    else
        sweep<float>(o, p, pass, lo, hi, dry_run, plot);
}

} // namespace ioattn::app
