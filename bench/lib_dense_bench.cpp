// ioattn_bench_dense: the dense forward kernels over N, d, M and threads, with the peers of
// docs/performance.md section 1 in the same binary: OpenBLAS SGEMM 2048^3 (the roofline) and naive
// attention on OpenBLAS. Counters: `flops` (a rate, FlashAttention convention), `io_words` (one
// untimed IoCounter pass of the same tiling) and `io_cost` (the closed form). No correctness
// checks. JSON: --benchmark_format=json; its context names the kernels' instruction set (`isa`) and
// the OpenBLAS core the peers ran (`blas_core`; OpenBLAS 0.3.21 runs its SSE3 kernels on CPUs it
// does not know: set OPENBLAS_CORETYPE, as `ioattn bench` does).
//
// Args of the kernel families: N, d, threads, M (0: per-core L2 with the tuned tiling; else M
// words with the I/O-optimal for_memory tiling). B = 1, H = 8, fp32. Each family times the
// library's entry point (ioattn::attention with the family's schedule), planned once outside
// the loop, as a user's loop calls it (timed_call.hpp).

#include "measure.hpp"
#include "timed_call.hpp"

#include <ioattn/attention.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/isa.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

namespace {

using ioattn::measure::ForwardData;

ioattn::Problem problem_of(const benchmark::State& state) {
    ioattn::Problem p;
    p.batch = 1;
    p.heads = 8;
    p.n_q = state.range(0);
    p.n_k = state.range(0);
    p.d = state.range(1);
    return p.resolved("ioattn_bench_dense");
}

int threads_of(const benchmark::State& state) {
    return static_cast<int>(state.range(2));
}

template <ioattn::Schedule kSchedule>
void run_forward(benchmark::State& state) {
    const ioattn::Problem p = problem_of(state);
    const int threads = threads_of(state);
    const std::int64_t m = state.range(3);
    const ioattn::MemoryModel mem =
        m == 0 ? ioattn::MemoryModel::per_core_l2(sizeof(float)) : ioattn::MemoryModel{m};
    const ioattn::AttentionOptions opts = ioattn::measure::timed_options(
        kSchedule, mem, threads, "ioattn_bench_dense", /*tuned=*/m == 0);
    const ioattn::AttentionPlan plan =
        ioattn::plan_attention<float>(p, ioattn::Pass::forward, {}, opts);
    const ioattn::Tiling& tiling = plan.tiling;
    ForwardData<float> data(p, 42);
    const ioattn::ForwardArgs<float> args = data.args();
    ioattn::IoCounter counted(mem.fast_words);
    ioattn::AttentionOptions counting = opts;
    counting.counter = &counted;
    (void)ioattn::attention(args, {}, plan, counting);
    for (auto _ : state) {
        (void)ioattn::attention(args, {}, plan, opts);
        benchmark::DoNotOptimize(data.o.data());
        benchmark::ClobberMemory();
    }
    const double flops = ioattn::flop_count_convention(p);
    state.counters["flops"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
    state.counters["io_words"] = static_cast<double>(counted.report().total());
    state.counters["io_cost"] = static_cast<double>(ioattn::io_cost_forward(p, tiling).total());
    state.counters["M"] = static_cast<double>(mem.fast_words);
    state.counters["rows"] = static_cast<double>(tiling.rows);
    state.counters["cols"] = static_cast<double>(tiling.cols);
}

void forward_fused(benchmark::State& state) {
    run_forward<ioattn::Schedule::fused>(state);
}

void forward_materialized(benchmark::State& state) {
    run_forward<ioattn::Schedule::materialized>(state);
}

void naive_blas(benchmark::State& state) {
    const ioattn::Problem p = problem_of(state);
    const auto mode = state.range(3) == 0 ? ioattn::measure::NaiveMode::heads_parallel
                                          : ioattn::measure::NaiveMode::blas_threads;
    ForwardData<float> data(p, 42);
    ioattn::measure::NaiveAttention naive(p, mode, threads_of(state));
    for (auto _ : state) {
        naive.run(data.q.data(), data.k.data(), data.v.data(), data.o.data());
        benchmark::DoNotOptimize(data.o.data());
        benchmark::ClobberMemory();
    }
    state.SetLabel(std::string(ioattn::measure::to_string(mode)));
    state.counters["flops"] = benchmark::Counter(ioattn::flop_count_convention(p) *
                                                     static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}

void sgemm(benchmark::State& state) {
    ioattn::measure::SquareGemm<float> gemm(state.range(0), static_cast<int>(state.range(1)));
    for (auto _ : state)
        gemm.run();
    state.counters["flops"] = benchmark::Counter(
        gemm.flops() * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void kernel_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"N", "d", "threads", "M"});
    for (std::int64_t n : {1024, 4096})
        for (std::int64_t d : {64, 128})
            for (std::int64_t t : {1, 2})
                b->Args({n, d, t, 0});
    // The model's own tilings on both sides of M = d^2 (d = 64: d^2 = 4096); the entry point
    // plans the kernels' real footprint, whose smallest fused tiling needs M >= 2240 at d = 64.
    for (std::int64_t m : {2304, 16384})
        b->Args({1024, 64, 2, m});
}

/// The materialized schedule writes and rereads n_q x n_k scores: N = 4096 takes tens of
/// seconds per iteration, so its family stops at N = 2048.
void materialized_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"N", "d", "threads", "M"});
    for (std::int64_t n : {1024, 2048})
        for (std::int64_t d : {64, 128})
            for (std::int64_t t : {1, 2})
                b->Args({n, d, t, 0});
    for (std::int64_t m : {2304, 16384})
        b->Args({1024, 64, 2, m});
}

void naive_args(benchmark::internal::Benchmark* b) {
    b->ArgNames({"N", "d", "threads", "blas_threads"});
    for (std::int64_t n : {1024, 4096})
        for (std::int64_t d : {64, 128})
            for (std::int64_t mode : {0, 1})
                b->Args({n, d, 2, mode});
}

BENCHMARK(forward_fused)->Apply(kernel_args)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(forward_materialized)
    ->Apply(materialized_args)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(naive_blas)->Apply(naive_args)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(sgemm)
    ->ArgNames({"n", "threads"})
    ->Args({2048, 1})
    ->Args({2048, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

} // namespace

int main(int argc, char** argv) {
    benchmark::AddCustomContext("isa", std::string(ioattn::to_string(ioattn::active_isa())));
    benchmark::AddCustomContext("blas_core", ioattn::measure::blas_core());
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
