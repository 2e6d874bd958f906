#pragma once
/// The instruction set this translation unit's kernels are compiled for, and the inline
/// namespace that keeps each instruction set's definitions apart.
///
/// The library compiles every kernel file once per instruction set (AVX-512, AVX2+FMA and the
/// SSE2 baseline) and picks one at run time (ioattn/isa.hpp). A target's objects are built with
/// IOATTN_TARGET_AVX512 or IOATTN_TARGET_AVX2 defined and open a target region
/// (kernels/target_begin.hpp) before the first kernel header; without those macros (the baseline
/// target, code outside the kernels, an IOATTN_NATIVE build, an installed consumer) the level
/// follows the compiler's own target macros. GCC does not update __AVX512F__ and friends inside
/// a `#pragma GCC target` region of a C++ file, so the kernels test IOATTN_ISA_LEVEL, never the
/// compiler's macros.
///
/// Any header whose inline code is compiled inside a target region lives in
/// `inline namespace IOATTN_ISA`: otherwise an AVX-512 copy of an inline function could be the
/// one the linker keeps for the baseline callers too (an illegal instruction on older CPUs).

#if defined(IOATTN_TARGET_AVX512) + defined(IOATTN_TARGET_AVX512BF16) +                            \
        defined(IOATTN_TARGET_AVX2) + defined(IOATTN_TARGET_SSE2) >                                \
    1
#error "ioattn: at most one IOATTN_TARGET_* macro per translation unit"
#endif

#if defined(IOATTN_TARGET_AVX512) || defined(IOATTN_TARGET_AVX512BF16)
#define IOATTN_ISA_LEVEL 3
#elif defined(IOATTN_TARGET_AVX2)
#define IOATTN_ISA_LEVEL 2
#elif defined(IOATTN_TARGET_SSE2)
#define IOATTN_ISA_LEVEL 1
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) &&                    \
    defined(__AVX512DQ__)
#define IOATTN_ISA_LEVEL 3
#elif defined(__AVX2__) && defined(__FMA__)
#define IOATTN_ISA_LEVEL 2
#else
#define IOATTN_ISA_LEVEL 1
#endif

#if (defined(IOATTN_TARGET_AVX512) || defined(IOATTN_TARGET_AVX512BF16) ||                         \
     defined(IOATTN_TARGET_AVX2)) &&                                                               \
    !defined(IOATTN_TARGET_REGION)
#error "ioattn: include <ioattn/kernels/target_begin.hpp> before the kernel headers"
#endif

// The avx512 target with AVX512_BF16 (the native bf16 kernels) keeps its inline code in a
// namespace of its own: its copies of the shared kernel headers may use those instructions.
#if defined(IOATTN_TARGET_AVX512BF16)
#define IOATTN_ISA isa_avx512bf16
#define IOATTN_ISA_NAME "avx512bf16"
#elif IOATTN_ISA_LEVEL == 3
#define IOATTN_ISA isa_avx512
#define IOATTN_ISA_NAME "avx512"
#elif IOATTN_ISA_LEVEL == 2
#define IOATTN_ISA isa_avx2
#define IOATTN_ISA_NAME "avx2"
#else
#define IOATTN_ISA isa_sse2
#define IOATTN_ISA_NAME "sse2"
#endif
