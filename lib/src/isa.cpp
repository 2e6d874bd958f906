// ioattn::active_isa and friends: which ISA targets this library holds, which of
// them the CPU and the operating system can execute (cpuid, XGETBV), the IOATTN_ISA override,
// and the FMA peak of a target (its loop is in fma_peak.cpp, compiled per target).

#include <ioattn/error.hpp>
#include <ioattn/isa.hpp>
#include <ioattn/kernels/dispatch.hpp>
#include <ioattn/parallel.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace ioattn {

namespace detail {
#define IOATTN_DECLARE_PEAK(isa)                                                                   \
    namespace isa {                                                                                \
    template <typename T>                                                                          \
    double fma_peak_loop(std::int64_t iterations, std::int64_t& flops);                            \
    }
IOATTN_FOR_EACH_BUILT_ISA(IOATTN_DECLARE_PEAK)
#undef IOATTN_DECLARE_PEAK
#if defined(IOATTN_BUILT_AVX512BF16)
namespace isa_avx512bf16 {
double dot_peak_loop_bf16(std::int64_t iterations, std::int64_t& flops); // dot_peak_bf16.cpp
}
#endif
} // namespace detail

namespace {

constexpr const char* kNames = "avx512, avx2 or sse2";
/// The IOATTN_ISA name of the avx512 target with the native bf16 kernels (bf16_kernels_native).
constexpr std::string_view kBf16Name = "avx512bf16";

constexpr bool kBuiltBf16 =
#if defined(IOATTN_BUILT_AVX512BF16)
    true;
#else
    false;
#endif

#if defined(__x86_64__) || defined(__i386__)

/// Register state the OS saves on context switches (XCR0), 0 without OSXSAVE.
std::uint64_t saved_state(unsigned ecx1) {
    if ((ecx1 & bit_OSXSAVE) == 0)
        return 0;
    std::uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (std::uint64_t{hi} << 32U) | lo;
}

bool cpu_has(Isa isa) {
    if (isa == Isa::sse2)
        return true;
    unsigned a = 0, b = 0, c1 = 0, d = 0, b7 = 0, c7 = 0, c81 = 0;
    if (__get_cpuid(1, &a, &b, &c1, &d) == 0)
        return false;
    if (__get_cpuid_count(7, 0, &a, &b7, &c7, &d) == 0)
        return false;
    if (__get_cpuid(0x80000001U, &a, &b, &c81, &d) == 0)
        return false;
    const std::uint64_t xcr0 = saved_state(c1);
    // AVX2 target: compiled for avx2, fma, bmi, bmi2, f16c, lzcnt, popcnt (target_begin.hpp),
    // with the OS saving the SSE and AVX state (XCR0 bits 1, 2).
    const bool avx2 = (xcr0 & 0x6U) == 0x6U && (c1 & bit_AVX) != 0 && (c1 & bit_FMA) != 0 &&
                      (c1 & bit_F16C) != 0 && (c1 & bit_POPCNT) != 0 && (b7 & bit_AVX2) != 0 &&
                      (b7 & bit_BMI) != 0 && (b7 & bit_BMI2) != 0 && (c81 & bit_LZCNT) != 0;
    if (isa == Isa::avx2)
        return avx2;
    // AVX-512 target: F, DQ, BW, VL, with the opmask and both halves of the ZMM state saved
    // (XCR0 bits 5, 6, 7).
    return avx2 && (xcr0 & 0xE6U) == 0xE6U && (b7 & bit_AVX512F) != 0 && (b7 & bit_AVX512DQ) != 0 &&
           (b7 & bit_AVX512BW) != 0 && (b7 & bit_AVX512VL) != 0;
}

/// AVX512_BF16: cpuid leaf 7, subleaf 1, EAX bit 5 (leaf 7's EAX gives its last subleaf).
bool cpu_has_avx512_bf16() {
    unsigned last = 0, b = 0, c = 0, d = 0, a1 = 0;
    if (!cpu_has(Isa::avx512) || __get_cpuid_count(7, 0, &last, &b, &c, &d) == 0 || last < 1)
        return false;
    if (__get_cpuid_count(7, 1, &a1, &b, &c, &d) == 0)
        return false;
    return (a1 & (1U << 5U)) != 0;
}

#else

bool cpu_has(Isa isa) {
    return isa == Isa::sse2;
}

bool cpu_has_avx512_bf16() {
    return false;
}

#endif

[[maybe_unused]] Isa built_level() {
#if IOATTN_ISA_LEVEL == 3
    return Isa::avx512;
#elif IOATTN_ISA_LEVEL == 2
    return Isa::avx2;
#else
    return Isa::sse2;
#endif
}

std::string list(const std::vector<Isa>& isas) {
    std::string s;
    for (const Isa i : isas)
        s += (s.empty() ? "" : ", ") + std::string(to_string(i));
    return s;
}

std::vector<Isa> supported_built() {
    std::vector<Isa> out;
    for (const Isa i : built_isas())
        if (cpu_has(i))
            out.push_back(i);
    return out;
}

/// The ISA target to run: the forced one if IOATTN_ISA is set (checked), else the best.
Isa choose() {
    constexpr const char* kWhere = "ioattn::active_isa";
    const char* env = std::getenv("IOATTN_ISA");
    const std::vector<Isa> usable = supported_built();
    if (env == nullptr || *env == '\0') {
        if (usable.empty())
            throw InvalidArgument(std::string(kWhere) + ": this CPU cannot execute any variant " +
                                  "this library was built with (" + list(built_isas()) + ")");
        return usable.front();
    }
    Isa want{};
    if (env == kBf16Name) {
        if (!kBuiltBf16)
            throw InvalidArgument(std::string(kWhere) + ": IOATTN_ISA = " + env +
                                  ", but this library holds no native bf16 kernels");
        if (!cpu_has_avx512_bf16())
            throw InvalidArgument(std::string(kWhere) + ": IOATTN_ISA = " + env +
                                  ", but this CPU cannot execute AVX512_BF16");
        return Isa::avx512;
    }
    try {
        want = parse_isa(env);
    } catch (const InvalidArgument&) {
        throw InvalidArgument(std::string(kWhere) + ": IOATTN_ISA = '" + env +
                              "' is not an instruction set (expected avx512bf16, " + kNames + ")");
    }
    const std::vector<Isa> built = built_isas();
    if (std::find(built.begin(), built.end(), want) == built.end())
        throw InvalidArgument(std::string(kWhere) + ": IOATTN_ISA = " + env +
                              ", but this library holds only " + list(built));
    if (!cpu_has(want))
        throw InvalidArgument(std::string(kWhere) + ": IOATTN_ISA = " + env +
                              ", but this CPU cannot execute it (usable here: " + list(usable) +
                              ")");
    return want;
}

} // namespace

std::string_view to_string(Isa isa) {
    switch (isa) {
    case Isa::sse2:
        return "sse2";
    case Isa::avx2:
        return "avx2";
    case Isa::avx512:
        return "avx512";
    }
    return "?";
}

Isa parse_isa(std::string_view text) {
    for (const Isa i : {Isa::avx512, Isa::avx2, Isa::sse2})
        if (text == to_string(i))
            return i;
    throw InvalidArgument("ioattn::parse_isa: '" + std::string(text) +
                          "' is not an instruction set (expected " + kNames + ")");
}

bool cpu_supports(Isa isa) {
    return cpu_has(isa);
}

bool cpu_supports_avx512_bf16() {
    static const bool has = cpu_has_avx512_bf16();
    return has;
}

std::vector<Isa> built_isas() {
#if defined(IOATTN_SINGLE_ISA)
    return {built_level()};
#else
    std::vector<Isa> out;
    IOATTN_IF_BUILT_AVX512(out.push_back(Isa::avx512);)
    IOATTN_IF_BUILT_AVX2(out.push_back(Isa::avx2);)
    out.push_back(Isa::sse2);
    return out;
#endif
}

Isa active_isa() {
    static const Isa active = choose(); // a throwing initialization is retried on the next call
    return active;
}

bool bf16_kernels_native() {
    if (!kBuiltBf16 || !cpu_supports_avx512_bf16() || active_isa() != Isa::avx512)
        return false;
    const char* env = std::getenv("IOATTN_ISA");
    return env == nullptr || *env == '\0' || env == kBf16Name;
}

namespace {

void check_seconds(const char* where, double seconds) {
    if (!(seconds > 0.0))
        throw InvalidArgument(std::string(where) + ": seconds = " + std::to_string(seconds) +
                              " (expected > 0)");
}

/// GFLOP/s of `loop(iterations, flops)` (one worker's register-only loop) on `threads`
/// workers: calibrated on one worker, then every worker runs for about `seconds`, best of
/// three (noise only ever lowers a peak).
template <typename Loop>
double timed_peak(const Loop& loop, int threads, double seconds) {
    using Clock = std::chrono::steady_clock;
    std::int64_t iterations = 1 << 16, flops = 0;
    for (;;) {
        const auto t0 = Clock::now();
        loop(iterations, flops);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (s > 0.02 || iterations > (std::int64_t{1} << 40)) {
            iterations = std::max<std::int64_t>(
                1, static_cast<std::int64_t>(static_cast<double>(iterations) * seconds / s));
            break;
        }
        iterations *= 4;
    }
    double best = 0.0;
    with_threads(threads, [&] {
        const int workers = max_concurrency();
        std::vector<std::int64_t> done(static_cast<std::size_t>(workers), 0);
        std::vector<double> sink(static_cast<std::size_t>(workers), 0.0);
        for (int rep = 0; rep < 3; ++rep) {
            std::fill(done.begin(), done.end(), 0);
            const auto t0 = Clock::now();
            parallel_for_tiles(workers, [&](std::int64_t w, int) {
                const auto at = static_cast<std::size_t>(w);
                sink[at] += loop(iterations, done[at]);
            });
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            double total = 0.0;
            for (const std::int64_t f : done)
                total += static_cast<double>(f);
            best = std::max(best, total / s * 1e-9);
        }
        volatile double keep = sink[0];
        (void)keep;
    });
    return best;
}

} // namespace

double measure_bf16_dot_peak(int threads, double seconds) {
    constexpr const char* kWhere = "ioattn::measure_bf16_dot_peak";
    check_seconds(kWhere, seconds);
#if defined(IOATTN_BUILT_AVX512BF16)
    if (cpu_supports_avx512_bf16())
        return timed_peak(
            [](std::int64_t iterations, std::int64_t& flops) {
                return detail::isa_avx512bf16::dot_peak_loop_bf16(iterations, flops);
            },
            threads,
            seconds);
#else
    (void)threads;
#endif
    throw InvalidArgument(std::string(kWhere) +
                          ": this library holds no native bf16 kernels or this CPU lacks "
                          "AVX512_BF16");
}

double measure_fma_peak(Isa isa, int threads, bool double_precision, double seconds) {
    constexpr const char* kWhere = "ioattn::measure_fma_peak";
    check_seconds(kWhere, seconds);
    const std::vector<Isa> built = built_isas();
    if (std::find(built.begin(), built.end(), isa) == built.end() || !cpu_has(isa))
        throw InvalidArgument(std::string(kWhere) + ": " + std::string(to_string(isa)) +
                              " is not built into this library or not supported by this CPU");
    // One worker's loop of `iterations`, as the target of `isa` compiles it.
    const auto loop = [&](std::int64_t iterations, std::int64_t& flops) -> double {
        const auto run = [&](auto tag) -> double {
            using T = decltype(tag);
            (void)tag;
#if defined(IOATTN_SINGLE_ISA)
            return detail::IOATTN_ISA::fma_peak_loop<T>(iterations, flops);
#else
            switch (isa) {
                IOATTN_IF_BUILT_AVX512(
                    case Isa::avx512
                    : return detail::isa_avx512::fma_peak_loop<T>(iterations, flops);)
                IOATTN_IF_BUILT_AVX2(
                    case Isa::avx2
                    : return detail::isa_avx2::fma_peak_loop<T>(iterations, flops);)
            default:
                return detail::isa_sse2::fma_peak_loop<T>(iterations, flops);
            }
#endif
        };
        return double_precision ? run(0.0) : run(0.0F);
    };
    return timed_peak(loop, threads, seconds);
}

} // namespace ioattn
