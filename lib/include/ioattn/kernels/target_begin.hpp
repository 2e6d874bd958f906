// Opens the `#pragma GCC target` region of an ISA target: everything after this include in the
// translation unit is compiled for IOATTN_TARGET_AVX512, IOATTN_TARGET_AVX512BF16 (the avx512
// target plus AVX512_BF16, for the native bf16 kernels) or IOATTN_TARGET_AVX2 (nothing changes
// for the baseline target or an IOATTN_NATIVE build). Include it once, after every header whose
// code is not in `inline namespace IOATTN_ISA` (the standard library, oneTBB, the non-kernel
// ioattn headers) and before the kernel headers: templates and inline functions keep the target
// of the place where they are defined, so only the kernels' own code takes the target's
// instructions (see kernels/target.hpp). The `isa:baseline` test checks the linked program for
// vector instructions outside the targets' namespaces. GCC only: other compilers build the
// baseline target alone (lib/cmake/ioattn_isa.cmake).
// No include guard: one inclusion per target translation unit.

// What the kernel headers use, defined before the region so it stays baseline code.
#include <ioattn/error.hpp>
#include <ioattn/io_counter.hpp>
#include <ioattn/kernels/workspace.hpp>
#include <ioattn/parallel.hpp>
#include <ioattn/view.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#define IOATTN_TARGET_REGION 1

#if defined(IOATTN_TARGET_AVX512BF16)
#pragma GCC target(                                                                                \
    "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,bmi,bmi2,f16c,lzcnt,popcnt")
#elif defined(IOATTN_TARGET_AVX512)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi,bmi2,f16c,lzcnt,popcnt")
#elif defined(IOATTN_TARGET_AVX2)
#pragma GCC target("avx2,fma,bmi,bmi2,f16c,lzcnt,popcnt")
#endif

#include <ioattn/kernels/target.hpp>
// The instantiation lists of this target (IOATTN_FOR_EACH_KERNEL_TYPE).
#include <ioattn/kernels/instantiate.hpp>
