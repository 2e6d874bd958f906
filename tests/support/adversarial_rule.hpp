#pragma once
// The rule of the adversarial numerics tests and the runner both the dense and the
// sparse test use: every case of adversarial.hpp through the fused and materialized schedules,
// forward then backward, each output row judged against the oracle (see adversarial.hpp), and
// a summary line for the README when IOATTN_TEST_REPORT is set.

#include "adversarial.hpp"
#include "case_data.hpp"
#include "tolerance.hpp"

#include <ioattn/problem.hpp>
#include <ioattn/view.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

namespace ioattn::test::adversarial {

/// Prints `line` on stdout when IOATTN_TEST_REPORT is set (the README's figures), else nothing.
inline void report(const std::string& line) {
    if (std::getenv("IOATTN_TEST_REPORT") != nullptr)
        std::printf("%s\n", line.c_str());
}

/// Running verdict over the rows of many outputs.
struct Tally {
    std::int64_t rows = 0;         ///< rows compared (oracle finite somewhere in the row)
    std::int64_t failures = 0;     ///< rows breaking the rule
    double worst_ratio = 0;        ///< max err(kernel) / (err(naive) + tiny), naive finite
    std::int64_t nonfinite_in = 0; ///< oracle elements skipped (NaN or inf, but not L = -inf)
    std::string first_failure;
};

/// Applies the rule to each row of `width` elements of one output tensor.
template <typename T, typename K, typename N, typename O>
void check_rows(const std::vector<K>& kernel,
                const std::vector<N>& naive,
                const std::vector<O>& oracle,
                const std::vector<O>& noise,
                std::int64_t width,
                const std::string& what,
                Tally& t) {
    const std::int64_t rows = width == 0 ? 0 : static_cast<std::int64_t>(oracle.size()) / width;
    for (std::int64_t r = 0; r < rows; ++r) {
        long double err_k = 0, err_n = 0, mag = 0, bound = 0;
        bool compared = false, kernel_bad = false;
        for (std::int64_t x = 0; x < width; ++x) {
            const std::size_t e = detail::at(r * width + x);
            const auto y = static_cast<long double>(oracle[e]);
            if (width == 1 && y == -std::numeric_limits<long double>::infinity()) {
                compared = true; // L of a row that sees no key: exactly -inf
                kernel_bad = kernel_bad || static_cast<long double>(kernel[e]) != y;
                continue;
            }
            if (!std::isfinite(y)) {
                ++t.nonfinite_in;
                continue;
            }
            compared = true;
            mag = std::max(mag, std::fabs(y));
            if (std::isfinite(static_cast<long double>(noise[e])))
                bound = std::max(bound, static_cast<long double>(noise[e]));
            const auto kx = static_cast<long double>(kernel[e]);
            const auto nx = static_cast<long double>(naive[e]);
            constexpr long double kInf = std::numeric_limits<long double>::infinity();
            kernel_bad = kernel_bad || !std::isfinite(kx);
            err_k = std::max(err_k, std::isfinite(kx) ? std::fabs(kx - y) : kInf);
            err_n = std::max(err_n, std::isfinite(nx) ? std::fabs(nx - y) : kInf);
        }
        if (!compared)
            continue;
        ++t.rows;
        const long double tiny =
            4.0L * static_cast<long double>(std::numeric_limits<T>::epsilon()) * mag + bound +
            8.0L * static_cast<long double>(std::numeric_limits<T>::min());
        // the ratio where naive<T> is finite; a kernel NaN or inf where the oracle is finite
        // fails whatever naive<T> does
        if (std::isfinite(err_n))
            t.worst_ratio = std::max(t.worst_ratio, static_cast<double>(err_k / (err_n + tiny)));
        if (kernel_bad || !(err_k <= 2 * err_n + tiny)) {
            if (t.failures++ == 0)
                t.first_failure = what + " row " + std::to_string(r) + ": err " +
                                  std::to_string(static_cast<double>(err_k)) + ", naive " +
                                  std::to_string(static_cast<double>(err_n)) + ", tiny " +
                                  std::to_string(static_cast<double>(tiny));
        }
    }
}

/// Packed views of the case's inputs and of the given outputs.
template <typename T>
ioattn::BackwardArgs<T> args_of(const Case<T>& c,
                                std::vector<T>& o,
                                std::vector<T>& lse,
                                std::vector<T>& d_q,
                                std::vector<T>& d_k,
                                std::vector<T>& d_v) {
    const auto& p = c.p;
    ioattn::BackwardArgs<T> a;
    a.problem = p;
    using ioattn::TensorView;
    a.q = TensorView<const T>::packed(c.q.data(), p.batch, p.heads, p.n_q, p.d);
    a.k = TensorView<const T>::packed(c.k.data(), p.batch, p.kv_heads, p.n_k, p.d);
    a.v = TensorView<const T>::packed(c.v.data(), p.batch, p.kv_heads, p.n_k, p.d_v);
    a.o = TensorView<T>::packed(o.data(), p.batch, p.heads, p.n_q, p.d_v);
    a.lse = TensorView<T>::packed(lse.data(), p.batch, p.heads, p.n_q, 1);
    a.d_o = TensorView<const T>::packed(c.d_o.data(), p.batch, p.heads, p.n_q, p.d_v);
    a.d_q = TensorView<T>::packed(d_q.data(), p.batch, p.heads, p.n_q, p.d);
    a.d_k = TensorView<T>::packed(d_k.data(), p.batch, p.kv_heads, p.n_k, p.d);
    a.d_v = TensorView<T>::packed(d_v.data(), p.batch, p.kv_heads, p.n_k, p.d_v);
    return a;
}

/// Runs `cases` seeded cases (seeds first_seed, first_seed + 1, ...) of the dense (`sparse`
/// false) or sparse family through run(case, schedule, pass, tiling, memory, args) for the
/// fused and materialized schedules, forward then backward, and applies the rule to every row
/// of their outputs. The forward writes args.o and args.lse; the backward reads them (the
/// oracle's, rounded to T) and writes args.d_q, d_k, d_v.
template <typename T, typename RunKernel>
void run_cases(
    const char* family, bool sparse, int cases, std::uint64_t first_seed, const RunKernel& run) {
    using Oracle = ioattn::test::Oracle<T>;
    using ioattn::MemoryModel;
    using ioattn::Pass;
    using ioattn::Schedule;
    using ioattn::Tiling;
    Tally fwd, bwd;
    std::int64_t runs = 0;
    for (int n = 0; n < cases; ++n) {
        const std::uint64_t seed = first_seed + static_cast<std::uint64_t>(n);
        const Case<T> c = make_case<T>(seed, sparse);
        CAPTURE(seed, kKinds[c.kind], c.p);
        Outputs<Oracle> oracle;
        Outputs<T> naive;
        naive_forward(c, oracle);
        naive_forward(c, naive);
        // the backward's O and L: the oracle's, rounded to T
        const std::vector<T> o_in(oracle.o.begin(), oracle.o.end());
        const std::vector<T> lse_in(oracle.lse.begin(), oracle.lse.end());
        naive_backward(c, o_in, lse_in, oracle);
        naive_backward(c, o_in, lse_in, naive);
        ioattn::test::Rng rng(seed);
        for (const Schedule s : {Schedule::fused, Schedule::materialized}) {
            for (const Pass pass : {Pass::forward, Pass::backward}) {
                Tiling t = ioattn::test::random_tiling(rng, s, c.p, pass);
                if (sparse && s == Schedule::materialized && pass == Pass::backward &&
                    rng.uniform_int(0, 1) == 1) { // the sparse backward's feature chunks too
                    const auto rp = c.p.resolved("adversarial");
                    t.depth = rng.uniform_int(1, std::max(rp.d, rp.d_v) + 2);
                }
                CAPTURE(t, ioattn::to_string(pass));
                const MemoryModel m{t.resident_words(
                    c.p, pass, sparse ? ioattn::Kernels::sparse : ioattn::Kernels::dense)};
                Outputs<T> r;
                r.o = pass == Pass::forward ? std::vector<T>(o_in.size()) : o_in;
                r.lse = pass == Pass::forward ? std::vector<T>(lse_in.size()) : lse_in;
                r.d_q.resize(c.q.size());
                r.d_k.resize(c.k.size());
                r.d_v.resize(c.v.size());
                const auto a = args_of(c, r.o, r.lse, r.d_q, r.d_k, r.d_v);
                ++runs;
                run(c, s, pass, t, m, a);
                if (pass == Pass::forward) {
                    const std::string k = ioattn::test::kernel_name(pass, s);
                    check_rows<T>(r.o, naive.o, oracle.o, oracle.o_noise, c.p.d_v, k + " O", fwd);
                    check_rows<T>(r.lse, naive.lse, oracle.lse, oracle.lse_noise, 1, k + " L", fwd);
                    INFO(fwd.first_failure);
                    REQUIRE(fwd.failures == 0);
                } else {
                    const std::string k = ioattn::test::kernel_name(pass, s);
                    check_rows<T>(
                        r.d_q, naive.d_q, oracle.d_q, oracle.d_q_noise, c.p.d, k + " dQ", bwd);
                    check_rows<T>(
                        r.d_k, naive.d_k, oracle.d_k, oracle.d_k_noise, c.p.d, k + " dK", bwd);
                    check_rows<T>(
                        r.d_v, naive.d_v, oracle.d_v, oracle.d_v_noise, c.p.d_v, k + " dV", bwd);
                    INFO(bwd.first_failure);
                    REQUIRE(bwd.failures == 0);
                }
            }
        }
    }
    report("adversarial " + std::string(family) + " " +
           std::string(sizeof(T) == 4 ? "float" : "double") + ": " + std::to_string(cases) +
           " cases, " + std::to_string(runs) + " kernel runs, " +
           std::to_string(fwd.rows + bwd.rows) + " rows checked, worst error ratio " +
           std::to_string(std::max(fwd.worst_ratio, bwd.worst_ratio)) + " (forward " +
           std::to_string(fwd.worst_ratio) + ", backward " + std::to_string(bwd.worst_ratio) +
           "), " + std::to_string(fwd.nonfinite_in + bwd.nonfinite_in) +
           " oracle elements non-finite (skipped)");
    CHECK(fwd.rows > 0);
    CHECK(bwd.rows > 0);
}

} // namespace ioattn::test::adversarial
