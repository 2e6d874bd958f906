#pragma once
// Shared by the program's timed subcommands (apps/) and the Google Benchmark families (bench/):
// seeded inputs for a forward problem, the peers measured side by side (naive attention on
// OpenBLAS, docs/performance.md section 1) and the same-run roofline (OpenBLAS SGEMM/DGEMM of a
// square n^3). No correctness checks here: timings only.

#include <ioattn/dense.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ioattn::measure {

/// Packed operands of one forward problem, filled with seeded uniform values in [-1, 1).
template <typename Scalar>
struct ForwardData {
    Problem problem;
    std::vector<Scalar> q, k, v, o, lse;

    ForwardData(const Problem& p, std::uint64_t seed);

    /// Views of the buffers above (inputs read-only, o and lse written).
    [[nodiscard]] ForwardArgs<Scalar> args();
};

extern template struct ForwardData<float>;
extern template struct ForwardData<double>;

/// Owned operands and outputs of a forward and a backward pass, packed as `p` lays them out:
/// Q, K, V, O, dO, dQ, dK, dV of T and L of Stat (fp32 beside bf16 operands), and the argument
/// views over them. Who fills them chooses the values.
template <typename T, typename Stat = T>
struct OwnedArgs {
    Problem p;
    std::vector<T> q, k, v, o, d_o, d_q, d_k, d_v;
    std::vector<Stat> lse;

    [[nodiscard]] ForwardArgs<T> forward() {
        return ForwardArgs<T>::packed(p, q.data(), k.data(), v.data(), o.data(), lse.data());
    }

    [[nodiscard]] BackwardArgs<T> backward() {
        return BackwardArgs<T>::packed(p,
                                       q.data(),
                                       k.data(),
                                       v.data(),
                                       o.data(),
                                       lse.data(),
                                       d_o.data(),
                                       d_q.data(),
                                       d_k.data(),
                                       d_v.data());
    }
};

/// Fills `x` with uniform values in [-1, 1) from a SplitMix64 stream seeded by `seed`.
void fill_uniform(std::vector<float>& x, std::uint64_t seed);
void fill_uniform(std::vector<double>& x, std::uint64_t seed);

/// How the naive OpenBLAS attention uses the threads.
enum class NaiveMode {
    heads_parallel, ///< oneTBB over (batch, head), OpenBLAS single-threaded inside each task
    blas_threads    ///< heads in sequence, OpenBLAS threaded, the row softmax over oneTBB
};

std::string_view to_string(NaiveMode m);

/// Naive attention, fp32: per (batch, head) S = scale*Q K^T (cblas_sgemm, n_q x n_k in slow
/// memory), row softmax over the visible keys (causal mask, bottom-right aligned), O = P V
/// (cblas_sgemm). GQA: head h reads key/value head h / group. Workspace is allocated once.
class NaiveAttention {
public:
    NaiveAttention(const Problem& problem, NaiveMode mode, int threads);

    /// O = softmax(scale*Q K^T + mask) V on packed q, k, v, o.
    void run(const float* q, const float* k, const float* v, float* o);

private:
    void head(std::int64_t slice,
              const float* q,
              const float* k,
              const float* v,
              float* o,
              float* s) const;

    Problem problem_;
    NaiveMode mode_;
    int threads_;
    std::vector<std::vector<float>> scores_; ///< one n_q x n_k buffer per worker
};

/// Naive attention backward, fp32, heads in parallel with OpenBLAS single-threaded in each task
/// (no grouped-query heads: kv_heads must equal heads). Per head, with P materialized (n_q x n_k):
/// S = scale Q K^T, P = softmax(S) (causal mask as the forward), dV = P^T dO, dP = dO V^T,
/// D = rowsum(dO o O), dS = P o (dP - D), dQ = scale dS K, dK = scale dS^T Q: five SGEMMs and
/// the forward's first. Workspace (two n_q x n_k buffers per worker) is allocated once.
class NaiveBackward {
public:
    NaiveBackward(const Problem& problem, int threads);

    void run(const float* q,
             const float* k,
             const float* v,
             const float* o,
             const float* d_o,
             float* d_q,
             float* d_k,
             float* d_v);

private:
    Problem problem_;
    int threads_;
    std::vector<std::vector<float>> p_, dp_;
};

/// The roofline of docs/performance.md section 1: C = A B for square n x n matrices with OpenBLAS
/// (SGEMM for float, DGEMM for double) on `threads` OpenBLAS threads.
template <typename Scalar>
class SquareGemm {
public:
    SquareGemm(std::int64_t n, int threads);

    void run();

    [[nodiscard]] double flops() const {
        const auto x = static_cast<double>(n_);
        return 2.0 * x * x * x;
    }

private:
    std::int64_t n_;
    int threads_;
    std::vector<Scalar> a_, b_, c_;
};

extern template class SquareGemm<float>;
extern template class SquareGemm<double>;

/// Read bandwidth in GB/s of summing a `bytes`-byte float buffer on `threads` workers (median
/// of `repeat` passes after a warm-up): a STREAM-like estimate of the slow memory's bandwidth.
double measure_read_bandwidth(std::int64_t bytes, int threads, int repeat = 5);

/// Sets OpenBLAS's thread count (a process-wide setting).
void set_blas_threads(int threads);

/// Stops OpenBLAS's worker threads now; its next threaded call starts them again. Its pthreads
/// build's workers spin (sched_yield) for 2^28 cycles, about 0.1 s, after they start (when the
/// library loads) and after every threaded call, so a oneTBB kernel timed in that window
/// shares a core with one (without this call, `ioattn run --pattern bigbird:0:0:3 --threads 2`
/// runs its first 23 calls at 2.0 ms, then 1.05 ms). A no-op where the library has no such
/// threads.
void park_blas_threads();

/// The kernel family OpenBLAS runs in this process (openblas_get_corename(), e.g. "Haswell",
/// "SkylakeX"; "Prescott" is its SSE3 fallback on CPUs it does not know), and its build
/// configuration (openblas_get_config()).
std::string blas_core();
std::string blas_config();

/// Wall-clock seconds of one call of fn().
template <typename Fn>
double seconds_of(Fn&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(t1 - t0).count();
}

/// How long the first warm-up of a process (warm_up_calls) calls its function at least.
inline constexpr double kFirstWarmUpSeconds = 0.3;

/// True for the first call in this process, false after (measure.cpp).
bool first_warm_up();

/// Untimed calls of fn() before a timed loop: one, or in the process's first warm-up as many
/// as take kFirstWarmUpSeconds, so that a process started beside a short run has taken its
/// share of the cores before the timing starts. `ioattn run --N 4096 --d 64 --pattern
/// window:256 --repeat 20 --json | python3 -c ...` starts the interpreter beside the run: after
/// one warm-up call it timed 4.2 ms at --threads 2 and at --threads 1, after this one 1.75 and
/// 3.6 (written to a file: 1.69 and 3.3 either way).
template <typename Fn>
void warm_up_calls(Fn&& fn) {
    double spent = seconds_of(fn);
    if (first_warm_up())
        while (spent < kFirstWarmUpSeconds)
            spent += seconds_of(fn);
}

/// Median of `repeat` timed calls of fn() (repeat >= 1), after warm_up_calls when `warm_up` is
/// set.
template <typename Fn>
double median_seconds(int repeat, Fn&& fn, bool warm_up = true) {
    if (warm_up)
        warm_up_calls(fn);
    std::vector<double> t;
    for (int r = 0; r < std::max(repeat, 1); ++r)
        t.push_back(seconds_of(fn));
    std::sort(t.begin(), t.end());
    const std::size_t n = t.size();
    return n % 2 == 1 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

} // namespace ioattn::measure
