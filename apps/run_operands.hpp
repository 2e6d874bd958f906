#pragma once
// The support and sparse operands of `ioattn run --pattern SPEC --input-density P`, shared by
// the float and double runs (run_variants.cpp) and the bf16 run (run_bf16.cpp).

#include "commands.hpp"
#include "run_check.hpp"
#include "run_variants.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/sparse/pattern.hpp>
#include <ioattn/sparse/sparse_rows.hpp>

#include <optional>
#include <random>
#include <string>

namespace ioattn::app {

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
            throw UsageError(std::string("run") +
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

} // namespace ioattn::app
