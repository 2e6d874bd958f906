// ioattn_gather_floor: how long this machine takes to gather every allowed pair's K and V rows row
// by row, with no arithmetic but a sum (and with the least a pair needs: one dot product, one exp,
// one axpy into the row's output), for a pattern spec at N = n_q = n_k, d = d_v = 64, fp32. The
// element kernels (sparse/src/kernels/element/forward_element.cpp) gather exactly these rows, so
// this is the floor under their forward on patterns whose keys do not stay in cache (a power law's
// tail). Rows are split over the threads by pairs; each thread prefetches the K and V rows of the
// pair `ahead` positions on in its stream of pairs. The loop is the active ISA target's
// (gather_floor_loop.cpp; IOATTN_ISA chooses another).
//
// Usage: ioattn_gather_floor SPEC [N=16384] [threads=2]
// Prints, for K and V rows on a 64-byte boundary and at 16 mod 64, per prefetch distance (0,
// 8, 16, 32 pairs), the median of 31 runs in ms and the GFLOP/s it would mean at the
// forward's 4 d flops a pair.
// For powerlaw:32 on the Xeon model 167 (8 ahead, huge pages as the program's operands): 3.6 ms
// with one dot, exp and axpy a pair (docs/performance.md section 4).

#include <ioattn/kernels/dispatch.hpp>
#include <ioattn/sparse/pattern.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::int64_t kD = 64;

/// K and V rows (n x kD floats each) that start `offset` bytes past a 64-byte boundary: the
/// program's operator new (measure/aligned_new.cpp, linked in) starts them on one, on a 2 MiB
/// boundary and advised to huge pages from 4 MiB, as it does the program's operands.
struct Rows {
    std::vector<float> k_store, v_store;
    const float* k = nullptr;
    const float* v = nullptr;

    Rows(std::int64_t n, std::int64_t offset)
        : k_store(static_cast<std::size_t>(n * kD + 16))
        , v_store(static_cast<std::size_t>(n * kD + 16)) {
        k = fill(k_store.data() + offset / 4, n, 97);
        v = fill(v_store.data() + offset / 4, n, 89);
    }

    static const float* fill(float* p, std::int64_t n, int m) {
        for (std::int64_t i = 0; i < n * kD; ++i)
            p[i] = 1e-3F * static_cast<float>(i % m);
        return p;
    }
};

/// The floor's loop over pairs [e0, e1) (gather_floor_loop.cpp), per built ISA target.
#define IOATTN_DECLARE_GATHER(isa)                                                                 \
    namespace gather_floor::isa {                                                                  \
    float gather(const std::int64_t* keys,                                                         \
                 std::int64_t e0,                                                                  \
                 std::int64_t e1,                                                                  \
                 const float* k_rows,                                                              \
                 const float* v_rows,                                                              \
                 int ahead,                                                                        \
                 bool arithmetic);                                                                 \
    }
} // namespace
IOATTN_FOR_EACH_BUILT_ISA(IOATTN_DECLARE_GATHER)
#undef IOATTN_DECLARE_GATHER

namespace {

/// Rows [r0, r1) of the support through the active ISA target's loop (ioattn/isa.hpp).
float gather_rows(const ioattn::sparse::Support& s,
                  const Rows& kv,
                  std::int64_t r0,
                  std::int64_t r1,
                  int ahead,
                  bool arithmetic) {
    using namespace gather_floor;
    const auto& offsets = s.row_offsets();
    IOATTN_DISPATCH_ACTIVE(gather(s.col_indices().data(),
                                  offsets[static_cast<std::size_t>(r0)],
                                  offsets[static_cast<std::size_t>(r1)],
                                  kv.k,
                                  kv.v,
                                  ahead,
                                  arithmetic));
}

/// Times 31 runs of the floor's loop on every thread; prints the median.
void report(const ioattn::sparse::Support& s,
            const Rows& kv,
            const std::vector<std::int64_t>& cut,
            int threads,
            int ahead,
            bool arithmetic) {
    std::vector<double> ms;
    std::vector<float> sink(static_cast<std::size_t>(threads));
    for (int rep = 0; rep < 31; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t)
            pool.emplace_back([&, t] {
                const auto at = static_cast<std::size_t>(t);
                sink[at] = gather_rows(s, kv, cut[at], cut[at + 1], ahead, arithmetic);
            });
        for (std::thread& th : pool)
            th.join();
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    std::printf("  %-24s ahead %2d pairs: %7.3f ms  (%5.1f GFLOP/s at 4 d flops a pair)%s\n",
                arithmetic ? "gather + dot, exp, axpy" : "gather alone",
                ahead,
                median,
                4.0 * static_cast<double>(kD * s.z_qk()) / median / 1e6,
                sink[0] == 12345.0F ? " " : ""); // the sums are used
}

} // namespace

int main(int argc, char** argv) try {
    if (argc < 2 || argc > 4) {
        std::fprintf(stderr, "usage: ioattn_gather_floor SPEC [N=16384] [threads=2]\n");
        return 2;
    }
    const std::int64_t n = argc > 2 ? std::stoll(argv[2]) : 16384;
    const int threads = argc > 3 ? std::stoi(argv[3]) : 2;
    if (n < 1 || threads < 1) {
        std::fprintf(stderr,
                     "ioattn_gather_floor: N = %lld and threads = %d must be >= 1\n",
                     static_cast<long long>(n),
                     threads);
        return 2;
    }
    const ioattn::sparse::Support s = ioattn::sparse::parse_pattern(argv[1], n, n, 42);
    // thread t takes rows [cut[t], cut[t + 1]): about z_qk / threads pairs each
    std::vector<std::int64_t> cut{0};
    for (int t = 1; t < threads; ++t) {
        const std::int64_t want = s.z_qk() * t / threads;
        const auto& off = s.row_offsets();
        cut.push_back(std::lower_bound(off.begin(), off.end(), want) - off.begin());
    }
    cut.push_back(n);
    std::printf("%s N = %lld, d = %lld, fp32, %d threads: %lld pairs\n",
                argv[1],
                static_cast<long long>(n),
                static_cast<long long>(kD),
                threads,
                static_cast<long long>(s.z_qk()));
    for (const std::int64_t offset : {std::int64_t{0}, std::int64_t{16}}) {
        const Rows kv(n, offset);
        std::printf(" rows at %lld mod 64 bytes:\n", static_cast<long long>(offset));
        for (const bool arithmetic : {false, true})
            for (const int ahead : {0, 8, 16, 32})
                report(s, kv, cut, threads, ahead, arithmetic);
    }
    return 0;

} catch (const std::exception& e) {

    std::fprintf(stderr, "ioattn_gather_floor: %s\n", e.what());
    return 1;
}
