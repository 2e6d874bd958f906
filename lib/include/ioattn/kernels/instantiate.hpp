#pragma once
/// The one list of what the library's templates are compiled for: the scalar types, and the
/// counters each instruction-set (ISA) target compiles.
///
/// Every kernel is `template <typename Scalar, typename Counter>`. A kernel file is compiled
/// once per ISA target (lib/cmake/ioattn_isa.cmake) and ends with
///
///     #define IOATTN_INSTANTIATE(Scalar, Counter) template void kernel<Scalar, Counter>(...);
///     IOATTN_FOR_EACH_KERNEL_TYPE(IOATTN_INSTANTIATE)
///     #undef IOATTN_INSTANTIATE
///
/// Code compiled once (entry points, dispatchers, the runners of sparse variants) uses
/// IOATTN_FOR_EACH_SCALAR_COUNTER or IOATTN_FOR_EACH_SCALAR the same way. A new scalar type
/// is one entry of IOATTN_SCALAR_LIST.
///
/// A kernel is compiled for two counters. The timed run (NullCounter) is compiled for every ISA
/// target. The dry run (DryRunCounter: the same loops, every count, no arithmetic) is compiled
/// for the baseline target only: the words a schedule moves do not depend on the instruction
/// set (operands are padded to kLanePad = 16 words under every target, tiling.hpp) nor on the
/// data. A counted run (IoCounter) is the two in turn (kernels::counted, kernels/dispatch.hpp):
/// the dry run counts, and throws CapacityError before anything is written; the timed run
/// computes the results, bit for bit those of an uncounted call.

#include <ioattn/io_counter.hpp>
#include <ioattn/kernels/target.hpp>

/// X(Scalar, ARGS...) for every scalar type the kernels take.
#define IOATTN_SCALAR_LIST(X, ...) X(float, __VA_ARGS__) X(double, __VA_ARGS__)

/// X(Scalar) for every scalar type.
#define IOATTN_FOR_EACH_SCALAR(X) IOATTN_SCALAR_LIST(IOATTN_FIRST_OF, X)
#define IOATTN_FIRST_OF(Scalar, X) X(Scalar)

/// X(Scalar, Counter) for every scalar type and counter.
#define IOATTN_FOR_EACH_SCALAR_COUNTER(X)                                                          \
    IOATTN_SCALAR_LIST(X, NullCounter)                                                             \
    IOATTN_SCALAR_LIST(X, IoCounter) IOATTN_SCALAR_LIST(X, DryRunCounter)

/// X(Scalar, Counter) for the kernels this translation unit's ISA target compiles: the timed
/// run in every target, the dry run in the baseline (and in a single-target IOATTN_NATIVE
/// build).
#if IOATTN_ISA_LEVEL == 1 || defined(IOATTN_SINGLE_ISA)
#define IOATTN_FOR_EACH_KERNEL_TYPE(X)                                                             \
    IOATTN_SCALAR_LIST(X, NullCounter) IOATTN_SCALAR_LIST(X, DryRunCounter)
#else
#define IOATTN_FOR_EACH_KERNEL_TYPE(X) IOATTN_SCALAR_LIST(X, NullCounter)
#endif
