#pragma once
// What the native bf16 kernel tests share: whether the native kernel runs in this process, a
// scope that forces the widening path, and the shape of their cases.

#include "scoped_env.hpp"

#include <ioattn/isa.hpp>
#include <ioattn/problem.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>

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

} // namespace ioattn::test
