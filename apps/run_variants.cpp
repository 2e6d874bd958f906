// `ioattn run --pass backward` and `ioattn run --pattern SPEC` (see run_variants.hpp). The check
// compares with the double reference, relative to a naive computation in the working type over
// the same allowed pairs: passed iff err(kernel) <= 2 err(naive) + tiny.

#include "run_variants.hpp"

#include "commands.hpp"

#include <ioattn/dense.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/io_cost.hpp>
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

} // namespace

template <typename Scalar>
nlohmann::json run_variant(const VariantRun& r) {
    const Problem& p = r.problem;
    const bool backward = r.pass == Pass::backward;
    const bool is_sparse = r.pattern != "dense" || r.input_density < 1.0;
    std::optional<sparse::Support> support;
    if (is_sparse) {
        if (p.causal)
            throw UsageError(std::string(kWhere) +
                             ": --causal with --pattern: use the 'causal' pattern (or '&causal')");
        support = sparse::parse_pattern(r.pattern, p.n_q, p.n_k, r.seed);
    }
    Data<Scalar> data(p, r.seed);
    // --- sparse inputs: Q, K, V keep each entry with probability input_density (the rest are
    // exact zeros) and reach the kernels as CSR rows; the dense views hold the same values ---
    using Rows = sparse::SparseRows<Scalar>;
    std::optional<Rows> sq, sk, sv;
    sparse::SparseInputs<Scalar> inputs;
    std::int64_t z_in = sparse::z_input(p, r.pass); // per (batch, head)
    if (r.input_density < 1.0) {
        std::mt19937_64 rng(r.seed + 11);
        std::bernoulli_distribution keep(r.input_density);
        for (auto* x : {&data.q, &data.k, &data.v})
            for (Scalar& e : *x)
                e = keep(rng) ? e : Scalar(0);
        const std::int64_t qs = p.batch * p.heads, ks = p.batch * p.kv_heads;
        sq.emplace(Rows::from_dense_threshold(data.q, qs * p.n_q, p.d, Scalar(0)));
        sk.emplace(Rows::from_dense_threshold(data.k, ks * p.n_k, p.d, Scalar(0)));
        sv.emplace(Rows::from_dense_threshold(data.v, ks * p.n_k, p.d_v, Scalar(0)));
        inputs = {&*sq, &*sk, &*sv};
        z_in = sparse::z_input(
            sparse::InputNonzeros{
                sq->nonzeros() / qs, sk->nonzeros() / ks, sv->nonzeros() / ks, p.n_q * p.d_v},
            r.pass);
    }
    // --- the schedule and its tiling ---
    Schedule schedule = Schedule::fused;
    nlohmann::json selected_by = nullptr;
    if (r.schedule == "auto") {
        require_some_tiling(r.memory, p, r.pass, kWhere);
        schedule = is_sparse && !backward
                       ? sparse::select_schedule(p, *support, r.memory, r.select, z_in)
                       : select_schedule(p, r.memory, r.select, r.pass);
        if (is_sparse && backward) { // the sparse backward's cost selection
            const auto f = Tiling::try_for_memory(Schedule::fused, r.memory, p, r.pass);
            const auto m = Tiling::try_for_memory(Schedule::materialized, r.memory, p, r.pass);
            schedule =
                !m || (f &&
                       sparse::io_cost_backward_fused(p, *support, inputs, *f).total() <=
                           sparse::io_cost_backward_materialized(p, *support, inputs, *m).total())
                    ? Schedule::fused
                    : Schedule::materialized;
        }
        selected_by = std::string(to_string(r.select));
    } else {
        schedule = parse_schedule(r.schedule);
    }
    if (r.count_io && schedule == Schedule::reference)
        throw UsageError(std::string(kWhere) +
                         ": --count-io needs a fused or materialized schedule");
    Tiling tiling = tiling_for(schedule, r.memory, p, true, kWhere, r.pass);
    if (is_sparse && schedule != Schedule::reference)
        tiling = sparse::tuned_tiling(schedule, r.memory, p, r.pass);
    // --- the structure dispatcher's plan (sparse fused with dense inputs; sparse inputs run
    // the tile variant, the one kernel that multiplies them as stored) ---
    if (r.variant != "auto" && (!is_sparse || schedule != Schedule::fused || r.input_density < 1.0))
        throw UsageError(std::string(kWhere) + ": --variant " + r.variant +
                         " needs the fused schedule, a sparse --pattern and dense inputs");
    std::optional<sparse::VariantPlan> vplan;
    if (is_sparse && schedule == Schedule::fused && r.input_density == 1.0)
        vplan = sparse::plan_variants<Scalar>(
            p,
            *support,
            r.memory,
            r.pass,
            r.variant == "auto" ? std::nullopt
                                : std::optional<sparse::Variant>(sparse::parse_variant(r.variant)));

    // the forward outputs the backward needs (untimed)
    const auto run_forward = [&](Data<Scalar>& x, const Tiling& t, auto& counter) {
        if (vplan)
            sparse::forward(x.forward(), *support, *vplan, r.memory, counter);
        else if (is_sparse)
            sparse::forward(x.forward(), *support, inputs, t, r.memory, counter);
        else
            dense::forward(x.forward(), t, r.memory, counter);
    };
    const auto run_backward = [&](Data<Scalar>& x, const Tiling& t, auto& counter) {
        if (vplan)
            sparse::backward(x.backward(), *support, *vplan, r.memory, counter);
        else if (!is_sparse)
            dense::backward(x.backward(), t, r.memory, counter);
        else if (t.schedule == Schedule::reference)
            sparse::backward_reference(x.backward(), *support, inputs);
        else if (t.schedule == Schedule::materialized)
            sparse::backward_materialized(x.backward(), *support, inputs, t, r.memory, counter);
        else
            sparse::backward_fused(x.backward(), *support, inputs, t, r.memory, counter);
    };
    if (backward) {    // O and L are the backward's inputs, made under an ample M whatever M is
        NullCounter c; // under test
        const MemoryModel ample{std::max<std::int64_t>(r.memory.fast_words, std::int64_t{1} << 22)};
        const Tiling ft =
            schedule == Schedule::reference ? tiling : Tiling::tuned(Schedule::fused, ample, p);
        with_threads(r.threads, [&] {
            if (is_sparse)
                sparse::forward(data.forward(), *support, inputs, ft, ample, c);
            else
                dense::forward(data.forward(), ft, ample, c);
        });
    }
    const double seconds = bench::median_seconds(
        r.repeat,
        [&] {
            NullCounter c;
            with_threads(r.threads, [&] {
                if (backward)
                    run_backward(data, tiling, c);
                else
                    run_forward(data, tiling, c);
            });
        },
        r.repeat > 1);
    const double z = is_sparse ? static_cast<double>(support->z_qk()) : 0.0;
    const double flops =
        is_sparse ? 4.0 * z * static_cast<double>(p.d * p.batch_heads()) * (backward ? 2.5 : 1.0)
                  : flop_count_convention(p, r.pass);
    const Bound b = is_sparse ? sparse::bound(p,
                                              *support,
                                              r.memory,
                                              z_in,
                                              sparse::used_input_words(p, *support, inputs, r.pass),
                                              r.pass)
                              : bound(p, r.memory, r.pass);

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
    if (is_sparse) {
        j["z_qk"] = support->z_qk();
        j["input_density"] = r.input_density;
        j["z_input"] = z_in; // per (batch, head)
    }
    j["dtype"] = sizeof(Scalar) == 4 ? "float" : "double";
    j["schedule"] = std::string(to_string(schedule));
    j["variant"] = nullptr;
    if (vplan) {
        const auto tiling_json = [](const Tiling& t) {
            return nlohmann::json{{"rows", t.rows}, {"cols", t.cols}};
        };
        j["variant"] = std::string(sparse::to_string(vplan->variant));
        j["variant_plan"] = {{"inner", std::string(sparse::to_string(vplan->inner))},
                             {"forced", r.variant != "auto"},
                             {"tile_blocks", vplan->tile_blocks},
                             {"element_blocks", vplan->element_blocks},
                             {"split_blocks", vplan->split_blocks},
                             {"tile_pairs", vplan->tile_pairs},
                             {"element_pairs", vplan->element_pairs},
                             {"rows_reordered", vplan->rows_reordered},
                             {"keys_reordered", vplan->keys_reordered},
                             {"tile_tiling", tiling_json(vplan->tile)},
                             {"element_tiling", tiling_json(vplan->element)}};
    }
    j["selected_by"] = selected_by;
    j["M"] = r.memory.fast_words;
    j["threads"] = with_threads(r.threads, [] { return max_concurrency(); });
    j["seed"] = r.seed;
    j["repeat"] = r.repeat;
    j["seconds"] = seconds;
    j["gflops"] = flops / seconds * 1e-9;
    j["tiling"] = {{"schedule", std::string(to_string(tiling.schedule))},
                   {"rows", tiling.rows},
                   {"cols", tiling.cols}};
    j["bound"] = {{"regime", std::string(b.regime)},
                  {"compulsory", b.compulsory},
                  {"leading", b.leading},
                  {"asymptotic", b.asymptotic()},
                  {"explicit", b.explicit_bound}};
    if (backward && !is_sparse)
        j["bound"]["theorem_1_1"] = b.theorem;
    j["check"] = nullptr;
    j["io"] = nullptr;
    if (r.check) {
        Data<double> ref(data);
        const Allowed allowed =
            is_sparse
                ? Allowed([&](std::int64_t i, std::int64_t k) { return support->contains(i, k); })
                : Allowed([&](std::int64_t i, std::int64_t k) { return k < p.visible_keys(i); });
        if (is_sparse) {
            sparse::forward_reference(ref.forward(), *support);
            if (backward)
                sparse::backward_reference(ref.backward(), *support);
        } else {
            dense::forward_reference(ref.forward());
            if (backward)
                dense::backward_reference(ref.backward());
        }
        Data<Scalar> nv(data);
        naive(nv, allowed, backward);
        const double err = outputs_error(data, ref, backward);
        const double naive_err = outputs_error(nv, ref, backward);
        double mag = 1.0;
        for (const auto* x : {&ref.o, &ref.d_q, &ref.d_k, &ref.d_v})
            for (const double e : *x)
                mag = std::max(mag, std::fabs(e));
        const double tiny =
            8.0 * static_cast<double>(std::numeric_limits<Scalar>::epsilon()) * mag *
            (sizeof(Scalar) == 8 ? std::sqrt(static_cast<double>(p.n_k + p.d)) : 1.0);
        j["check"] = {{"max_abs_error", err},
                      {"naive_error", naive_err},
                      {"tiny", tiny},
                      {"error_ratio", err / std::max(naive_err, tiny)},
                      {"passed", err <= 2 * naive_err + tiny}};
    }
    if (r.count_io) {
        IoCounter counter(r.memory.fast_words);
        with_threads(r.threads, [&] {
            if (backward)
                run_backward(data, tiling, counter);
            else
                run_forward(data, tiling, counter);
        });
        const IoReport got = counter.report();
        const IoReport closed =
            vplan       ? sparse::io_cost<Scalar>(p, *support, *vplan)
            : is_sparse ? (!backward ? sparse::io_cost_forward(p, *support, inputs, tiling)
                           : tiling.schedule == Schedule::fused
                               ? sparse::io_cost_backward_fused(p, *support, inputs, tiling)
                               : sparse::io_cost_backward_materialized(p, *support, inputs, tiling))
                        : io_cost(p, tiling, r.pass);
        j["io"] = {{"reads", got.reads},
                   {"writes", got.writes},
                   {"total", got.total()},
                   {"peak_resident", got.peak},
                   {"closed_form_total", closed.total()},
                   {"matches_closed_form", got == closed},
                   {"ratio_to_bound", static_cast<double>(got.total()) / b.asymptotic()}};
    }
    return j;
}

template nlohmann::json run_variant<float>(const VariantRun&);
template nlohmann::json run_variant<double>(const VariantRun&);

} // namespace ioattn::app
