// `ioattn run --dist --check` (see run_dist_check.hpp): gather, single-process pipeline, double
// reference pipeline, error rule per output tensor.

#include "run_dist_check.hpp"

#include <ioattn/dense.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace ioattn::app {

namespace {

/// Owned operands of one pipeline (forward, then backward from its own O and L) in type T.
template <typename T>
struct Pipeline {
    Problem p;
    std::vector<T> q, k, v, d_o, o, lse, dq, dk, dv;

    template <typename S>
    explicit Pipeline(const DistData<S>& d)
        : p(d.p)
        , q(d.q.begin(), d.q.end())
        , k(d.k.begin(), d.k.end())
        , v(d.v.begin(), d.v.end())
        , d_o(d.d_o.begin(), d.d_o.end())
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

    /// The pass through the reference kernels (reference) or the tiling's kernels.
    void run(Pass pass, const sparse::Support* s, const Tiling& t, const MemoryModel& m) {
        NullCounter c;
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
