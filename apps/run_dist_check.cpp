// `ioattn run --dist --check` (see run_dist_check.hpp): gather, single-process pipeline, double
// reference pipeline, error rule per output tensor; bf16: the section 16 tolerance.

#include "run_dist_check.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace ioattn::app {

namespace {

/// x in T (bf16 widened exactly).
template <typename T, typename S>
std::vector<T> as(const std::vector<S>& x) {
    std::vector<T> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
        out[i] = static_cast<T>(static_cast<Accumulator<S>>(x[i]));
    return out;
}

/// Owned operands of one pipeline (forward, then backward from its own O and L) in type T
/// (L in Accumulator<T>: fp32 for bf16).
template <typename T>
struct Pipeline {
    Problem p;
    std::vector<T> q, k, v, d_o, o;
    std::vector<Accumulator<T>> lse;
    std::vector<T> dq, dk, dv;

    template <typename S>
    explicit Pipeline(const DistData<S>& d)
        : p(d.p)
        , q(as<T>(d.q))
        , k(as<T>(d.k))
        , v(as<T>(d.v))
        , d_o(as<T>(d.d_o))
        , o(static_cast<std::size_t>(p.batch_heads() * p.n_q * p.d_v))
        , lse(static_cast<std::size_t>(p.batch_heads() * p.n_q))
        , dq(q.size())
        , dk(k.size())
        , dv(v.size()) {}

    ForwardArgs<T> forward() {
        return ForwardArgs<T>::packed(p, q.data(), k.data(), v.data(), o.data(), lse.data());
    }

    BackwardArgs<T> backward() {
        return BackwardArgs<T>::packed(p,
                                       q.data(),
                                       k.data(),
                                       v.data(),
                                       o.data(),
                                       lse.data(),
                                       d_o.data(),
                                       dq.data(),
                                       dk.data(),
                                       dv.data());
    }

    /// The pass through the reference kernels (reference) or the tiling's kernels; bf16: the
    /// bf16 entries.
    void run(Pass pass, const sparse::Support* s, const Tiling& t, const MemoryModel& m) {
        NullCounter c;
        if constexpr (std::is_same_v<T, bf16>) {
            if (s != nullptr) {
                AttentionOptions opts;
                opts.schedule = t.schedule;
                opts.memory = m;
                const Structure<bf16> st{s, {}};
                (void)ioattn::attention<bf16>(forward(), st, opts);
                if (pass == Pass::backward)
                    (void)ioattn::attention_backward<bf16>(backward(), st, opts);
                return;
            }
            dense::forward(forward(), t, m, c);
            if (pass == Pass::backward)
                dense::backward(backward(), t, m, c);
        } else {
            const bool ref = t.schedule == Schedule::reference;
            if (s != nullptr) {
                ref ? sparse::forward_reference(forward(), *s)
                    : sparse::forward(forward(), *s, t, m, c);
                if (pass == Pass::backward)
                    ref ? sparse::backward_reference(backward(), *s)
                        : sparse::backward(backward(), *s, t, m, c);
                return;
            }
            ref ? dense::forward_reference(forward()) : dense::forward(forward(), t, m, c);
            if (pass == Pass::backward)
                ref ? dense::backward_reference(backward()) : dense::backward(backward(), t, m, c);
        }
    }
};

/// |x - y| with equal infinities 0 and NaN propagated.
double abs_diff(double x, double y) {
    if (std::isinf(x) && std::isinf(y) && (x > 0) == (y > 0))
        return 0.0;
    if (std::isnan(x) || std::isnan(y))
        return std::numeric_limits<double>::quiet_NaN();
    return std::fabs(x - y);
}

template <typename A, typename B>
double max_diff(const std::vector<A>& a, const std::vector<B>& b) {
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double e = abs_diff(static_cast<double>(a[i]), static_cast<double>(b[i]));
        if (std::isnan(e))
            return e;
        worst = std::max(worst, e);
    }
    return worst;
}

double magnitude(const std::vector<double>& x) {
    double m = 1;
    for (const double e : x)
        if (std::isfinite(e))
            m = std::max(m, std::fabs(e));
    return m;
}

} // namespace

template <typename Scalar>
nlohmann::json check_distributed(MPI_Comm comm,
                                 const DistData<Scalar>& d,
                                 Pass pass,
                                 const sparse::Support* support,
                                 const Tiling& tiling,
                                 const MemoryModel& memory,
                                 int threads) {
    const Problem& p = d.p;
    const bool backward = pass == Pass::backward;
    std::vector<std::vector<Scalar>> dist;
    if (!backward) {
        dist.push_back(gather_rows(comm, d.lo, p.batch, p.heads, p.d_v, d.queries));
        dist.push_back(gather_rows(comm, d.llse, p.batch, p.heads, 1, d.queries));
    } else {
        dist.push_back(gather_rows(comm, d.ldq, p.batch, p.heads, p.d, d.queries));
        dist.push_back(gather_rows(comm, d.ldk, p.batch, p.kv_heads, p.d, d.keys));
        dist.push_back(gather_rows(comm, d.ldv, p.batch, p.kv_heads, p.d_v, d.keys));
    }
    if (d.rank != 0)
        return nullptr;
    Pipeline<Scalar> single(d);
    Pipeline<double> ref(d);
    with_threads(threads, [&] {
        single.run(pass, support, tiling, memory);
        ref.run(pass, support, Tiling{Schedule::reference, p.n_q, p.n_k}, memory);
    });
    const std::vector<Scalar>* s_out[] = {&single.o, &single.lse};
    const std::vector<double>* r_out[] = {&ref.o, &ref.lse};
    const std::vector<Scalar>* s_grad[] = {&single.dq, &single.dk, &single.dv};
    const std::vector<double>* r_grad[] = {&ref.dq, &ref.dk, &ref.dv};
    double err = 0, single_err = 0, diff = 0, tiny_max = 0, ratio = 0;
    bool passed = true;
    for (std::size_t t = 0; t < dist.size(); ++t) {
        const std::vector<Scalar>& s = backward ? *s_grad[t] : *s_out[t];
        const std::vector<double>& r = backward ? *r_grad[t] : *r_out[t];
        const double e = max_diff(dist[t], r);
        const double es = max_diff(s, r);
        const double tiny =
            8.0 * static_cast<double>(std::numeric_limits<Scalar>::epsilon()) * magnitude(r);
        passed = passed && e <= 2.0 * es + tiny; // false for NaN
        err = std::max(err, e);
        single_err = std::max(single_err, es);
        diff = std::max(diff, max_diff(dist[t], s));
        tiny_max = std::max(tiny_max, tiny);
        ratio = std::max(ratio, e / std::max(es, tiny));
    }
    return {{"max_abs_error", err},
            {"single_error", single_err},
            {"max_abs_diff", diff},
            {"tiny", tiny_max},
            {"error_ratio", ratio},
            {"passed", passed}};
}

namespace {

constexpr double kUnit16 = 0x1p-8; ///< unit roundoff of bf16 (8 significant bits)
constexpr double kUnit32 = 0x1p-24;

/// ||x - ref||_F / ||ref||_F (0 / 0 = 0; NaN propagates).
double relative_frobenius(const std::vector<float>& x, const std::vector<double>& ref) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double e = static_cast<double>(x[i]) - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

/// Largest finite |x| (0 for none).
double largest(const std::vector<double>& x) {
    double m = 0;
    for (const double e : x)
        if (std::isfinite(e))
            m = std::max(m, std::fabs(e));
    return m;
}

/// max |x - ref| and whether every element is within (u + acc32) max|O_ref| (outputs) or
/// acc32 (1 + |L_ref|) (L).
template <typename S>
std::pair<double, bool>
forward_error(const std::vector<S>& x, const std::vector<double>& ref, double acc32, bool lse) {
    const std::vector<float> xf = as<float>(x);
    double worst = 0;
    bool ok = true;
    double tol = (kUnit16 + acc32) * largest(ref);
    for (std::size_t i = 0; i < xf.size(); ++i) {
        const double e = abs_diff(static_cast<double>(xf[i]), ref[i]);
        worst = std::isnan(e) || e > worst ? e : worst;
        if (lse)
            tol = acc32 * (1.0 + std::fabs(ref[i]));
        ok = ok && e <= tol; // false for NaN
    }
    return {worst, ok};
}

} // namespace

template <>
nlohmann::json check_distributed<bf16>(MPI_Comm comm,
                                       const DistData<bf16>& d,
                                       Pass pass,
                                       const sparse::Support* support,
                                       const Tiling& tiling,
                                       const MemoryModel& memory,
                                       int threads) {
    const Problem& p = d.p;
    const bool backward = pass == Pass::backward;
    std::vector<std::vector<bf16>> dist;
    std::vector<float> dist_lse;
    if (!backward) {
        dist.push_back(gather_rows(comm, d.lo, p.batch, p.heads, p.d_v, d.queries));
        dist_lse = gather_rows(comm, d.llse, p.batch, p.heads, 1, d.queries);
    } else {
        dist.push_back(gather_rows(comm, d.ldq, p.batch, p.heads, p.d, d.queries));
        dist.push_back(gather_rows(comm, d.ldk, p.batch, p.kv_heads, p.d, d.keys));
        dist.push_back(gather_rows(comm, d.ldv, p.batch, p.kv_heads, p.d_v, d.keys));
    }
    if (d.rank != 0)
        return nullptr;
    Pipeline<bf16> single(d);
    Pipeline<double> ref(d); // the bf16 inputs exactly
    with_threads(threads, [&] {
        single.run(pass, support, tiling, memory);
        ref.run(pass, support, Tiling{Schedule::reference, p.n_q, p.n_k}, memory);
    });
    const double acc32 = 2.0 * static_cast<double>(p.n_k + p.d) * kUnit32;
    double err = 0, single_err = 0, diff = 0, tol = 0, lse_err = 0;
    bool passed = true;
    if (backward) {
        tol = 2.5 * kUnit16; // relative Frobenius, per gradient
        const std::vector<bf16>* s_grad[] = {&single.dq, &single.dk, &single.dv};
        const std::vector<double>* r_grad[] = {&ref.dq, &ref.dk, &ref.dv};
        for (std::size_t t = 0; t < dist.size(); ++t) {
            const double e = relative_frobenius(as<float>(dist[t]), *r_grad[t]);
            passed = passed && e <= tol; // false for NaN
            err = std::isnan(e) || e > err ? e : err;
            single_err =
                std::max(single_err, relative_frobenius(as<float>(*s_grad[t]), *r_grad[t]));
            diff = std::max(diff, max_diff(as<float>(dist[t]), as<float>(*s_grad[t])));
        }
    } else {
        const auto [eo, ok_o] = forward_error(dist[0], ref.o, acc32, false);
        const auto [el, ok_l] = forward_error(dist_lse, ref.lse, acc32, true);
        passed = ok_o && ok_l;
        err = eo;
        tol = (kUnit16 + acc32) * largest(ref.o);
        single_err = forward_error(single.o, ref.o, acc32, false).first;
        diff = std::max(max_diff(as<float>(dist[0]), as<float>(single.o)),
                        max_diff(dist_lse, single.lse));
        lse_err = el;
    }
    nlohmann::json j = {{"max_abs_error", err},
                        {"single_error", single_err},
                        {"max_abs_diff", diff},
                        {"tolerance", tol},
                        {"tiny", 0.0},
                        {"error_ratio", single_err > 0 ? err / single_err : 1.0},
                        {"passed", passed}};
    if (!backward)
        j["lse_max_abs_error"] = lse_err;
    return j;
}

template nlohmann::json check_distributed<float>(MPI_Comm,
                                                 const DistData<float>&,
                                                 Pass,
                                                 const sparse::Support*,
                                                 const Tiling&,
                                                 const MemoryModel&,
                                                 int);
template nlohmann::json check_distributed<double>(MPI_Comm,
                                                  const DistData<double>&,
                                                  Pass,
                                                  const sparse::Support*,
                                                  const Tiling&,
                                                  const MemoryModel&,
                                                  int);

} // namespace ioattn::app
