// `ioattn run --pass backward` and `ioattn run --pattern SPEC` (see run_variants.hpp). The check
// compares with the double reference, relative to a naive computation in the working type over
// the same allowed pairs: passed iff err(kernel) <= 2 err(naive) + tiny.

#include "run_variants.hpp"

#include "commands.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/variants.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include <bench_util.hpp>

namespace ioattn::app {

namespace {

constexpr const char* kWhere = "run";

/// Owned operands of a forward and backward pass in type T.
template <typename T>
struct Data {
    Problem p;
    std::vector<T> q, k, v, o, lse, d_o, d_q, d_k, d_v;

    Data(const Problem& problem, std::uint64_t seed)
        : p(problem) {
        const bench::ForwardData<T> f(problem, seed);
        q = f.q;
        k = f.k;
        v = f.v;
        o = f.o;
        lse = f.lse;
        std::mt19937_64 rng(seed + 7); // the upstream gradient dO
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        d_o.resize(o.size());
        for (T& e : d_o)
            e = static_cast<T>(u(rng));
        d_q.assign(q.size(), T(0));
        d_k.assign(k.size(), T(0));
        d_v.assign(v.size(), T(0));
    }

    template <typename U>
    explicit Data(const Data<U>& x)
        : p(x.p) {
        const auto cv = [](const std::vector<U>& a) { return std::vector<T>(a.begin(), a.end()); };
        q = cv(x.q);
        k = cv(x.k);
        v = cv(x.v);
        o = cv(x.o);
        lse = cv(x.lse);
        d_o = cv(x.d_o);
        d_q = cv(x.d_q);
        d_k = cv(x.d_k);
        d_v = cv(x.d_v);
    }

    ForwardArgs<T> forward() {
        return {p,
                TensorView<const T>::packed(q.data(), p.batch, p.heads, p.n_q, p.d),
                TensorView<const T>::packed(k.data(), p.batch, p.kv_heads, p.n_k, p.d),
                TensorView<const T>::packed(v.data(), p.batch, p.kv_heads, p.n_k, p.d_v),
                TensorView<T>::packed(o.data(), p.batch, p.heads, p.n_q, p.d_v),
                TensorView<T>::packed(lse.data(), p.batch, p.heads, p.n_q, 1)};
    }

    BackwardArgs<T> backward() {
        BackwardArgs<T> a;
        static_cast<ForwardArgs<T>&>(a) = forward();
        a.d_o = TensorView<const T>::packed(d_o.data(), p.batch, p.heads, p.n_q, p.d_v);
        a.d_q = TensorView<T>::packed(d_q.data(), p.batch, p.heads, p.n_q, p.d);
        a.d_k = TensorView<T>::packed(d_k.data(), p.batch, p.kv_heads, p.n_k, p.d);
        a.d_v = TensorView<T>::packed(d_v.data(), p.batch, p.kv_heads, p.n_k, p.d_v);
        return a;
    }
};

using Allowed = std::function<bool(std::int64_t, std::int64_t)>;

/// The naive computation in T over the allowed pairs: scores, softmax with the row max, P V; and
/// for the backward dV = P^T dO, dS = P o (dO V^T - D), dQ = scale dS K, dK = scale dS^T Q.
template <typename T>
void naive(Data<T>& x, const Allowed& allowed, bool grads) {
    const Problem& p = x.p;
    std::fill(x.d_q.begin(), x.d_q.end(), T(0));
    std::fill(x.d_k.begin(), x.d_k.end(), T(0));
    std::fill(x.d_v.begin(), x.d_v.end(), T(0));
    const auto at = [](std::int64_t row, std::int64_t width, std::int64_t col) {
        return static_cast<std::size_t>(row * width + col);
    };
    const auto s = static_cast<T>(p.scale);
    std::vector<T> w(static_cast<std::size_t>(p.n_k));
    for (std::int64_t sl = 0; sl < p.batch_heads(); ++sl) {
        const std::int64_t kv = sl / p.heads * p.kv_heads + sl % p.heads / p.group();
        for (std::int64_t i = 0; i < p.n_q; ++i) {
            const std::int64_t qi = sl * p.n_q + i;
            T m = -std::numeric_limits<T>::infinity(), l = 0;
            for (std::int64_t j = 0; j < p.n_k; ++j) {
                T dot = 0;
                for (std::int64_t c = 0; c < p.d; ++c)
                    dot += x.q[at(qi, p.d, c)] * x.k[at(kv * p.n_k + j, p.d, c)];
                w[static_cast<std::size_t>(j)] =
                    allowed(i, j) ? dot * s : -std::numeric_limits<T>::infinity();
                m = std::max(m, w[static_cast<std::size_t>(j)]);
            }
            for (T& e : w) {
                e = e == -std::numeric_limits<T>::infinity() ? T(0) : std::exp(e - m);
                l += e;
            }
            if (l == T(0))
                continue;
            T delta = 0;
            for (std::int64_t c = 0; c < p.d_v; ++c) {
                T acc = 0;
                for (std::int64_t j = 0; j < p.n_k; ++j)
                    acc += w[static_cast<std::size_t>(j)] / l * x.v[at(kv * p.n_k + j, p.d_v, c)];
                x.o[at(qi, p.d_v, c)] = acc;
                delta += acc * x.d_o[at(qi, p.d_v, c)];
            }
            if (!grads)
                continue;
            for (std::int64_t j = 0; j < p.n_k; ++j) {
                const T pr = w[static_cast<std::size_t>(j)] / l;
                if (pr == T(0))
                    continue;
                T dp = 0;
                for (std::int64_t c = 0; c < p.d_v; ++c) {
                    dp += x.d_o[at(qi, p.d_v, c)] * x.v[at(kv * p.n_k + j, p.d_v, c)];
                    x.d_v[at(kv * p.n_k + j, p.d_v, c)] += pr * x.d_o[at(qi, p.d_v, c)];
                }
                const T ds = pr * (dp - delta);
                for (std::int64_t c = 0; c < p.d; ++c) {
                    x.d_q[at(qi, p.d, c)] += s * ds * x.k[at(kv * p.n_k + j, p.d, c)];
                    x.d_k[at(kv * p.n_k + j, p.d, c)] += s * ds * x.q[at(qi, p.d, c)];
                }
            }
        }
    }
}

template <typename A>
double max_err(const std::vector<A>& a, const std::vector<double>& b) {
    double e = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double x = static_cast<double>(a[i]);
        if (std::isinf(x) && x == b[i])
            continue;
        e = std::max(e,
                     std::isnan(x) != std::isnan(b[i]) ? std::numeric_limits<double>::infinity()
                                                       : std::fabs(x - b[i]));
    }
    return e;
}

template <typename T>
double outputs_error(const Data<T>& x, const Data<double>& ref, bool grads) {
    if (!grads)
        return std::max(max_err(x.o, ref.o), max_err(x.lse, ref.lse));
    return std::max({max_err(x.d_q, ref.d_q), max_err(x.d_k, ref.d_k), max_err(x.d_v, ref.d_v)});
}

/// The entry point's options for this run (the schedule, selection and M as given).
AttentionOptions attention_options(const VariantRun& r) {
    AttentionOptions a;
    if (r.schedule != "auto")
        a.schedule = parse_schedule(r.schedule);
    a.select = r.select;
    a.memory = r.memory;
    a.cache_bytes = r.cache_bytes;
    a.threads = r.threads;
    a.where = kWhere;
    if (r.variant != "auto")
        a.variant = sparse::parse_variant(r.variant);
    return a;
}

/// The support of --pattern and, with --input-density < 1, Q, K, V as CSR rows: each entry
/// kept with that probability (the rest exact zeros, also in the dense views of `data`).
template <typename Scalar>
struct Operands {
    using Rows = sparse::SparseRows<Scalar>;
    std::optional<sparse::Support> support;
    std::optional<Rows> q, k, v;

    Operands(const VariantRun& r, Data<Scalar>& data) {
        const Problem& p = r.problem;
        if (r.pattern == "dense" && r.input_density == 1.0)
            return;
        if (p.causal)
            throw UsageError(std::string(kWhere) +
                             ": --causal with --pattern: use the 'causal' pattern (or '&causal')");
        support = sparse::parse_pattern(r.pattern, p.n_q, p.n_k, r.seed);
        if (r.input_density == 1.0)
            return;
        std::mt19937_64 rng(r.seed + 11);
        std::bernoulli_distribution keep(r.input_density);
        for (auto* x : {&data.q, &data.k, &data.v})
            for (Scalar& e : *x)
                e = keep(rng) ? e : Scalar(0);
        const std::int64_t qs = p.batch * p.heads, ks = p.batch * p.kv_heads;
        q.emplace(Rows::from_dense_threshold(data.q, qs * p.n_q, p.d, Scalar(0)));
        k.emplace(Rows::from_dense_threshold(data.k, ks * p.n_k, p.d, Scalar(0)));
        v.emplace(Rows::from_dense_threshold(data.v, ks * p.n_k, p.d_v, Scalar(0)));
    }

    [[nodiscard]] Structure<Scalar> structure() const {
        Structure<Scalar> s;
        s.support = support ? &*support : nullptr;
        if (q)
            s.inputs = {&*q, &*k, &*v};
        return s;
    }
};

/// --check: the outputs against the double reference, relative to the naive computation in
/// Scalar over the same allowed pairs.
template <typename Scalar>
nlohmann::json check_json(const Data<Scalar>& data, const sparse::Support* support, bool grads) {
    const Problem& p = data.p;
    Data<double> ref(data);
    const Allowed allowed =
        support != nullptr
            ? Allowed([&](std::int64_t i, std::int64_t k) { return support->contains(i, k); })
            : Allowed([&](std::int64_t i, std::int64_t k) { return k < p.visible_keys(i); });
    if (support != nullptr) {
        sparse::forward_reference(ref.forward(), *support);
        if (grads)
            sparse::backward_reference(ref.backward(), *support);
    } else {
        dense::forward_reference(ref.forward());
        if (grads)
            dense::backward_reference(ref.backward());
    }
    Data<Scalar> nv(data);
    naive(nv, allowed, grads);
    const double err = outputs_error(data, ref, grads);
    const double naive_err = outputs_error(nv, ref, grads);
    double mag = 1.0;
    for (const auto* x : {&ref.o, &ref.d_q, &ref.d_k, &ref.d_v})
        for (const double e : *x)
            mag = std::max(mag, std::fabs(e));
    const double tiny = 8.0 * static_cast<double>(std::numeric_limits<Scalar>::epsilon()) * mag *
                        (sizeof(Scalar) == 8 ? std::sqrt(static_cast<double>(p.n_k + p.d)) : 1.0);
    return {{"max_abs_error", err},
            {"naive_error", naive_err},
            {"tiny", tiny},
            {"error_ratio", err / std::max(naive_err, tiny)},
            {"passed", err <= 2 * naive_err + tiny}};
}

/// The problem, the plan and the bounds, in the keys of the dense forward's JSON.
nlohmann::json plan_json(const VariantRun& r, const AttentionPlan& plan) {
    const Problem& p = plan.problem;
    const Bound& b = plan.bound;
    nlohmann::json j = {{"batch", p.batch},
                        {"heads", p.heads},
                        {"kv_heads", p.kv_heads},
                        {"n_q", p.n_q},
                        {"n_k", p.n_k},
                        {"d", p.d},
                        {"d_v", p.d_v},
                        {"causal", p.causal},
                        {"scale", p.scale}};
    j["pass"] = std::string(to_string(r.pass));
    j["pattern"] = r.pattern;
    if (plan.sparse) {
        j["z_qk"] = plan.z_qk;
        j["input_density"] = r.input_density;
        j["z_input"] = plan.z_input; // per (batch, head)
    }
    j["schedule"] = std::string(to_string(plan.schedule));
    if (const auto& v = plan.variants) { // keys only when the structure dispatcher ran
        const auto tiling_json = [](const Tiling& t) {
            return nlohmann::json{{"rows", t.rows}, {"cols", t.cols}};
        };
        j["variant"] = std::string(sparse::to_string(v->variant));
        j["variant_plan"] = {{"inner", std::string(sparse::to_string(v->inner))},
                             {"forced", r.variant != "auto"},
                             {"tile_blocks", v->tile_blocks},
                             {"element_blocks", v->element_blocks},
                             {"split_blocks", v->split_blocks},
                             {"tile_pairs", v->tile_pairs},
                             {"element_pairs", v->element_pairs},
                             {"rows_reordered", v->rows_reordered},
                             {"keys_reordered", v->keys_reordered},
                             {"tile_tiling", tiling_json(v->tile)},
                             {"element_tiling", tiling_json(v->element)}};
    }
    j["selected_by"] = plan.selected_by ? nlohmann::json(std::string(to_string(*plan.selected_by)))
                                        : nlohmann::json(nullptr);
    j["M"] = plan.memory.fast_words;
    j["threads"] = with_threads(r.threads, [] { return max_concurrency(); });
    j["seed"] = r.seed;
    j["repeat"] = r.repeat;
    j["tiling"] = {{"schedule", std::string(to_string(plan.tiling.schedule))},
                   {"rows", plan.tiling.rows},
                   {"cols", plan.tiling.cols}};
    j["bound"] = {{"regime", std::string(b.regime)},
                  {"compulsory", b.compulsory},
                  {"leading", b.leading},
                  {"asymptotic", b.asymptotic()},
                  {"explicit", b.explicit_bound}};
    if (r.pass == Pass::backward && !plan.sparse)
        j["bound"]["theorem_1_1"] = b.theorem;
    return j;
}

} // namespace

template <typename Scalar>
nlohmann::json run_variant(const VariantRun& r) {
    const Problem& p = r.problem;
    const bool backward = r.pass == Pass::backward;
    Data<Scalar> data(p, r.seed);
    const Operands<Scalar> operands(r, data);
    const Structure<Scalar> structure = operands.structure();
    // --- the schedule and its tiling: the library's plan ---
    if (r.variant != "auto" &&
        (r.input_density < 1.0 || (r.schedule != "fused" && r.schedule != "auto")))
        throw UsageError(std::string(kWhere) + ": --variant " + r.variant +
                         " needs the fused schedule, a sparse --pattern and dense inputs");
    const AttentionOptions opts = attention_options(r);
    const AttentionPlan plan = plan_attention(p, r.pass, structure, opts);
    if (r.count_io && plan.schedule == Schedule::reference)
        throw UsageError(std::string(kWhere) +
                         ": --count-io needs a fused or materialized schedule");
    const auto run = [&](const AttentionOptions& o) {
        return backward ? attention_backward(data.backward(), structure, plan, o)
                        : attention(data.forward(), structure, plan, o);
    };
    if (backward) { // O and L are the backward's inputs, made under an ample M whatever M is
        AttentionOptions ample = opts; // under test
        ample.schedule =
            plan.schedule == Schedule::reference ? Schedule::reference : Schedule::fused;
        ample.memory = MemoryModel{std::max<std::int64_t>(plan.memory.fast_words, 1 << 22)};
        ample.cache_bytes.reset();
        (void)attention(data.forward(), structure, ample);
    }
    const double seconds = bench::median_seconds(
        r.repeat, [&] { (void)run(opts); }, r.repeat > 1);
    const double flops = plan.sparse ? 4.0 * static_cast<double>(plan.z_qk) *
                                           static_cast<double>(p.d * p.batch_heads()) *
                                           (backward ? 2.5 : 1.0)
                                     : flop_count_convention(p, r.pass);
    nlohmann::json j = plan_json(r, plan);
    j["dtype"] = sizeof(Scalar) == 4 ? "float" : "double";
    j["seconds"] = seconds;
    j["gflops"] = flops / seconds * 1e-9;
    j["check"] = r.check ? check_json(data, structure.support, backward) : nullptr;
    j["io"] = nullptr;
    if (r.count_io) {
        AttentionOptions counted = opts;
        counted.count_io = true;
        const AttentionReport report = run(counted);
        const IoReport got = *report.io;
        const IoReport closed = *report.closed_form;
        j["io"] = {{"reads", got.reads},
                   {"writes", got.writes},
                   {"total", got.total()},
                   {"peak_resident", got.peak},
                   {"closed_form_total", closed.total()},
                   {"matches_closed_form", got == closed},
                   {"ratio_to_bound", static_cast<double>(got.total()) / plan.bound.asymptotic()}};
    }
    return j;
}

template nlohmann::json run_variant<float>(const VariantRun&);
template nlohmann::json run_variant<double>(const VariantRun&);

} // namespace ioattn::app
