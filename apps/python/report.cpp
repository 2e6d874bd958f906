// ioattn._core.io_count and bound (see report.hpp): a problem from its sizes, planned by the
// entry point, walked without data (io_count), reported as `ioattn run --json` reports it.

#include "report.hpp"

#include "mask.hpp"
#include "settings.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/error.hpp>
#include <ioattn/sparse/io_cost.hpp>
#include <ioattn/sparse/sparse_rows.hpp>

#include <optional>
#include <string>

#include <pybind11/stl.h>

namespace ioattn::python {

namespace {

/// The sizes and options of a dry run, as the Python wrapper resolved them.
struct Query {
    Problem problem;
    const Mask* mask = nullptr;
    std::string pattern = "dense"; ///< how the mask was given, echoed as "pattern"
    Pass pass = Pass::forward;
    bool f64 = false;
    AttentionOptions options;
};

py::dict bound_dict(const Bound& x, bool theorem) {
    py::dict b;
    b["regime"] = std::string(x.regime);
    b["compulsory"] = x.compulsory;
    b["leading"] = x.leading;
    b["asymptotic"] = x.asymptotic();
    b["explicit"] = x.explicit_bound;
    if (theorem)
        b["theorem_1_1"] = x.theorem;
    return b;
}

py::dict plan_dict(const Query& q, const AttentionPlan& plan) {
    const Problem& p = plan.problem;
    py::dict j;
    j["batch"] = p.batch;
    j["heads"] = p.heads;
    j["kv_heads"] = p.kv_heads;
    j["n_q"] = p.n_q;
    j["n_k"] = p.n_k;
    j["d"] = p.d;
    j["d_v"] = p.d_v;
    j["causal"] = p.causal;
    j["scale"] = p.scale;
    j["pass"] = std::string(to_string(plan.pass));
    j["pattern"] = q.pattern;
    if (plan.sparse) {
        j["z_qk"] = plan.z_qk;
        j["z_input"] = plan.z_input;
    }
    j["dtype"] = q.f64 ? "double" : "float";
    j["schedule"] = std::string(to_string(plan.schedule));
    j["selected_by"] = plan.selected_by
                           ? py::object(py::str(std::string(to_string(*plan.selected_by))))
                           : py::object(py::none());
    j["M"] = plan.memory.fast_words;
    j["objective"] = std::string(to_string(plan.objective));
    j["planned_for"] = plan.planned_for;
    py::dict t;
    t["schedule"] = std::string(to_string(plan.tiling.schedule));
    t["rows"] = plan.tiling.rows;
    t["cols"] = plan.tiling.cols;
    t["resident_words"] = plan.tiling.resident_words(p, plan.pass, plan.kernels());
    if (plan.tiling.depth > 0)
        t["depth"] = plan.tiling.depth;
    j["tiling"] = t;
    j["bound"] = bound_dict(plan.bound, plan.pass == Pass::backward && !plan.sparse);
    if (const auto& v = plan.variants) // only when the variant planner ran
        j["variant"] = std::string(sparse::to_string(v->variant));
    return j;
}

template <typename Scalar>
py::dict count(const Query& q) {
    Structure<Scalar> s;
    s.support = q.mask != nullptr ? &q.mask->support() : nullptr;
    AttentionReport r;
    {
        py::gil_scoped_release release;
        r = io_count(q.problem, q.pass, s, q.options);
    }
    py::dict j = plan_dict(q, r.plan);
    py::dict io;
    io["reads"] = r.io->reads;
    io["writes"] = r.io->writes;
    io["total"] = r.io->total();
    io["peak_resident"] = r.io->peak;
    io["closed_form_total"] = r.closed_form->total();
    io["matches_closed_form"] = *r.io == *r.closed_form;
    io["ratio_to_bound"] = static_cast<double>(r.io->total()) / r.plan.bound.asymptotic();
    j["io"] = io;
    return j;
}

/// The bounds of `pass` for M, with the sizes they depend on (no tiling needed: any M).
py::dict bound_of(const Query& q) {
    const std::string where(q.options.where);
    const Problem p = q.problem.resolved(where);
    const MemoryModel& m = *q.options.memory;
    m.validate(where.c_str());
    if (q.mask == nullptr) {
        py::dict j = bound_dict(bound(p, m, q.pass), q.pass == Pass::backward);
        j["M"] = m.fast_words;
        return j;
    }
    const sparse::Support& s = q.mask->support();
    if (s.n_q() != p.n_q || s.n_k() != p.n_k)
        throw InvalidArgument(where + ": the mask is " + std::to_string(s.n_q()) + " x " +
                              std::to_string(s.n_k()) + ", the problem is " +
                              std::to_string(p.n_q) + " x " + std::to_string(p.n_k));
    const std::int64_t z_in = sparse::z_input(p, q.pass);
    py::dict j = bound_dict(sparse::forward_bound(p, s, m, z_in), false);
    j["M"] = m.fast_words;
    j["z_qk"] = s.z_qk();
    j["z_input"] = z_in;
    return j;
}

struct Sizes {
    std::int64_t batch, heads;
    std::optional<std::int64_t> kv_heads;
    std::int64_t n_q, n_k, d;
    std::optional<std::int64_t> d_v;
    bool causal;
    std::optional<double> scale;
};

Query query_of(const Sizes& z,
               const Mask* mask,
               std::string pattern,
               bool backward,
               const Settings& settings,
               bool f64,
               const char* where) {
    Query q;
    q.problem.batch = z.batch;
    q.problem.heads = z.heads;
    q.problem.kv_heads = z.kv_heads.value_or(0);
    q.problem.n_q = z.n_q;
    q.problem.n_k = z.n_k;
    q.problem.d = z.d;
    q.problem.d_v = z.d_v.value_or(0);
    q.problem.causal = z.causal;
    q.problem.scale = scale_of(z.scale, where);
    q.mask = mask;
    q.pattern = std::move(pattern);
    q.pass = backward ? Pass::backward : Pass::forward;
    q.f64 = f64;
    q.options = options_of(settings, f64, where);
    return q;
}

} // namespace

void register_reports(py::module_& m) {
    using py::arg;
    m.def(
        "io_count",
        [](const Sizes& z,
           const Mask* mask,
           std::string pattern,
           bool backward,
           const std::string& schedule,
           const std::string& select,
           std::optional<std::int64_t> memory,
           std::optional<std::int64_t> cache_bytes,
           bool f64,
           bool tuned,
           std::optional<int> threads,
           std::string variant,
           std::optional<std::string> objective) {
            Settings s;
            s.variant = std::move(variant);
            s.objective = std::move(objective);
            s.schedule = schedule;
            s.select = select;
            s.memory = memory;
            s.cache_bytes = cache_bytes;
            s.threads = threads;
            s.tuned = tuned;
            const Query q =
                query_of(z, mask, std::move(pattern), backward, s, f64, "ioattn.io_count");
            return f64 ? count<double>(q) : count<float>(q);
        },
        arg("sizes"),
        arg("mask").none(true),
        arg("pattern"),
        arg("backward"),
        arg("schedule"),
        arg("select"),
        arg("M").none(true),
        arg("cache_bytes").none(true),
        arg("f64"),
        arg("tuned"),
        arg("num_threads").none(true),
        arg("variant"),
        arg("objective").none(true));
    m.def(
        "bound",
        [](const Sizes& z,
           const Mask* mask,
           std::string pattern,
           bool backward,
           std::optional<std::int64_t> memory,
           std::optional<std::int64_t> cache_bytes,
           bool f64) {
            Settings s;
            s.memory = memory;
            s.cache_bytes = cache_bytes;
            return bound_of(
                query_of(z, mask, std::move(pattern), backward, s, f64, "ioattn.bound"));
        },
        arg("sizes"),
        arg("mask").none(true),
        arg("pattern"),
        arg("backward"),
        arg("M").none(true),
        arg("cache_bytes").none(true),
        arg("f64"));
    py::class_<Sizes>(m, "_Sizes")
        .def(py::init<std::int64_t,
                      std::int64_t,
                      std::optional<std::int64_t>,
                      std::int64_t,
                      std::int64_t,
                      std::int64_t,
                      std::optional<std::int64_t>,
                      bool,
                      std::optional<double>>(),
             arg("batch"),
             arg("heads"),
             arg("kv_heads").none(true),
             arg("n_q"),
             arg("n_k"),
             arg("d"),
             arg("d_v").none(true),
             arg("causal"),
             arg("scale").none(true))
        .def_readonly("n_q", &Sizes::n_q)
        .def_readonly("n_k", &Sizes::n_k)
        .def_readwrite("causal", &Sizes::causal);
}

} // namespace ioattn::python
