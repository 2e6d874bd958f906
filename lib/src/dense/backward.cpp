// ioattn::dense::backward: routes by tiling.schedule to the backward kernels, and the dry run that
// walks a schedule without data. bf16 views run the native bf16 fused kernel where
// bf16_kernels_native() (dense/kernels_bf16.hpp), otherwise the float kernels on fp32 copies
// (ioattn/widen.hpp). No algorithm lives here.

#include "dense/kernels_bf16.hpp"

#include <ioattn/dense/backward.hpp>
#include <ioattn/error.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/kernels/dispatch.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/widen.hpp>

#include <type_traits>

namespace ioattn::dense {

template <typename Scalar, typename Counter>
void backward(const BackwardArgs<Scalar>& args,
              const Tiling& tiling,
              const MemoryModel& memory,
              Counter& counter) {
    if constexpr (std::is_same_v<Scalar, bf16>) {
#if defined(IOATTN_BUILT_AVX512BF16)
        // the native kernel: its own dry run counts, its timed run computes
        if (tiling.schedule == Schedule::fused && bf16_kernels_native()) {
            kernels::counted(counter, [&](auto& c) {
                isa_avx512bf16::backward_fused_bf16(args, tiling, memory, c);
            });
            return;
        }
#endif
        // a dry run walks shapes only: its views may hold no data
        const WidenedBackward w(args, "ioattn::dense::backward", !Counter::kComputes);
        backward(w.args(), tiling, memory, counter);
        w.narrow();
    } else {
        switch (tiling.schedule) {
        case Schedule::reference:
            if constexpr (Counter::kComputes) {
                backward_reference(args);
                return;
            } else {
                throw InvalidArgument(
                    "ioattn::dense::backward: the reference schedule has no dry run");
            }
        case Schedule::fused:
            backward_fused(args, tiling, memory, counter);
            return;
        case Schedule::materialized:
            backward_materialized(args, tiling, memory, counter);
            return;
        }
    }
}

template <typename Scalar>
Tiling backward(const BackwardArgs<Scalar>& args, Schedule schedule, const MemoryModel& memory) {
    const Tiling tiling = schedule == Schedule::reference
                              ? Tiling{Schedule::reference, 1, 1}
                              : Tiling::tuned(schedule, memory, args.problem, Pass::backward);
    NullCounter counter;
    backward(args, tiling, memory, counter);
    return tiling;
}

IoReport dry_run_backward(const Problem& problem, const Tiling& tiling, const MemoryModel& memory) {
    const Problem p = problem.resolved("ioattn::dense::dry_run_backward");
    const auto a = BackwardArgs<float>::shape_only(p);
    DryRunCounter counter(memory.fast_words);
    backward(a, tiling, memory, counter);
    return counter.report();
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void backward<Scalar, Counter>(                                                       \
        const BackwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);
IOATTN_FOR_EACH_SCALAR_COUNTER(IOATTN_INSTANTIATE)
IOATTN_INSTANTIATE(bf16, NullCounter)
IOATTN_INSTANTIATE(bf16, IoCounter)
IOATTN_INSTANTIATE(bf16, DryRunCounter)
#undef IOATTN_INSTANTIATE

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template Tiling backward<Scalar>(const BackwardArgs<Scalar>&, Schedule, const MemoryModel&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
IOATTN_INSTANTIATE(bf16)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::dense
