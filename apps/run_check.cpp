// The --check of `ioattn run --pass backward` and `--pattern SPEC` (run_check.hpp).

#include "run_check.hpp"

#include <ioattn/dense.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace ioattn::app {

namespace {

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
            // every output of the row is written here: none may come from the kernel's run
            // (the naive copy starts as the kernel's outputs, so a row left alone would match)
            x.lse[static_cast<std::size_t>(qi)] =
                l == T(0) ? -std::numeric_limits<T>::infinity() : m + std::log(l);
            if (l == T(0)) { // no allowed key: O = 0 (softmax over nothing), L = -inf
                std::fill_n(
                    x.o.begin() + static_cast<std::ptrdiff_t>(at(qi, p.d_v, 0)), p.d_v, T(0));
                continue;
            }
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
nlohmann::json check_json(const Data<Scalar>& data, const sparse::Support* support, bool grads) {
    const Problem& p = data.p;
    Data<double> ref = converted<double>(data);
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
    Data<Scalar> nv = data;
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

template nlohmann::json check_json(const Data<float>&, const sparse::Support*, bool);
template nlohmann::json check_json(const Data<double>&, const sparse::Support*, bool);

} // namespace ioattn::app
