#pragma once
/// Building block of the library's dispatchers: the call of a kernel's copy for the ISA target
/// that runs it (ioattn/isa.hpp), and the declarations of every built target's copies.
///
/// The set of targets comes from the build (IOATTN_BUILT_AVX512, IOATTN_BUILT_AVX2, or
/// IOATTN_SINGLE_ISA for an IOATTN_NATIVE build, whose one target is the compiler's); the
/// baseline target (isa_sse2) is always built.
///
/// A library declares its kernels once, in a private header without include guard whose
/// declarations sit in `namespace <library>::IOATTN_TARGET_NS`; a dispatcher defines
/// IOATTN_TARGET_DECLARATIONS as that header's name and includes
/// <ioattn/kernels/declare_targets.inc>, which declares them for every built target.

#include <ioattn/io_counter.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/kernels/target.hpp>

#include <type_traits>

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
/// `return <target>::call` for the target that runs a kernel with `Counter`: here the one
/// target.
#define IOATTN_DISPATCH(Counter, ...) return IOATTN_ISA::__VA_ARGS__
#else
/// `return <target>::call` for the target that runs a kernel with `Counter`: the active one
/// for the timed run (NullCounter), the baseline for the dry run (DryRunCounter), which only
/// the baseline compiles (kernels/instantiate.hpp). IoCounter goes through kernels::counted.
#define IOATTN_DISPATCH(Counter, ...)                                                              \
    if constexpr (!Counter::kComputes)                                                             \
        return isa_sse2::__VA_ARGS__;                                                              \
    else                                                                                           \
        switch (::ioattn::active_isa()) {                                                          \
            IOATTN_IF_BUILT_AVX512(case ::ioattn::Isa::avx512 : return isa_avx512::__VA_ARGS__;)   \
            IOATTN_IF_BUILT_AVX2(case ::ioattn::Isa::avx2 : return isa_avx2::__VA_ARGS__;)         \
        default:                                                                                   \
            return isa_sse2::__VA_ARGS__;                                                          \
        }
#endif

/// `return <target>::call` for the active target, for code without a counter (the FMA peak,
/// tests of the building blocks).
#if defined(IOATTN_SINGLE_ISA)
#define IOATTN_DISPATCH_ACTIVE(...) return IOATTN_ISA::__VA_ARGS__
#else
#define IOATTN_DISPATCH_ACTIVE(...) IOATTN_DISPATCH(::ioattn::NullCounter, __VA_ARGS__)
#endif

namespace ioattn::kernels {

/// Runs `run(c)` with the counters a kernel is compiled for (kernels/instantiate.hpp): with
/// `counter` itself for NullCounter and DryRunCounter; for IoCounter, a dry run into a counter
/// with the same M and recording mode (it counts, and throws CapacityError before anything is
/// written), then the timed run, then the dry run's counts and trace added to `counter`. The
/// counts are the schedule's; the results are bit for bit those of an uncounted call.
template <typename Counter, typename Run>
void counted(Counter& counter, Run&& run) {
    if constexpr (std::is_same_v<Counter, IoCounter>) {
        DryRunCounter dry(counter.fast_words(), counter.recording());
        run(dry);
        NullCounter timed;
        run(timed);
        counter.merge(dry);
    } else {
        run(counter);
    }
}

} // namespace ioattn::kernels

#if defined(IOATTN_SINGLE_ISA)
/// X(namespace) for each built target.
#define IOATTN_FOR_EACH_BUILT_ISA(X) X(IOATTN_ISA)
#else
#define IOATTN_FOR_EACH_BUILT_ISA(X)                                                               \
    IOATTN_IF_BUILT_AVX512(X(isa_avx512)) IOATTN_IF_BUILT_AVX2(X(isa_avx2)) X(isa_sse2)
#endif
