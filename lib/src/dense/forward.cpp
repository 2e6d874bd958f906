// ioattn::dense::forward: routes by tiling.schedule to the forward kernels, and the dry run that
// walks a schedule without data. bf16 views run the native bf16 fused kernel where
// bf16_kernels_native() (dense/kernels_bf16.hpp), otherwise the float kernels on fp32 copies
// (ioattn/widen.hpp). No algorithm lives here.

#include "dense/kernels_bf16.hpp"

#include <ioattn/dense/forward.hpp>
#include <ioattn/error.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/kernels/dispatch.hpp>
#include <ioattn/kernels/instantiate.hpp>
#include <ioattn/widen.hpp>

#include <string>
#include <type_traits>

namespace ioattn::dense {

template <typename Scalar, typename Counter>
void forward(const ForwardArgs<Scalar>& args,
             const Tiling& tiling,
             const MemoryModel& memory,
             Counter& counter) {
    if constexpr (std::is_same_v<Scalar, bf16>) {
#if defined(IOATTN_BUILT_AVX512BF16)
        // the native kernel: its own dry run counts, its timed run computes
        if (tiling.schedule == Schedule::fused && bf16_kernels_native()) {
            kernels::counted(counter, [&](auto& c) {
                isa_avx512bf16::forward_fused_bf16(args, tiling, memory, c);
            });
            return;
        }
#endif
        // a dry run walks shapes only: its views may hold no data
        const WidenedForward w(args, "ioattn::dense::forward", !Counter::kComputes);
        forward(w.args(), tiling, memory, counter);
        w.narrow();
    } else {
        switch (tiling.schedule) {
        case Schedule::reference:
            if constexpr (Counter::kComputes) {
                forward_reference(args);
                return;
            } else {
                throw InvalidArgument(
                    "ioattn::dense::forward: the reference schedule has no dry run");
            }
        case Schedule::fused:
            forward_fused(args, tiling, memory, counter);
            return;
        case Schedule::materialized:
            forward_materialized(args, tiling, memory, counter);
            return;
        }
    }
}

template <typename Scalar>
Tiling forward(const ForwardArgs<Scalar>& args, Schedule schedule, const MemoryModel& memory) {
    const Tiling tiling = schedule == Schedule::reference
                              ? Tiling{Schedule::reference, 1, 1}
                              : Tiling::tuned(schedule, memory, args.problem);
    NullCounter counter;
    forward(args, tiling, memory, counter);
    return tiling;
}

IoReport dry_run_forward(const Problem& problem, const Tiling& tiling, const MemoryModel& memory) {
    const Problem p = problem.resolved("ioattn::dense::dry_run_forward");
    const auto a = ForwardArgs<float>::shape_only(p);
    DryRunCounter counter(memory.fast_words);
    forward(a, tiling, memory, counter);
    return counter.report();
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void forward<Scalar, Counter>(                                                        \
        const ForwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);
IOATTN_FOR_EACH_SCALAR_COUNTER(IOATTN_INSTANTIATE)
IOATTN_INSTANTIATE(bf16, NullCounter)
IOATTN_INSTANTIATE(bf16, IoCounter)
IOATTN_INSTANTIATE(bf16, DryRunCounter)
#undef IOATTN_INSTANTIATE

#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template Tiling forward<Scalar>(const ForwardArgs<Scalar>&, Schedule, const MemoryModel&);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
IOATTN_INSTANTIATE(bf16)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::dense
