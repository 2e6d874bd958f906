// Tests of the native bf16 fused forward (lib/src/dense/forward_fused_bf16.cpp, docs/design.md
// section 16) through dense::forward with bf16 views. On a CPU with AVX512_BF16 it is the path
// that runs (bf16_kernels_native), and its results differ from the widening path's. Against
// the double reference on the same bf16 inputs (u = 2^-8, u32 = 2^-24):
//   max|O - O_ref| <= (u + 2 (n_k + d) u32) max|O_ref| + u max|V|,
//   |L - L_ref| <= 2 (n_k + d) u32 (1 + |L_ref|),
// causal and not, GQA, odd d and d_v, n_q and n_k not multiples of the tile, fully masked rows;
// bitwise equal at one thread and all; counted I/O equals io_cost and the dry run; the widening
// path (IOATTN_ISA naming the active target) is within the same tolerance of it; on the
// adversarial cases NaN and infinities land where the widening path puts them.

#include "adversarial.hpp"
#include "bf16_native.hpp"
#include "scoped_env.hpp"

#include <ioattn/bf16.hpp>
#include <ioattn/dense.hpp>
#include <ioattn/isa.hpp>

#include <catch2/catch.hpp>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace dense_bf16_native_test {

using ioattn::bf16;
using ioattn::MemoryModel;
using ioattn::NullCounter;
using ioattn::Pass;
using ioattn::Problem;
using ioattn::Schedule;
using ioattn::Tiling;
using ioattn::test::bf16_shape;
using ioattn::test::force_widening;
using ioattn::test::native_expected;
using ioattn::test::widened;
using Run = ioattn::test::ForwardRun;

constexpr double kU16 = 0x1p-8;
constexpr double kU32 = 0x1p-24;

/// The double reference on the run's inputs.
struct Reference {
    std::vector<double> o, lse;

    explicit Reference(const Run& r) {
        std::vector<double> q = widened(r.q), k = widened(r.k), v = widened(r.v);
        o.assign(r.o.size(), 0.0);
        lse.assign(r.lse.size(), 0.0);
        ioattn::dense::forward_reference(ioattn::ForwardArgs<double>::packed(
            r.p, q.data(), k.data(), v.data(), o.data(), lse.data()));
    }
};

double max_abs(const std::vector<double>& x) {
    double m = 0;
    for (const double e : x)
        m = std::max(m, std::fabs(e));
    return m;
}

/// Checks O and L of `r` against the reference within the derived tolerance; returns
/// max|O - O_ref| / max|O_ref|.
double check_accuracy(const Run& r, const Reference& ref) {
    const double acc32 = 2.0 * static_cast<double>(r.p.n_k + r.p.d) * kU32;
    const double tol = (kU16 + acc32) * max_abs(ref.o) + kU16 * max_abs(widened(r.v));
    double err = 0;
    for (std::size_t i = 0; i < r.o.size(); ++i) {
        const double e = std::fabs(static_cast<double>(static_cast<float>(r.o[i])) - ref.o[i]);
        err = std::isnan(e) || e > err ? e : err;
    }
    CHECK(err <= tol);
    bool l_ok = true;
    for (std::size_t i = 0; i < r.lse.size(); ++i) {
        const double l = static_cast<double>(r.lse[i]), want = ref.lse[i];
        const bool same_inf = std::isinf(l) && l == want;
        l_ok = l_ok && (same_inf || std::fabs(l - want) <= acc32 * (1.0 + std::fabs(want)));
    }
    CHECK(l_ok);
    const double top = max_abs(ref.o);
    return top > 0 ? err / top : err;
}

TEST_CASE("bf16 native: runs on this CPU and differs from the widening path", "[bf16][dense]") {
    CHECK(ioattn::bf16_kernels_native() == native_expected());
    if (!ioattn::bf16_kernels_native()) {
        WARN("the native bf16 kernel does not run here: nothing to compare");
        return;
    }
    Run r(bf16_shape(70, 90, 16, 24, false, 4, 2), 1);
    const MemoryModel m{1 << 13};
    const Tiling t = Tiling::for_memory(Schedule::fused, m, r.p);
    NullCounter n;
    ioattn::dense::forward(r.args(), t, m, n);
    const std::vector<bf16> native = r.o;
    {
        const auto env = force_widening();
        CHECK_FALSE(ioattn::bf16_kernels_native());
        ioattn::dense::forward(r.args(), t, m, n);
    }
    CHECK_FALSE(native == r.o); // P rounded to bf16: some element differs
    CHECK(ioattn::bf16_kernels_native());
}

TEST_CASE("bf16 native: agrees with the double reference, exact I/O, thread-count invariant",
          "[bf16][dense]") {
    const std::vector<Problem> shapes = {
        bf16_shape(70, 90, 16, 24, false, 4, 2), // GQA, ragged tiles
        bf16_shape(70, 90, 16, 24, true, 4, 2),
        bf16_shape(100, 100, 7, 5, true),  // odd d, d_v
        bf16_shape(33, 200, 64, 64, true), // n_q < n_k: the diagonal cut
        bf16_shape(1, 1, 1, 1, false),
        bf16_shape(130, 17, 3, 9, true), // n_q > n_k: fully masked rows
        bf16_shape(300, 257, 128, 128, false),
    };
    for (const MemoryModel m : {MemoryModel{1 << 13}, MemoryModel{1 << 17}})
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            Run r(shapes[s], 10 + s);
            const auto fits = Tiling::try_for_memory(Schedule::fused, m, r.p);
            if (!fits)
                continue;
            const Tiling t = *fits;
            CAPTURE(s, m.fast_words, t.rows, t.cols);
            ioattn::IoCounter c(m.fast_words);
            ioattn::dense::forward(r.args(), t, m, c);
            CHECK(c.report() == ioattn::io_cost(r.p, t, Pass::forward));
            CHECK(c.report() == ioattn::dense::dry_run_forward(r.p, t, m));
            check_accuracy(r, Reference(r));
            const std::vector<bf16> o_all = r.o;
            const std::vector<float> l_all = r.lse;
            {
                tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
                NullCounter n;
                ioattn::dense::forward(r.args(), t, m, n);
            }
            CHECK(r.o == o_all);
            CHECK(std::equal(r.lse.begin(), r.lse.end(), l_all.begin(), [](float a, float b) {
                return std::memcmp(&a, &b, sizeof(a)) == 0;
            }));
        }
}

TEST_CASE("bf16 native: the widening path is within the tolerance of it", "[bf16][dense]") {
    for (const bool causal : {false, true}) {
        CAPTURE(causal);
        Run r(bf16_shape(200, 333, 64, 64, causal), 5);
        const Reference ref(r);
        const MemoryModel m{1 << 15};
        const Tiling t = Tiling::for_memory(Schedule::fused, m, r.p);
        NullCounter n;
        ioattn::dense::forward(r.args(), t, m, n);
        const double native = check_accuracy(r, ref);
        const std::vector<bf16> o_native = r.o;
        {
            const auto env = force_widening();
            ioattn::dense::forward(r.args(), t, m, n);
        }
        const double widening = check_accuracy(r, ref);
        const double tol =
            (kU16 + 2.0 * static_cast<double>(r.p.n_k + r.p.d) * kU32) * max_abs(ref.o) +
            kU16 * max_abs(widened(r.v));
        double gap = 0;
        for (std::size_t i = 0; i < r.o.size(); ++i)
            gap = std::max<double>(
                gap, std::fabs(static_cast<float>(r.o[i]) - static_cast<float>(o_native[i])));
        CHECK(gap <= tol);
        INFO("max|O - O_ref| / max|O_ref|: native " << native << ", widening " << widening);
        CHECK(native < 4 * kU16);
    }
}

TEST_CASE("bf16 native: adversarial inputs land where the widening path puts them",
          "[bf16][dense][adversarial]") {
    namespace adv = ioattn::test::adversarial;
    for (std::uint64_t seed = 0; seed < 60; ++seed) {
        const adv::Case<float> c = adv::make_case<float>(seed * 7 + 3, false);
        CAPTURE(seed, adv::kKinds[c.kind]);
        Run r(c.p, 1);
        for (std::size_t i = 0; i < r.q.size(); ++i)
            r.q[i] = bf16(c.q[i]);
        for (std::size_t i = 0; i < r.k.size(); ++i)
            r.k[i] = bf16(c.k[i]);
        for (std::size_t i = 0; i < r.v.size(); ++i)
            r.v[i] = bf16(c.v[i]);
        const MemoryModel m{1 << 10};
        const Tiling t = Tiling::for_memory(Schedule::fused, m, r.p);
        NullCounter n;
        ioattn::dense::forward(r.args(), t, m, n);
        const std::vector<bf16> o_native = r.o;
        const std::vector<float> l_native = r.lse;
        {
            const auto env = force_widening();
            ioattn::dense::forward(r.args(), t, m, n);
        }
        // finite V rows bound every finite output (a convex combination, rounded twice)
        double v_max = 0;
        for (const bf16 e : r.v)
            if (std::isfinite(static_cast<float>(e)))
                v_max = std::max(v_max, std::fabs(static_cast<double>(static_cast<float>(e))));
        // ill-conditioned scores (1e30 spans, a huge scale): only where NaN and Inf land
        const bool conditioned = c.kind != 0 && c.kind != 9;
        bool same_class = true, bounded = true, close = true;
        for (std::size_t i = 0; i < r.o.size(); ++i) {
            const auto a = static_cast<double>(static_cast<float>(o_native[i]));
            const auto b = static_cast<double>(static_cast<float>(r.o[i]));
            same_class = same_class && std::isnan(a) == std::isnan(b) &&
                         std::isinf(a) == std::isinf(b) && (!std::isinf(a) || a == b);
            if (std::isfinite(a) && std::isfinite(b)) {
                bounded = bounded && std::fabs(a) <= v_max * (1 + 4 * kU16);
                close = close && (!conditioned || std::fabs(a - b) <= 4 * kU16 * v_max + 1e-30);
            }
        }
        for (std::size_t i = 0; i < r.lse.size(); ++i) {
            const double a = l_native[i], b = r.lse[i];
            same_class = same_class && std::isnan(a) == std::isnan(b) &&
                         std::isinf(a) == std::isinf(b) && (!std::isinf(a) || a == b);
            if (conditioned && std::isfinite(a) && std::isfinite(b))
                close = close && std::fabs(a - b) <= 1e-5 * (1 + std::fabs(b));
        }
        CHECK(same_class);
        CHECK(bounded);
        CHECK(close);
    }
}

} // namespace dense_bf16_native_test
