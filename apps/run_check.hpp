#pragma once
// The operands of `ioattn run --pass backward` and `--pattern SPEC` (Data), and their --check:
// the outputs against the double reference, relative to a naive computation in the working
// type over the same allowed pairs: passed iff err(kernel) <= 2 err(naive) + tiny.

#include <ioattn/problem.hpp>
#include <ioattn/sparse/support.hpp>
#include <ioattn/view.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include <measure.hpp>

namespace ioattn::app {

/// Owned operands and outputs of a run in type T (measure::OwnedArgs).
template <typename T>
using Data = measure::OwnedArgs<T>;

/// The operands of a run: Q, K, V from `seed` (measure::ForwardData), O and L zero, dO uniform
/// in [-1, 1) from seed + 7, the gradients zero.
template <typename T>
Data<T> seeded_data(const Problem& problem, std::uint64_t seed) {
    measure::ForwardData<T> f(problem, seed);
    Data<T> x;
    x.p = f.problem;
    x.q = std::move(f.q);
    x.k = std::move(f.k);
    x.v = std::move(f.v);
    x.o = std::move(f.o);
    x.lse = std::move(f.lse);
    std::mt19937_64 rng(seed + 7); // the upstream gradient dO
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    x.d_o.resize(x.o.size());
    for (T& e : x.d_o)
        e = static_cast<T>(u(rng));
    x.d_q.assign(x.q.size(), T(0));
    x.d_k.assign(x.k.size(), T(0));
    x.d_v.assign(x.v.size(), T(0));
    return x;
}

/// `x` with every value converted to T (exact from float to double).
template <typename T, typename U>
Data<T> converted(const Data<U>& x) {
    const auto cv = [](const std::vector<U>& a) { return std::vector<T>(a.begin(), a.end()); };
    return {x.p,
            cv(x.q),
            cv(x.k),
            cv(x.v),
            cv(x.o),
            cv(x.d_o),
            cv(x.d_q),
            cv(x.d_k),
            cv(x.d_v),
            cv(x.lse)};
}

/// --check of the outputs held in `data` (O and L; with `grads`, dQ, dK, dV) against the double
/// reference over `support` (null: the dense or causal problem), relative to the naive
/// computation in Scalar, which writes every output of its own: {max_abs_error, naive_error,
/// tiny, error_ratio, passed}.
template <typename Scalar>
nlohmann::json check_json(const Data<Scalar>& data, const sparse::Support* support, bool grads);

extern template nlohmann::json check_json(const Data<float>&, const sparse::Support*, bool);
extern template nlohmann::json check_json(const Data<double>&, const sparse::Support*, bool);

} // namespace ioattn::app
