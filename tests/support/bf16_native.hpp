#pragma once
// What the native bf16 kernel tests share: whether the native kernel runs in this process, a
// scope that forces the widening path, the shape of their cases, their seeded forward operands
// and the exact double values of bf16 data.

#include "scoped_env.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/problem.hpp>
#include <ioattn/view.hpp>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace ioattn::test {

/// The native kernel runs unless this process forces an ISA target (IOATTN_ISA set) or the
/// library or CPU lacks it.
inline bool native_expected() {
#if defined(IOATTN_BUILT_AVX512BF16)
    const char* env = std::getenv("IOATTN_ISA");
    return cpu_supports_avx512_bf16() && (env == nullptr || *env == '\0');
#else
    return false;
#endif
}

/// IOATTN_ISA naming the active target: the widening path for bf16 in this scope.
inline ScopedEnv force_widening() {
    return {"IOATTN_ISA", std::string(to_string(active_isa()))};
}

/// B = 2 and the given sizes.
inline Problem bf16_shape(std::int64_t n_q,
                          std::int64_t n_k,
                          std::int64_t d,
                          std::int64_t d_v,
                          bool causal,
                          std::int64_t heads = 2,
                          std::int64_t kv_heads = 1) {
    Problem p;
    p.batch = 2;
    p.heads = heads;
    p.kv_heads = kv_heads;
    p.n_q = n_q;
    p.n_k = n_k;
    p.d = d;
    p.d_v = d_v;
    p.causal = causal;
    return p;
}

/// bf16 inputs (2 randn from `seed`, rounded) of one forward problem, and its outputs (O zero,
/// L zero until a run writes them).
struct ForwardRun {
    Problem p;
    std::vector<bf16> q, k, v, o;
    std::vector<float> lse;

    ForwardRun(const Problem& problem, std::uint64_t seed)
        : p(problem.resolved("test")) {
        std::mt19937_64 rng(seed);
        std::normal_distribution<float> randn(0.0F, 1.0F);
        const auto draw = [&](std::vector<bf16>& x, std::int64_t n) {
            x.resize(static_cast<std::size_t>(n));
            for (bf16& e : x)
                e = bf16(2.0F * randn(rng));
        };
        draw(q, p.batch * p.heads * p.n_q * p.d);
        draw(k, p.batch * p.kv_heads * p.n_k * p.d);
        draw(v, p.batch * p.kv_heads * p.n_k * p.d_v);
        o.assign(static_cast<std::size_t>(p.batch * p.heads * p.n_q * p.d_v), bf16(0.0F));
        lse.assign(static_cast<std::size_t>(p.batch * p.heads * p.n_q), 0.0F);
    }

    ForwardArgs<bf16> args() {
        return ForwardArgs<bf16>::packed(p, q.data(), k.data(), v.data(), o.data(), lse.data());
    }
};

/// The exact double values of bf16 data.
inline std::vector<double> widened(const std::vector<bf16>& x) {
    std::vector<double> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
        out[i] = static_cast<double>(static_cast<float>(x[i]));
    return out;
}

} // namespace ioattn::test
