// ioattn_cache_driver: one kernel run for the simulated-cache validation of the counted I/O
// (bench/cache_validate.py, docs/design.md section 8). Runs under valgrind's callgrind with its
// cache simulator; only the region between the two CALLGRIND_TOGGLE_COLLECT marks is counted:
//   1. the kernel, one thread, NullCounter, the I/O-optimal tiling for M (Tiling::for_memory,
//      Kernels::sparse for a pattern); a sparse kernel's plan (sparse/src/support/
//      block_keys.hpp) is built by the counted pass before the region and kept with the
//      support, as in repeated calls;
//   2. a read sweep of FLUSH fresh words, which evicts every line the kernel left in the cache
//      and so writes back its dirty ones (the driver's caller subtracts the sweep's own FLUSH
//      words of reads).
// Before the region, a first sweep of FLUSH words writes back and evicts the inputs, so the
// kernel starts from a cold cache, as the model's slow memory does.
// Usage: ioattn_cache_driver PASS SCHEDULE N D PATTERN M FLUSH
//   PASS forward|backward, SCHEDULE fused|materialized, PATTERN dense or a sparse spec.
// Prints one JSON object: the tiling and the counted I/O of the same run (an IoCounter pass
// outside the region), or {"no_tiling": true} when M fits no tiling. fp32, B = H = 1.

#include <ioattn/dense.hpp>
#include <ioattn/sparse/backward.hpp>
#include <ioattn/sparse/forward.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <valgrind/callgrind.h>

namespace {

using ioattn::IoCounter;
using ioattn::NullCounter;

struct Args {
    ioattn::Pass pass = ioattn::Pass::forward;
    ioattn::Schedule schedule = ioattn::Schedule::fused;
    std::int64_t n = 0, d = 0, m = 0, flush = 0;
    std::string pattern;
};

/// Reads `words` floats never touched before (fresh anonymous pages: clean lines at new
/// addresses; calloc would memset a block it takes from the heap), so the sweep's own traffic
/// is exactly its reads, with no write-back.
float sweep(std::int64_t words) {
    const std::size_t bytes = static_cast<std::size_t>(words) * sizeof(float);
    void* fresh = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fresh == MAP_FAILED)
        throw std::bad_alloc();
    const auto* x = static_cast<const float*>(fresh);
    volatile float sink = 0.0F;
    float s = 0.0F;
    for (std::int64_t i = 0; i < words; ++i)
        s += x[i];
    sink = s;
    munmap(fresh, bytes);
    return sink;
}

std::vector<float> random_floats(std::int64_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> u(-1.0F, 1.0F);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v)
        x = u(gen);
    return v;
}

template <typename Kernel>
void measured(const Args& a, Kernel&& kernel) {
    sweep(a.flush);
    CALLGRIND_TOGGLE_COLLECT;
    kernel();
    sweep(a.flush);
    CALLGRIND_TOGGLE_COLLECT;
}

int run(const Args& a) {
    ioattn::Problem p;
    p.n_q = p.n_k = a.n;
    p.d = a.d;
    p = p.resolved("ioattn_cache_driver");
    const ioattn::MemoryModel mem{a.m};
    const auto kernels = a.pattern == "dense" ? ioattn::Kernels::dense : ioattn::Kernels::sparse;
    const auto fits = ioattn::Tiling::try_for_memory(a.schedule, mem, p, a.pass, kernels);
    if (!fits) {
        std::printf("{\"no_tiling\": true}\n");
        return 0;
    }
    const ioattn::Tiling t = *fits;
    const std::optional<ioattn::sparse::Support> support =
        a.pattern == "dense" ? std::nullopt
                             : std::optional(ioattn::sparse::parse_pattern(a.pattern, a.n, a.n, 7));
    auto q = random_floats(a.n * a.d, 1), k = random_floats(a.n * a.d, 2),
         v = random_floats(a.n * a.d, 3), d_o = random_floats(a.n * a.d, 4);
    std::vector<float> o(q.size()), lse(static_cast<std::size_t>(a.n)), d_q(q.size()),
        d_k(q.size()), d_v(q.size());
    auto args = ioattn::BackwardArgs<float>::packed(p,
                                                    q.data(),
                                                    k.data(),
                                                    v.data(),
                                                    o.data(),
                                                    lse.data(),
                                                    d_o.data(),
                                                    d_q.data(),
                                                    d_k.data(),
                                                    d_v.data());
    const ioattn::ForwardArgs<float>& fwd = args;
    // one pass of `Counter` over the chosen kernel
    const auto pass = [&](auto& counter) {
        if (a.pass == ioattn::Pass::forward) {
            if (support)
                ioattn::sparse::forward(fwd, *support, t, mem, counter);
            else
                ioattn::dense::forward(fwd, t, mem, counter);
        } else {
            if (support)
                ioattn::sparse::backward(args, *support, t, mem, counter);
            else
                ioattn::dense::backward(args, t, mem, counter);
        }
    };
    ioattn::with_threads(1, [&] {
        if (a.pass == ioattn::Pass::backward) { // O and L for the backward, outside the region
            const ioattn::MemoryModel big{std::int64_t{1} << 22};
            const ioattn::Tiling ft = ioattn::Tiling::for_memory(
                ioattn::Schedule::fused, big, p, ioattn::Pass::forward, kernels);
            NullCounter none;
            if (support)
                ioattn::sparse::forward(fwd, *support, ft, big, none);
            else
                ioattn::dense::forward(fwd, ft, big, none);
        }
        IoCounter counted(mem.fast_words);
        pass(counted);
        const ioattn::IoReport r = counted.report();
        measured(a, [&] {
            NullCounter c;
            pass(c);
        });
        std::printf("{\"rows\": %lld, \"cols\": %lld, \"reads\": %lld, \"writes\": %lld, "
                    "\"total\": %lld, \"peak\": %lld, \"flush\": %lld}\n",
                    static_cast<long long>(t.rows),
                    static_cast<long long>(t.cols),
                    static_cast<long long>(r.reads),
                    static_cast<long long>(r.writes),
                    static_cast<long long>(r.total()),
                    static_cast<long long>(r.peak),
                    static_cast<long long>(a.flush));
    });
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 8) {
        std::fprintf(stderr,
                     "usage: ioattn_cache_driver PASS SCHEDULE N D PATTERN M FLUSH_WORDS\n");
        return 2;
    }
    try {
        Args a;
        a.pass =
            std::string(argv[1]) == "backward" ? ioattn::Pass::backward : ioattn::Pass::forward;
        a.schedule = ioattn::parse_schedule(argv[2]);
        a.n = std::stoll(argv[3]);
        a.d = std::stoll(argv[4]);
        a.pattern = argv[5];
        a.m = std::stoll(argv[6]);
        a.flush = std::stoll(argv[7]);
        return run(a);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ioattn_cache_driver: %s\n", e.what());
        return 1;
    }
}
