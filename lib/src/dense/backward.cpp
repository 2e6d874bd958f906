// ioattn::dense::backward: the dispatcher over the backward schedules, and the dry run that walks
// a schedule without data. No algorithm lives here.

#include <ioattn/dense/backward.hpp>
#include <ioattn/error.hpp>

namespace ioattn::dense {

template <typename Scalar, typename Counter>
void backward(const BackwardArgs<Scalar>& args,
              const Tiling& tiling,
              const MemoryModel& memory,
              Counter& counter) {
    switch (tiling.schedule) {
    case Schedule::reference:
        if constexpr (Counter::kComputes) {
            backward_reference(args);
            return;
        } else {
            throw InvalidArgument("ioattn::dense::backward: the reference schedule has no dry run");
        }
    case Schedule::fused:
        backward_fused(args, tiling, memory, counter);
        return;
    case Schedule::materialized:
        backward_materialized(args, tiling, memory, counter);
        return;
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
    using In = TensorView<const float>;
    using Out = TensorView<float>;
    BackwardArgs<float> a;
    a.problem = p;
    a.q = In::packed(nullptr, p.batch, p.heads, p.n_q, p.d);
    a.k = In::packed(nullptr, p.batch, p.kv_heads, p.n_k, p.d);
    a.v = In::packed(nullptr, p.batch, p.kv_heads, p.n_k, p.d_v);
    a.o = Out::packed(nullptr, p.batch, p.heads, p.n_q, p.d_v);
    a.lse = Out::packed(nullptr, p.batch, p.heads, p.n_q, 1);
    a.d_o = In::packed(nullptr, p.batch, p.heads, p.n_q, p.d_v);
    a.d_q = Out::packed(nullptr, p.batch, p.heads, p.n_q, p.d);
    a.d_k = Out::packed(nullptr, p.batch, p.kv_heads, p.n_k, p.d);
    a.d_v = Out::packed(nullptr, p.batch, p.kv_heads, p.n_k, p.d_v);
    DryRunCounter counter(memory.fast_words);
    backward(a, tiling, memory, counter);
    return counter.report();
}

#define IOATTN_INSTANTIATE(Scalar, Counter)                                                        \
    template void backward<Scalar, Counter>(                                                       \
        const BackwardArgs<Scalar>&, const Tiling&, const MemoryModel&, Counter&);
IOATTN_INSTANTIATE(float, NullCounter)
IOATTN_INSTANTIATE(float, IoCounter)
IOATTN_INSTANTIATE(float, DryRunCounter)
IOATTN_INSTANTIATE(double, NullCounter)
IOATTN_INSTANTIATE(double, IoCounter)
IOATTN_INSTANTIATE(double, DryRunCounter)
#undef IOATTN_INSTANTIATE

template Tiling backward<float>(const BackwardArgs<float>&, Schedule, const MemoryModel&);
template Tiling backward<double>(const BackwardArgs<double>&, Schedule, const MemoryModel&);

} // namespace ioattn::dense
