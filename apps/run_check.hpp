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
#include <vector>

#include <measure.hpp>

namespace ioattn::app {

/// Owned operands of a forward and backward pass in type T.
template <typename T>
struct Data {
    Problem p;
    std::vector<T> q, k, v, o, lse, d_o, d_q, d_k, d_v;

    Data(const Problem& problem, std::uint64_t seed)
        : p(problem) {
        const measure::ForwardData<T> f(problem, seed);
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
                                       d_q.data(),
                                       d_k.data(),
                                       d_v.data());
    }
};

/// --check of the outputs held in `data` (O and L; with `grads`, dQ, dK, dV) against the double
/// reference over `support` (null: the dense or causal problem), relative to the naive
/// computation in Scalar, which writes every output of its own: {max_abs_error, naive_error,
/// tiny, error_ratio, passed}.
template <typename Scalar>
nlohmann::json check_json(const Data<Scalar>& data, const sparse::Support* support, bool grads);

extern template nlohmann::json check_json(const Data<float>&, const sparse::Support*, bool);
extern template nlohmann::json check_json(const Data<double>&, const sparse::Support*, bool);

} // namespace ioattn::app
