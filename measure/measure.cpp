// Inputs, peers and roofline for the benchmarks (see measure.hpp). Compiled with -ffast-math
// (measure/CMakeLists.txt) so the naive softmax's expf vectorizes; nothing here relies on
// infinities or NaN.

#include "measure.hpp"

#include <ioattn/error.hpp>
#include <ioattn/parallel.hpp>

#include <atomic>
#include <cmath>

#include <cblas.h>

// OpenBLAS's own (not in cblas.h; its pthreads and OpenMP servers define it, another BLAS may
// not): stops the worker threads, which its next threaded call starts again.
extern "C" int blas_thread_shutdown_() __attribute__((weak));

namespace ioattn::measure {

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30U)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27U)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31U);
}

template <typename Scalar>
void fill(std::vector<Scalar>& x, std::uint64_t seed) {
    std::uint64_t state = seed;
    for (Scalar& e : x) {
        const double u = static_cast<double>(splitmix64(state) >> 11U) * 0x1.0p-53; // [0, 1)
        e = static_cast<Scalar>(2.0 * u - 1.0);
    }
}

std::size_t sz(std::int64_t n) {
    return static_cast<std::size_t>(n);
}

int blas_int(std::int64_t n) {
    return static_cast<int>(n);
}

// The peers' own loops run at this CPU's best instruction set, like OpenBLAS and the ioattn
// kernels they are compared with (a default build compiles for the x86-64 baseline): GCC clones
// each for AVX-512, AVX2 and the baseline and picks one when the program loads.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define IOATTN_PEER_CLONES                                                                         \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define IOATTN_PEER_CLONES
#endif

/// row[0, vis) = softmax(row[0, vis)), row[vis, n_k) = 0 (the keys a causal row does not see).
IOATTN_PEER_CLONES void softmax_row(float* row, std::int64_t vis, std::int64_t n_k) {
    // `omp simd` (-fopenmp-simd): GCC 12 at -O2 left these loops scalar, expf included
    float mx = vis > 0 ? row[0] : 0.0F;
#pragma omp simd reduction(max : mx)
    for (std::int64_t j = 1; j < vis; ++j)
        mx = std::max(mx, row[j]);
    float sum = 0.0F;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t j = 0; j < vis; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
    }
    const float inv = vis > 0 ? 1.0F / sum : 0.0F;
#pragma omp simd
    for (std::int64_t j = 0; j < vis; ++j)
        row[j] *= inv;
    for (std::int64_t j = vis; j < n_k; ++j)
        row[j] = 0.0F;
}

/// dp[j] = p[j] (dp[j] - D) for one row, D = dO_i . O_i: dS of the naive backward.
IOATTN_PEER_CLONES void d_scores_row(const float* p,
                                     float* dp,
                                     std::int64_t n_k,
                                     const float* d_o,
                                     const float* o,
                                     std::int64_t d_v) {
    float delta = 0.0F;
#pragma omp simd reduction(+ : delta)
    for (std::int64_t x = 0; x < d_v; ++x)
        delta += d_o[x] * o[x];
#pragma omp simd
    for (std::int64_t j = 0; j < n_k; ++j)
        dp[j] = p[j] * (dp[j] - delta);
}

} // namespace

void fill_uniform(std::vector<float>& x, std::uint64_t seed) {
    fill(x, seed);
}

void fill_uniform(std::vector<double>& x, std::uint64_t seed) {
    fill(x, seed);
}

template <typename Scalar>
ForwardData<Scalar>::ForwardData(const Problem& p, std::uint64_t seed)
    : problem(p.resolved("ioattn::measure::ForwardData")) {
    const Problem& r = problem;
    q.resize(sz(r.batch * r.heads * r.n_q * r.d));
    k.resize(sz(r.batch * r.kv_heads * r.n_k * r.d));
    v.resize(sz(r.batch * r.kv_heads * r.n_k * r.d_v));
    o.assign(sz(r.batch * r.heads * r.n_q * r.d_v), Scalar(0));
    lse.assign(sz(r.batch * r.heads * r.n_q), Scalar(0));
    fill(q, seed);
    fill(k, seed + 1);
    fill(v, seed + 2);
}

template <typename Scalar>
ForwardArgs<Scalar> ForwardData<Scalar>::args() {
    return ForwardArgs<Scalar>::packed(problem, q.data(), k.data(), v.data(), o.data(), lse.data());
}

template struct ForwardData<float>;
template struct ForwardData<double>;

std::string_view to_string(NaiveMode m) {
    return m == NaiveMode::heads_parallel ? "heads-parallel" : "blas-threads";
}

void set_blas_threads(int threads) {
    openblas_set_num_threads(std::max(threads, 1));
}

bool first_warm_up() {
    static std::atomic<bool> done{false};
    return !done.exchange(true);
}

void park_blas_threads() {
    if (blas_thread_shutdown_ != nullptr)
        blas_thread_shutdown_();
}

std::string blas_core() {
    const char* name = openblas_get_corename();
    return name != nullptr ? name : "unknown";
}

std::string blas_config() {
    const char* config = openblas_get_config();
    return config != nullptr ? config : "unknown";
}

NaiveAttention::NaiveAttention(const Problem& problem, NaiveMode mode, int threads)
    : problem_(problem.resolved("ioattn::measure::NaiveAttention"))
    , mode_(mode)
    , threads_(std::max(threads, 1)) {
    const std::size_t buffers = mode == NaiveMode::heads_parallel ? sz(threads_) : 1;
    scores_.assign(buffers, std::vector<float>(sz(problem_.n_q * problem_.n_k)));
}

void NaiveAttention::head(
    std::int64_t slice, const float* q, const float* k, const float* v, float* o, float* s) const {
    const Problem& p = problem_;
    const std::int64_t b = slice / p.heads;
    const std::int64_t kv_slice = b * p.kv_heads + (slice % p.heads) / p.group();
    const float* qh = q + slice * p.n_q * p.d;
    const float* kh = k + kv_slice * p.n_k * p.d;
    const float* vh = v + kv_slice * p.n_k * p.d_v;
    float* oh = o + slice * p.n_q * p.d_v;
    // --- S = scale * Q K^T ---
    cblas_sgemm(CblasRowMajor,
                CblasNoTrans,
                CblasTrans,
                blas_int(p.n_q),
                blas_int(p.n_k),
                blas_int(p.d),
                static_cast<float>(p.scale),
                qh,
                blas_int(p.d),
                kh,
                blas_int(p.d),
                0.0F,
                s,
                blas_int(p.n_k));
    // --- P = softmax(S) over the visible keys of each row ---
    const auto softmax_rows = [&](std::int64_t i0, std::int64_t i1) {
        for (std::int64_t i = i0; i < i1; ++i)
            softmax_row(s + i * p.n_k, p.visible_keys(i), p.n_k);
    };
    if (mode_ == NaiveMode::heads_parallel) {
        softmax_rows(0, p.n_q);
    } else {
        constexpr std::int64_t kRows = 64;
        const std::int64_t tasks = (p.n_q + kRows - 1) / kRows;
        with_threads(threads_, [&] {
            parallel_for_tiles(tasks, [&](std::int64_t t, int /*w*/) {
                softmax_rows(t * kRows, std::min(p.n_q, (t + 1) * kRows));
            });
        });
    }
    // --- O = P V ---
    cblas_sgemm(CblasRowMajor,
                CblasNoTrans,
                CblasNoTrans,
                blas_int(p.n_q),
                blas_int(p.d_v),
                blas_int(p.n_k),
                1.0F,
                s,
                blas_int(p.n_k),
                vh,
                blas_int(p.d_v),
                0.0F,
                oh,
                blas_int(p.d_v));
}

void NaiveAttention::run(const float* q, const float* k, const float* v, float* o) {
    const std::int64_t slices = problem_.batch_heads();
    if (mode_ == NaiveMode::heads_parallel) {
        set_blas_threads(1);
        with_threads(threads_, [&] {
            parallel_for_tiles(
                slices, [&](std::int64_t t, int w) { head(t, q, k, v, o, scores_[sz(w)].data()); });
        });
    } else {
        set_blas_threads(threads_);
        for (std::int64_t t = 0; t < slices; ++t)
            head(t, q, k, v, o, scores_[0].data());
    }
}

NaiveBackward::NaiveBackward(const Problem& problem, int threads)
    : problem_(problem.resolved("ioattn::measure::NaiveBackward"))
    , threads_(std::max(threads, 1)) {
    if (problem_.kv_heads != problem_.heads)
        throw InvalidArgument(
            "ioattn::measure::NaiveBackward: kv_heads = " + std::to_string(problem_.kv_heads) +
            " != heads = " + std::to_string(problem_.heads) + " (no grouped-query heads)");
    p_.assign(sz(threads_), std::vector<float>(sz(problem_.n_q * problem_.n_k)));
    dp_.assign(sz(threads_), std::vector<float>(sz(problem_.n_q * problem_.n_k)));
}

void NaiveBackward::run(const float* q,
                        const float* k,
                        const float* v,
                        const float* o,
                        const float* d_o,
                        float* d_q,
                        float* d_k,
                        float* d_v) {
    const Problem& p = problem_;
    const auto gemm = [](bool ta,
                         bool tb,
                         std::int64_t m,
                         std::int64_t n,
                         std::int64_t kk,
                         float alpha,
                         const float* a,
                         std::int64_t lda,
                         const float* b,
                         std::int64_t ldb,
                         float* c,
                         std::int64_t ldc) {
        cblas_sgemm(CblasRowMajor,
                    ta ? CblasTrans : CblasNoTrans,
                    tb ? CblasTrans : CblasNoTrans,
                    blas_int(m),
                    blas_int(n),
                    blas_int(kk),
                    alpha,
                    a,
                    blas_int(lda),
                    b,
                    blas_int(ldb),
                    0.0F,
                    c,
                    blas_int(ldc));
    };
    const auto scale = static_cast<float>(p.scale);
    set_blas_threads(1);
    with_threads(threads_, [&] {
        parallel_for_tiles(p.batch_heads(), [&](std::int64_t sl, int w) {
            const float* qh = q + sl * p.n_q * p.d;
            const float* kh = k + sl * p.n_k * p.d;
            const float* vh = v + sl * p.n_k * p.d_v;
            const float* oh = o + sl * p.n_q * p.d_v;
            const float* doh = d_o + sl * p.n_q * p.d_v;
            float* pr = p_[sz(w)].data();
            float* dp = dp_[sz(w)].data();
            gemm(false, true, p.n_q, p.n_k, p.d, scale, qh, p.d, kh, p.d, pr, p.n_k); // S
            for (std::int64_t i = 0; i < p.n_q; ++i) // P = softmax(S)
                softmax_row(pr + i * p.n_k, p.visible_keys(i), p.n_k);
            gemm(true,
                 false,
                 p.n_k,
                 p.d_v,
                 p.n_q,
                 1.0F,
                 pr,
                 p.n_k,
                 doh,
                 p.d_v,
                 d_v + sl * p.n_k * p.d_v,
                 p.d_v); // dV = P^T dO
            gemm(false, true, p.n_q, p.n_k, p.d_v, 1.0F, doh, p.d_v, vh, p.d_v, dp, p.n_k); // dP
            for (std::int64_t i = 0; i < p.n_q; ++i) // dS = P o (dP - D)
                d_scores_row(
                    pr + i * p.n_k, dp + i * p.n_k, p.n_k, doh + i * p.d_v, oh + i * p.d_v, p.d_v);
            gemm(false,
                 false,
                 p.n_q,
                 p.d,
                 p.n_k,
                 scale,
                 dp,
                 p.n_k,
                 kh,
                 p.d,
                 d_q + sl * p.n_q * p.d,
                 p.d); // dQ
            gemm(true,
                 false,
                 p.n_k,
                 p.d,
                 p.n_q,
                 scale,
                 dp,
                 p.n_k,
                 qh,
                 p.d,
                 d_k + sl * p.n_k * p.d,
                 p.d); // dK
        });
    });
}

double measure_read_bandwidth(std::int64_t bytes, int threads, int repeat) {
    constexpr std::int64_t kChunk = std::int64_t{1} << 18; // floats per task (1 MiB)
    const std::int64_t n = std::max<std::int64_t>(bytes / 4, kChunk);
    const std::int64_t tasks = (n + kChunk - 1) / kChunk;
    std::vector<float> x(sz(n), 1.0F);
    std::vector<float> partial(sz(tasks));
    const auto pass = [&] {
        with_threads(threads, [&] {
            parallel_for_tiles(tasks, [&](std::int64_t t, int /*w*/) {
                const std::int64_t end = std::min(n, (t + 1) * kChunk);
                float s = 0.0F;
                for (std::int64_t i = t * kChunk; i < end; ++i)
                    s += x[sz(i)];
                partial[sz(t)] = s;
            });
        });
    };
    const double seconds = median_seconds(repeat, pass);
    volatile float sink = partial[0];
    (void)sink;
    return static_cast<double>(n) * 4.0 / seconds * 1e-9;
}

template <typename Scalar>
SquareGemm<Scalar>::SquareGemm(std::int64_t n, int threads)
    : n_(n)
    , threads_(std::max(threads, 1))
    , a_(sz(n * n))
    , b_(sz(n * n))
    , c_(sz(n * n)) {
    fill(a_, 11);
    fill(b_, 12);
}

template <typename Scalar>
void SquareGemm<Scalar>::run() {
    set_blas_threads(threads_);
    const int n = blas_int(n_);
    if constexpr (std::is_same_v<Scalar, float>)
        cblas_sgemm(CblasRowMajor,
                    CblasNoTrans,
                    CblasNoTrans,
                    n,
                    n,
                    n,
                    1.0F,
                    a_.data(),
                    n,
                    b_.data(),
                    n,
                    0.0F,
                    c_.data(),
                    n);
    else
        cblas_dgemm(CblasRowMajor,
                    CblasNoTrans,
                    CblasNoTrans,
                    n,
                    n,
                    n,
                    1.0,
                    a_.data(),
                    n,
                    b_.data(),
                    n,
                    0.0,
                    c_.data(),
                    n);
}

template class SquareGemm<float>;
template class SquareGemm<double>;

} // namespace ioattn::measure
