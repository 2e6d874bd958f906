// The error check of the ioattn program: reference in double, naive softmax attention in the
// working type (a check oracle, not a kernel), and the error-ratio tolerance.

#include "check.hpp"

#include <ioattn/dense.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace ioattn::app {

namespace {

std::size_t sz(std::int64_t n) {
    return static_cast<std::size_t>(n);
}

/// Max |x - y| where equal infinities count as 0 and NaN propagates.
template <typename Scalar>
double abs_diff(Scalar x, double y) {
    const auto xd = static_cast<double>(x);
    if (std::isinf(xd) && std::isinf(y) && (xd > 0) == (y > 0))
        return 0.0;
    if (std::isnan(xd) || std::isnan(y))
        return std::numeric_limits<double>::quiet_NaN();
    return std::fabs(xd - y);
}

/// The obvious algorithm in Scalar: per row, scores, max, exp, sum, weighted sum of V rows.
template <typename Scalar>
void naive_forward(measure::ForwardData<Scalar>& out, int threads) {
    const Problem& p = out.problem;
    const std::int64_t rows = p.batch_heads() * p.n_q;
    with_threads(threads, [&] {
        std::vector<std::vector<Scalar>> scores(sz(max_concurrency()),
                                                std::vector<Scalar>(sz(p.n_k)));
        parallel_for_tiles(rows, [&](std::int64_t t, int w) {
            std::vector<Scalar>& s = scores[sz(w)];
            const std::int64_t slice = t / p.n_q;
            const std::int64_t i = t % p.n_q;
            const std::int64_t kv = (slice / p.heads) * p.kv_heads + (slice % p.heads) / p.group();
            const Scalar* q = out.q.data() + t * p.d;
            Scalar* o = out.o.data() + t * p.d_v;
            const std::int64_t vis = p.visible_keys(i);
            const auto scale = static_cast<Scalar>(p.scale);
            Scalar mx = -std::numeric_limits<Scalar>::infinity();
            for (std::int64_t j = 0; j < vis; ++j) {
                const Scalar* k = out.k.data() + (kv * p.n_k + j) * p.d;
                Scalar acc = 0;
                for (std::int64_t c = 0; c < p.d; ++c)
                    acc += q[c] * k[c];
                s[sz(j)] = scale * acc;
                mx = std::max(mx, s[sz(j)]);
            }
            Scalar l = 0;
            for (std::int64_t j = 0; j < vis; ++j) {
                s[sz(j)] = std::exp(s[sz(j)] - mx);
                l += s[sz(j)];
            }
            for (std::int64_t c = 0; c < p.d_v; ++c)
                o[c] = 0;
            for (std::int64_t j = 0; j < vis; ++j) {
                const Scalar* v = out.v.data() + (kv * p.n_k + j) * p.d_v;
                for (std::int64_t c = 0; c < p.d_v; ++c)
                    o[c] += s[sz(j)] * v[c];
            }
            for (std::int64_t c = 0; c < p.d_v && vis > 0; ++c)
                o[c] /= l;
            out.lse[sz(t)] = vis > 0 ? mx + std::log(l) : -std::numeric_limits<Scalar>::infinity();
        });
    });
}

} // namespace

template <typename Scalar>
Reference reference_of(const measure::ForwardData<Scalar>& data, int threads) {
    const Problem& p = data.problem;
    const std::vector<double> q(data.q.begin(), data.q.end());
    const std::vector<double> k(data.k.begin(), data.k.end());
    const std::vector<double> v(data.v.begin(), data.v.end());
    Reference ref;
    ref.o.assign(data.o.size(), 0.0);
    ref.lse.assign(data.lse.size(), 0.0);
    const ForwardArgs<double> args{
        p,
        TensorView<const double>::packed(q.data(), p.batch, p.heads, p.n_q, p.d),
        TensorView<const double>::packed(k.data(), p.batch, p.kv_heads, p.n_k, p.d),
        TensorView<const double>::packed(v.data(), p.batch, p.kv_heads, p.n_k, p.d_v),
        TensorView<double>::packed(ref.o.data(), p.batch, p.heads, p.n_q, p.d_v),
        TensorView<double>::packed(ref.lse.data(), p.batch, p.heads, p.n_q, 1)};
    with_threads(threads, [&] { dense::forward_reference(args); });
    return ref;
}

template <typename Scalar>
double
max_abs_error(const std::vector<Scalar>& o, const std::vector<Scalar>& lse, const Reference& ref) {
    double err = 0;
    const auto acc = [&err](double e) {
        if (std::isnan(e) || e > err)
            err = std::isnan(err) ? err : e;
    };
    for (std::size_t i = 0; i < o.size(); ++i)
        acc(abs_diff(o[i], ref.o[i]));
    for (std::size_t i = 0; i < lse.size(); ++i)
        acc(abs_diff(lse[i], ref.lse[i]));
    return err;
}

template <typename Scalar>
CheckResult
check_forward(const measure::ForwardData<Scalar>& data, const Reference& ref, int threads) {
    measure::ForwardData<Scalar> naive = data;
    naive_forward(naive, threads);
    CheckResult r;
    r.max_abs_error = max_abs_error(data.o, data.lse, ref);
    r.naive_error = max_abs_error(naive.o, naive.lse, ref);
    double scale = 1.0;
    for (double x : ref.o)
        scale = std::max(scale, std::fabs(x));
    r.tiny = 8.0 * static_cast<double>(std::numeric_limits<Scalar>::epsilon()) * scale;
    if constexpr (std::is_same_v<Scalar, double>) {
        // The naive double computation is as exact as the double reference (its error is ~0),
        // so allow the rounding growth of a sum over n_k keys and a dot product over d.
        const Problem& p = data.problem;
        r.tiny *= std::sqrt(static_cast<double>(p.n_k + p.d));
    }
    r.error_ratio = r.max_abs_error / std::max(r.naive_error, r.tiny);
    r.passed = r.max_abs_error <= 2.0 * r.naive_error + r.tiny; // false for NaN
    return r;
}

template Reference reference_of(const measure::ForwardData<float>&, int);
template Reference reference_of(const measure::ForwardData<double>&, int);
template CheckResult check_forward(const measure::ForwardData<float>&, const Reference&, int);
template CheckResult check_forward(const measure::ForwardData<double>&, const Reference&, int);
template double
max_abs_error(const std::vector<float>&, const std::vector<float>&, const Reference&);
template double
max_abs_error(const std::vector<double>&, const std::vector<double>&, const Reference&);

} // namespace ioattn::app
