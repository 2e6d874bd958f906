#pragma once
/// Building block of the library's own dispatch translation units (lib/src/dense/dispatch.cpp,
/// sparse/src/dispatch.cpp): declarations per built instruction-set variant and the switch that
/// calls the active one (ioattn/isa.hpp). The set of variants comes from the build
/// (IOATTN_BUILT_AVX512, IOATTN_BUILT_AVX2, or IOATTN_SINGLE_ISA for an IOATTN_NATIVE build,
/// whose one variant is the compiler's target); the baseline variant is always built.

#include <ioattn/isa.hpp>
#include <ioattn/kernels/target.hpp>

#if defined(IOATTN_BUILT_AVX512)
#define IOATTN_IF_BUILT_AVX512(...) __VA_ARGS__
#else
#define IOATTN_IF_BUILT_AVX512(...)
#endif
#if defined(IOATTN_BUILT_AVX2)
#define IOATTN_IF_BUILT_AVX2(...) __VA_ARGS__
#else
#define IOATTN_IF_BUILT_AVX2(...)
#endif

#if defined(IOATTN_SINGLE_ISA)
/// X(namespace) for each built variant.
#define IOATTN_FOR_EACH_BUILT_ISA(X) X(IOATTN_ISA)
/// `return <variant>::call` for the active variant.
#define IOATTN_DISPATCH(...) return IOATTN_ISA::__VA_ARGS__
#else
#define IOATTN_FOR_EACH_BUILT_ISA(X)                                                               \
    IOATTN_IF_BUILT_AVX512(X(isa_avx512)) IOATTN_IF_BUILT_AVX2(X(isa_avx2)) X(isa_sse2)
#define IOATTN_DISPATCH(...)                                                                       \
    switch (::ioattn::active_isa()) {                                                              \
        IOATTN_IF_BUILT_AVX512(case ::ioattn::Isa::avx512 : return isa_avx512::__VA_ARGS__;)       \
        IOATTN_IF_BUILT_AVX2(case ::ioattn::Isa::avx2 : return isa_avx2::__VA_ARGS__;)             \
    default:                                                                                       \
        return isa_sse2::__VA_ARGS__;                                                              \
    }
#endif
