// `ioattn io --pattern SPEC` (see io_sparse.hpp). Counts are the plans' closed forms
// (sparse::io_cost), each also walked by a dry run of the same plan unless --no-dry-run.

#include "io_sparse.hpp"

#include "commands.hpp"
#include "output.hpp"

#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/variants.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <iostream>
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
    std::optional<IoReport> io; ///< empty: no tiling fits M
    std::string dry = "-";
};

template <typename Scalar>
Cell cell_of(const Problem& p,
             const sparse::Support& s,
             const MemoryModel& m,
             Pass pass,
             std::optional<sparse::Variant> force,
             bool dry_run,
             std::string* picked) {
    Cell c;
    try {
        const sparse::VariantPlan plan = sparse::plan_variants<Scalar>(p, s, m, pass, force);
        if (picked != nullptr)
            *picked = std::string(sparse::to_string(plan.variant));
        c.io = sparse::io_cost<Scalar>(p, s, plan);
        if (dry_run) {
            DryRunCounter counter(m.fast_words);
            if (pass == Pass::forward)
                sparse::forward(ForwardArgs<Scalar>::shape_only(p), s, plan, m, counter);
            else
                sparse::backward(BackwardArgs<Scalar>::shape_only(p), s, plan, m, counter);
            c.dry = counter.report() == *c.io ? "=" : "!=";
        }
    } catch (const CapacityError&) {
        c.io.reset();
    }
    return c;
}

template <typename Scalar>
void sweep(const SharedOptions& o,
           const Problem& p,
           Pass pass,
           std::int64_t lo,
           std::int64_t hi,
           bool dry_run) {
    const sparse::Support s = sparse::parse_pattern(o.pattern, p.n_q, p.n_k, o.seed);
    const std::int64_t z_in = sparse::dense_z_input(p);
    nlohmann::json rows = nlohmann::json::array();
    std::vector<std::string> head{"M", "regime", "bound"};
    for (const auto v : kVariants)
        head.push_back(std::string(sparse::to_string(v)) + " io");
    head.insert(head.end(), {"materialized io", "dry", "picks", "picked io/bound"});
    Table t(head);
    bool disagree = false;
    for (std::int64_t mw = lo; mw <= hi; mw *= 2) {
        const MemoryModel m{mw};
        const Bound b = sparse::forward_bound(p, s, m, z_in);
        nlohmann::json row = {
            {"M", mw}, {"regime", std::string(b.regime)}, {"bound", b.asymptotic()}};
        std::vector<std::string> cells{
            std::to_string(mw), std::string(b.regime), fixed(b.asymptotic(), 0)};
        std::string dry = dry_run ? "=" : "-";
        for (const auto v : kVariants) {
            const Cell c = cell_of<Scalar>(p, s, m, pass, v, dry_run, nullptr);
            row[std::string(sparse::to_string(v))] =
                c.io ? nlohmann::json{{"reads", c.io->reads},
                                      {"writes", c.io->writes},
                                      {"total", c.io->total()},
                                      {"peak_resident", c.io->peak}}
                     : nlohmann::json(nullptr);
            cells.push_back(c.io ? grouped(c.io->total()) : "-");
            if (c.dry == "!=")
                dry = "!=";
        }
        const auto mt = Tiling::try_for_memory(Schedule::materialized, m, p, pass);
        std::optional<IoReport> mat;
        if (mt)
            mat = pass == Pass::forward ? sparse::io_cost_forward_materialized(p, s, *mt)
                                        : sparse::io_cost_backward_materialized(p, s, *mt);
        row["materialized"] = mat ? nlohmann::json(mat->total()) : nlohmann::json(nullptr);
        cells.push_back(mat ? grouped(mat->total()) : "-");
        std::string picked = "-";
        const Cell autoc = cell_of<Scalar>(p, s, m, pass, std::nullopt, false, &picked);
        row["picked"] = picked;
        row["dry_run"] = dry == "=" ? "agrees" : dry == "!=" ? "differs" : "skipped";
        cells.push_back(dry);
        cells.push_back(picked);
        cells.push_back(autoc.io ? fixed(static_cast<double>(autoc.io->total()) / b.asymptotic(), 3)
                                 : "-");
        disagree = disagree || dry == "!=";
        rows.push_back(row);
        t.add(cells);
        if (mw > hi / 2)
            break;
    }
    if (o.json) {
        std::cout << nlohmann::json{{"pass", std::string(to_string(pass))},
                                    {"pattern", o.pattern},
                                    {"n_q", p.n_q},
                                    {"n_k", p.n_k},
                                    {"d", p.d},
                                    {"z_qk", s.z_qk()},
                                    {"rows", rows}}
                         .dump(2)
                  << '\n';
    } else if (o.csv) {
        t.print_csv(std::cout);
    } else {
        std::cout << "ioattn io: " << to_string(pass) << ", pattern " << o.pattern
                  << " (Z_QK = " << grouped(s.z_qk()) << "), B*H=" << p.batch_heads()
                  << " n_q=" << p.n_q << " n_k=" << p.n_k << " d=" << p.d
                  << "; I/O in words of the fused variants "
                  << "(each forced) and the materializing schedule\n";
        t.print(std::cout);
        std::cout
            << "bound = max(compulsory, min(Z^2/M, Z sqrt(Z_QK)/sqrt(M))) (Li et al. Thm 4.5); "
               "dry: '=' every variant's dry run equals its closed form; picks: the "
               "variant planner's choice\n";
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
                   bool dry_run) {
    if (o.dtype == "double")
        sweep<double>(o, p, pass, lo, hi, dry_run);
    else
        sweep<float>(o, p, pass, lo, hi, dry_run);
}

} // namespace ioattn::app
